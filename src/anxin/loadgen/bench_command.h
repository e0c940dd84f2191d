// `anxin bench serve` from its flags to its report: BuildBenchPlan checks
// every flag, loads the prompts (a dataset or synthetic lengths) and the
// tokenizer, and checks the server answers; RunBenchCommand runs the plan,
// writes --csv and --svg, and renders the report (text or JSON) with the
// verdict the exit code follows.
//
//   BenchFlags flags;
//   flags.url = "http://127.0.0.1:8000";
//   flags.concurrency = 8;
//   flags.slo = "ttft=500ms,tpot=50ms";
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<BenchSetup> setup, BuildBenchPlan(flags));
//   ANXIN_ASSIGN_OR_RETURN(BenchOutcome out, RunBenchCommand(*setup, /*json=*/false));
//   std::fputs(out.report.c_str(), stdout);   // out.passed: the SLOs were met
//
// Errors name the flag and the fix ("--rate 'x': use requests per second...").
//
// Thread safety: one setup per thread.
#ifndef ANXIN_LOADGEN_BENCH_COMMAND_H_
#define ANXIN_LOADGEN_BENCH_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/loadgen/bench.h"
#include "anxin/loadgen/dataset.h"
#include "anxin/loadgen/tokenizer.h"

namespace anxin::loadgen {

// The flags of `anxin bench serve`, as text where the command line gives text.
struct BenchFlags {
  std::string url = "http://127.0.0.1:8000", api = "completions", endpoint, model;
  std::string dataset, input_tokens = "256", output_tokens, tokenizer;
  int64_t requests = 200;
  int64_t concurrency = -1;  // -1: not given
  std::string rate, arrival = "poisson";
  double burstiness = 1;
  std::string duration, timeout = "10m", connect_timeout = "5s";
  std::string slo, sweep, csv, svg, extra_body;
  double attainment = 0.9;
  uint64_t seed = 0;
  std::vector<std::string> headers;  // "Name: value"
  bool no_stream = false, ignore_eos = false, no_keep_alive = false;
  // --arrival or --burstiness was given (they need --rate).
  bool open_loop_flags = false;
  // OPENAI_API_KEY: sent as "Authorization: Bearer" unless the API is Triton
  // or a header sets Authorization.
  std::string api_key;
};

// A plan ready to run. Not movable: plan.load.tokenizer points into it.
struct BenchSetup {
  BenchFlags flags;
  Api api = Api::kCompletions;
  BenchPlan plan;
  std::vector<Prompt> prompts;
  std::optional<Tokenizer> tokenizer;
  BenchSetup() = default;
  BenchSetup(const BenchSetup&) = delete;
  BenchSetup& operator=(const BenchSetup&) = delete;
};

[[nodiscard]] Result<std::unique_ptr<BenchSetup>> BuildBenchPlan(const BenchFlags& flags);

struct BenchOutcome {
  std::string report;   // what the command prints on stdout
  bool passed = false;  // some request succeeded and the SLOs were met (a sweep: some point)
};

// Runs setup.plan (progress, on_point and stop as the caller set them).
[[nodiscard]] Result<BenchOutcome> RunBenchCommand(const BenchSetup& setup, bool json);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_BENCH_COMMAND_H_
