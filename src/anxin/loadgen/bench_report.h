// What `anxin bench serve` prints and writes: the summary of a run as text or
// JSON, one CSV row per request, a sweep over loads with the best setting
// under the SLOs, and an SVG chart of latency against load.
//
//   #include "anxin/base/file.h"
//
//   RunResult run;                           // from RunLoad (client.h)
//   ANXIN_ASSIGN_OR_RETURN(Slo slo, ParseSlo("ttft=500ms,tpot=50ms"));
//   Summary s = Summarize(run.records, run.duration_s, slo);
//   std::fputs(SummaryText(s, run.loop).c_str(), stdout);
//   ANXIN_TRY(WriteFileAtomic("requests.csv", RecordsCsv(run.records)));
//
//   ANXIN_ASSIGN_OR_RETURN(SweepSpec sweep, ParseSweep("concurrency=1,2,4,8"));
//   std::vector<SweepPoint> points(sweep.values.size());   // one run per value (bench.h)
//   int best = BestPoint(points, slo);       // -1 when none meets the SLOs
//   std::string svg = LatencySvg(points, sweep, slo, "title");
//
// Thread safety: free functions on values.
#ifndef ANXIN_LOADGEN_BENCH_REPORT_H_
#define ANXIN_LOADGEN_BENCH_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/loadgen/client.h"
#include "anxin/loadgen/latency_stats.h"

namespace anxin::loadgen {

// The load tester used more than this share of one core: its figures may be
// limited by itself rather than by the server.
inline constexpr double kBusyLoopShare = 0.8;

std::string SummaryText(const Summary& s, const LoopStats& loop);
nlohmann::json SummaryJson(const Summary& s, const LoopStats& loop);
// "" when the load tester kept up; else a one-line warning.
std::string OverheadWarning(const LoopStats& loop);

// Header plus one row per request; times in milliseconds from the run's start
// (due, sent) or from when the request was due (ttft, e2e).
std::string RecordsCsv(const std::vector<RequestRecord>& records);

struct SweepSpec {
  enum Kind { kConcurrency, kRate };
  Kind kind = kConcurrency;
  std::vector<double> values{};
  std::string_view name() const { return kind == kConcurrency ? "concurrency" : "rate"; }
};
// "concurrency=1,2,4,8" or "rate=1,2.5,5" (values > 0, ascending or not).
[[nodiscard]] Result<SweepSpec> ParseSweep(std::string_view text);

struct SweepPoint {
  double value = 0;  // the concurrency or rate
  Summary summary;
  LoopStats loop;
  bool meets = false;  // attainment >= the target (always true without SLOs)
};

// The best point: with SLOs, the highest goodput among those that meet them
// (-1 when none does); without, the highest output-token throughput.
int BestPoint(const std::vector<SweepPoint>& points, const Slo& slo);
std::string SweepText(const std::vector<SweepPoint>& points, const SweepSpec& spec, const Slo& slo,
                      double attainment_target);
nlohmann::json SweepJson(const std::vector<SweepPoint>& points, const SweepSpec& spec,
                         const Slo& slo, double attainment_target);

// Median and p99 of TTFT, TPOT and E2E against the load (one point per sweep
// value; a single run is one point), with the SLOs as dashed lines.
std::string LatencySvg(const std::vector<SweepPoint>& points, const SweepSpec& spec, const Slo& slo,
                       const std::string& title);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_BENCH_REPORT_H_
