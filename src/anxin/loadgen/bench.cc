#include "anxin/loadgen/bench.h"

#include <fmt/format.h>

namespace anxin::loadgen {

Result<BenchResult> RunBench(const std::vector<Prompt>& prompts, const BenchPlan& plan) {
  BenchResult result;
  std::vector<double> values = plan.sweep ? plan.sweep->values : std::vector<double>{0};
  for (double v : values) {
    LoadOptions load = plan.load;
    if (plan.sweep && plan.sweep->kind == SweepSpec::kConcurrency) {
      load.arrivals.concurrency = static_cast<int64_t>(v);
    } else if (plan.sweep) {
      if (!load.arrivals.open_loop()) {
        load.arrivals.kind = ArrivalSpec::kPoisson;
        load.arrivals.concurrency = 0;
      }
      load.arrivals.rate = v;
    }
    if (plan.on_point) plan.on_point(load.arrivals);
    ANXIN_ASSIGN_OR_RETURN(RunResult run, RunLoad(prompts, load));
    SweepPoint point;
    point.value = !plan.sweep
                      ? (load.arrivals.open_loop() ? load.arrivals.rate
                                                   : static_cast<double>(load.arrivals.concurrency))
                      : v;
    point.summary = Summarize(run.records, run.duration_s, plan.slo);
    point.loop = run.loop;
    point.meets = plan.slo.empty() || point.summary.attainment >= plan.attainment_target;
    result.points.push_back(std::move(point));
    result.records.push_back(std::move(run.records));
    if (plan.load.stop.stop_requested()) break;  // interrupted: keep what ran
  }
  return result;
}

std::string BenchCsv(const BenchResult& result, const std::optional<SweepSpec>& sweep) {
  std::string out;
  for (size_t i = 0; i < result.records.size(); ++i) {
    std::string csv = RecordsCsv(result.records[i]);
    if (!sweep) return csv;
    size_t start = 0;
    bool header = true;
    while (start < csv.size()) {
      size_t nl = csv.find('\n', start);
      std::string_view line(csv.data() + start, nl - start);
      start = nl + 1;
      if (header) {
        header = false;
        if (i == 0) out += fmt::format("{},{}\n", sweep->name(), line);
        continue;
      }
      out += fmt::format("{:g},{}\n", result.points[i].value, line);
    }
  }
  return out;
}

}  // namespace anxin::loadgen
