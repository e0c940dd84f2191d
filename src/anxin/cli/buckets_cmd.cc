// `anxin buckets`: sequence-length buckets for static-shape compilers, and
// `anxin buckets plan`: the boundaries that waste the fewest padded tokens
// (docs/kernels.md).
//
//   anxin buckets plan --lengths lengths.txt --max-buckets 4 --align 128
//   anxin buckets plan --lengths data.jsonl --cost-model compile=40,throughput=50000 --json
#include <cstdio>
#include <memory>

#include "anxin/base/strings.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/kernels/buckets.h"

namespace anxin::cli::buckets_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(buckets, "sequence-length buckets: plan padded shapes to compile");

struct Opts {
  std::string lengths, cost_model, hand_picked = "4096,8192,16384";
  int max_buckets = 3;
  int64_t align = 128, step_tokens = 65536, truncate = 0;
};

int Run(const Opts& o, const GlobalOptions& g) {
  kernels::BucketPlanOptions opts;
  opts.max_buckets = o.max_buckets;
  opts.align = o.align;
  opts.step_tokens = o.step_tokens;
  opts.truncate = o.truncate;
  opts.hand_picked.clear();
  for (std::string_view item : Split(o.hand_picked, ',')) {
    auto v = ParseInt(Trim(item));
    if (!v || *v < 1)
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "'" + std::string(item) + "' is not a length: give e.g. 4096,8192")
                             .With("--hand-picked"));
    opts.hand_picked.push_back(*v);
  }
  if (!o.cost_model.empty()) {
    auto cost = kernels::ParseCostModel(o.cost_model);
    if (!cost) return ReportError(cost.error().With("--cost-model"));
    opts.cost = *cost;
  }
  auto plan = kernels::PlanBucketsForFile(o.lengths, opts);
  if (!plan) return ReportError(plan.error());
  if (g.json) {
    std::printf("%s\n", kernels::BucketPlanJson(*plan).dump(2).c_str());
  } else {
    std::fputs(kernels::BucketPlanText(*plan).c_str(), stdout);
  }
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--lengths", o->lengths,
                 "sequence lengths: one number a line, a length,count CSV, or JSON Lines with "
                 "\"length\" or \"input_ids\"")
      ->required();
  app.add_option("--max-buckets", o->max_buckets, "most buckets (compiled shapes), K >= 1")
      ->capture_default_str()
      ->check(InRange(1, 4096));
  app.add_option("--align", o->align, "bucket lengths are multiples of this many tokens")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--step-tokens", o->step_tokens,
                 "padded tokens one training step processes (for tokens/step)")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--truncate", o->truncate,
                 "cut longer sequences to this many tokens first (the training context)")
      ->check(AtLeast(0));
  app.add_option("--hand-picked", o->hand_picked, "the buckets to compare with, comma-separated")
      ->capture_default_str();
  app.add_option("--cost-model", o->cost_model,
                 "weigh compile time against padding: compile=SECONDS,throughput=TOKENS_PER_S; "
                 "picks the cheapest K <= --max-buckets");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(buckets, plan,
                          "the bucket lengths that waste the fewest padded tokens, beside "
                          "hand-picked ones and powers of two",
                          Setup);

}  // namespace
}  // namespace anxin::cli::buckets_cmd
