// One `anxin bench serve` measurement: a single run at one load, or a sweep
// over concurrencies or rates, each point judged against the SLOs.
//
//   std::vector<Prompt> prompts = SyntheticPrompts(200, *ParseLengthDist("512"),
//                                                  *ParseLengthDist("128"), /*seed=*/1);
//   BenchPlan plan;
//   plan.load.target = *ParseUrl("http://127.0.0.1:8000");
//   plan.slo = *ParseSlo("ttft=500ms,tpot=50ms");
//   plan.sweep = *ParseSweep("concurrency=1,2,4,8");
//   ANXIN_ASSIGN_OR_RETURN(BenchResult r, RunBench(prompts, plan));
//   int best = BestPoint(r.points, plan.slo);
//
// Every point sends the same prompts. A sweep over concurrency runs a closed
// loop at each value (or, when the plan's arrivals are open-loop, caps the
// requests in flight); a sweep over rates runs the plan's open-loop process
// (Poisson unless it says otherwise) at each rate.
//
// Thread safety: RunBench may run on several threads with distinct plans.
#ifndef ANXIN_LOADGEN_BENCH_H_
#define ANXIN_LOADGEN_BENCH_H_

#include <functional>
#include <optional>
#include <vector>

#include "anxin/loadgen/bench_report.h"
#include "anxin/loadgen/client.h"

namespace anxin::loadgen {

struct BenchPlan {
  LoadOptions load;
  Slo slo;
  // A point meets the SLOs when at least this share of its requests do.
  double attainment_target = 0.9;
  std::optional<SweepSpec> sweep;
  // Called before each point with its arrivals, e.g. to label progress.
  std::function<void(const ArrivalSpec&)> on_point;
};

struct BenchResult {
  std::vector<SweepPoint> points;                   // one for a single run
  std::vector<std::vector<RequestRecord>> records;  // per point
};

[[nodiscard]] Result<BenchResult> RunBench(const std::vector<Prompt>& prompts,
                                           const BenchPlan& plan);

// The CSV of every point's requests, with the sweep value as first column
// when there is a sweep.
std::string BenchCsv(const BenchResult& result, const std::optional<SweepSpec>& sweep);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_BENCH_H_
