#include "anxin/comm/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "anxin/base/strings.h"
#include "anxin/comm/stats.h"

namespace anxin::comm {
namespace {

Result<std::vector<std::string>> Algorithms(const SweepRequest& request) {
  std::vector<std::string> algos;
  if (!request.algos.empty()) {
    for (std::string_view a : Split(request.algos, ',')) algos.emplace_back(a);
  } else {
    algos = DefaultSweepAlgorithms(request.bench.engine, request.bench.op);
  }
  if (algos.empty()) {
    return InvalidArgument("--sweep-algos: the " + request.bench.engine +
                           " engine has no algorithm choice for " +
                           std::string(OpName(request.bench.op)));
  }
  // Every name is checked before the first run starts.
  for (const std::string& algo : algos) {
    ANXIN_TRY(AlgorithmEnvironment(request.bench.engine, request.bench.op, algo));
  }
  return algos;
}

// One launched run of `algo`, read back from the worker's JSON.
Result<LaunchResult> RunOne(const SweepRequest& request, const std::string& algo,
                            const std::function<void(const std::string&)>& on_progress,
                            CommRun& run) {
  LaunchRequest launch = request.launch;
  ANXIN_ASSIGN_OR_RETURN(launch.env,
                         AlgorithmEnvironment(request.bench.engine, request.bench.op, algo));
  BenchOptions spec = request.bench;
  spec.json = true;  // the worker's JSON is read here
  spec.json_file.clear();
  spec.csv_file.clear();
  spec.algo = algo;
  spec.launched = true;
  launch.spec = ToJson(spec).dump();
  std::string json_text;
  auto result = RunLaunch(
      BuildLaunch(launch), request.timeout,
      [&](const std::string& line) { json_text += line + "\n"; }, on_progress);
  if (!result) return std::unexpected(result.error().With("algorithm " + algo));
  if (result->status >= 2) return Unavailable("algorithm " + algo + ": the run failed");
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  ANXIN_ASSIGN_OR_RETURN(run, CommRunFromJson(j, "the worker's result for " + algo));
  return result;
}

}  // namespace

Result<SweepOutcome> RunSweep(const SweepRequest& request,
                              const std::function<void(const std::string&)>& on_progress) {
  SweepOutcome out;
  ANXIN_ASSIGN_OR_RETURN(out.sweep.algos, Algorithms(request));
  const size_t n = out.sweep.algos.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string& algo = out.sweep.algos[i];
    on_progress(fmt::format("sweep: {} ({} of {})", algo, i + 1, n));
    CommRun run;
    ANXIN_ASSIGN_OR_RETURN(LaunchResult r, RunOne(request, algo, on_progress, run));
    out.status = std::max(out.status, r.status);
    out.sweep.runs.push_back(std::move(run));
  }
  FindCrossovers(out.sweep);
  return out;
}

}  // namespace anxin::comm
