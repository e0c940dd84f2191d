// `anxin kv accuracy`: what each KV format costs in attention accuracy, on
// K/V tensors a user dumped (.npy or safetensors) or on synthetic activations
// with outlier channels (docs/serve.md).
//
//   anxin kv accuracy --keys k.npy --values v.npy --format fp16,int8,int4,int4-asym:kivi
//   anxin kv accuracy --safetensors kv.safetensors --keys layer0.k --values layer0.v
//   anxin kv accuracy --min-cosine 0.99          # synthetic; exit 1 below the bar
#include <cstdio>
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/kv/kv_accuracy.h"

namespace anxin::cli::kv_accuracy_cmd {
namespace {

namespace kv = anxin::kv;

int Run(const kv::AccuracyRequest& request, const GlobalOptions& g) {
  auto run = kv::RunAccuracy(request);
  if (!run) return ReportError(run.error());
  if (g.json) {
    std::printf("%s\n", kv::AccuracyJson(*run).dump(2).c_str());
  } else {
    std::fputs(kv::AccuracyText(*run).c_str(), stdout);
  }
  return run->pass ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<kv::AccuracyRequest>();
  app.add_option("--keys", o->files.keys, "keys: a .npy file, or a tensor name with --safetensors");
  app.add_option("--values", o->files.values, "values: as --keys");
  app.add_option("--queries", o->files.queries,
                 "queries [n, q_heads, head_dim] (default: keys of evenly spaced tokens)");
  app.add_option("--safetensors", o->files.safetensors, "read --keys/--values/--queries by name");
  app.add_option("--layout", o->files.layout,
                 "td, thd (tokens, heads, dim), htd, bhtd (Hugging Face [1, heads, tokens, dim]); "
                 "default: by rank");
  app.add_option("--format", o->formats, "KV formats, comma-separated")->capture_default_str();
  app.add_option("--block-size", o->block, "tokens per KV block")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--query-count", o->queries, "queries when none are given")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--tokens", o->tokens, "synthetic: tokens")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--kv-heads", o->kv_heads, "synthetic: KV heads")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--head-dim", o->head_dim, "synthetic: head dimension")
      ->capture_default_str()
      ->check(AtLeast(16));
  app.add_option("--seed", o->seed, "synthetic: random seed")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--min-cosine", o->min_cosine,
                 "exit 1 when any format's attention cosine is below this")
      ->check(InRange(-1, 1));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(kv, accuracy,
                          "attention accuracy of KV formats on dumped or synthetic K/V", Setup);

}  // namespace
}  // namespace anxin::cli::kv_accuracy_cmd
