// `anxin kv accuracy`: what each KV format costs in attention accuracy, on
// K/V tensors a user dumped (.npy or safetensors) or on synthetic activations
// with outlier channels (docs/serve.md).
//
//   anxin kv accuracy --keys k.npy --values v.npy --format fp16,int8,int4,int4-asym:kivi
//   anxin kv accuracy --safetensors kv.safetensors --keys layer0.k --values layer0.v
//   anxin kv accuracy --min-cosine 0.99          # synthetic; exit 1 below the bar
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/serve/kv_accuracy.h"

namespace anxin::cli {
namespace {

namespace serve = anxin::serve;

struct Opts {
  serve::KvFiles files;
  std::string formats = "fp16,int8,int8-asym,int4,int4-asym,int4-asym:kivi";
  int block = 32, queries = 16, tokens = 1024, kv_heads = 2, head_dim = 128;
  uint64_t seed = 1;
  double min_cosine = 0;
};

std::string Num(double v) { return fmt::format("{:.6g}", v); }

int Run(const Opts& o, const GlobalOptions& g) {
  std::vector<serve::KvFormat> formats;
  std::stringstream ss(o.formats);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto f = serve::ParseKvFormat(item);
    if (!f) return ReportError(f.error().With("--format"));
    formats.push_back(*f);
  }
  serve::KvTensors kv;
  if (o.files.keys.empty() != o.files.values.empty()) {
    return ReportError(Error(ErrorCode::kInvalidArgument, "give both --keys and --values"));
  }
  if (!o.files.keys.empty()) {
    auto r = serve::LoadKvTensors(o.files);
    if (!r) return ReportError(r.error());
    kv = std::move(*r);
  } else {
    if (o.tokens <= 0 || o.kv_heads <= 0 || o.head_dim <= 0 || o.head_dim % 16 != 0) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--tokens and --kv-heads must be positive and --head-dim a "
                               "multiple of 16"));
    }
    kv = serve::SyntheticActivations({.tokens = o.tokens,
                                      .kv_heads = o.kv_heads,
                                      .head_dim = o.head_dim,
                                      .q_heads = o.kv_heads * 4,
                                      .queries = o.queries,
                                      .seed = o.seed});
  }
  auto report =
      serve::MeasureAccuracy(kv, formats, {.block_tokens = o.block, .queries = o.queries});
  if (!report) return ReportError(report.error());
  bool ok = true;
  for (const auto& r : report->rows) ok = ok && r.attention.cosine >= o.min_cosine;
  if (g.json) {
    nlohmann::json j;
    j["source"] = report->source;
    j["tokens"] = report->tokens;
    j["kv_heads"] = report->kv_heads;
    j["head_dim"] = report->head_dim;
    j["queries"] = report->queries;
    j["q_heads"] = report->q_heads;
    j["min_cosine"] = o.min_cosine;
    j["pass"] = ok;
    for (const auto& r : report->rows) {
      j["formats"].push_back({{"format", r.format.Name()},
                              {"bits_per_value", r.bits_per_value},
                              {"attention_cosine", r.attention.cosine},
                              {"attention_max_abs_err", r.attention.max_abs_err},
                              {"attention_mean_abs_err", r.attention.mean_abs_err},
                              {"key_max_abs_err", r.keys.max_abs_err},
                              {"key_rmse", r.keys.rmse},
                              {"value_max_abs_err", r.values.max_abs_err},
                              {"value_rmse", r.values.rmse}});
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "K/V: %s\n%d tokens, %d KV heads, head dim %d; %d queries x %d heads against "
        "float64 attention\n\n",
        report->source.c_str(), report->tokens, report->kv_heads, report->head_dim, report->queries,
        report->q_heads);
    std::printf("%-20s %6s %12s %12s %12s %12s %12s\n", "format", "bits", "attn cosine",
                "attn maxabs", "attn meanabs", "K rmse", "V rmse");
    for (const auto& r : report->rows) {
      std::printf("%-20s %6.2f %12s %12s %12s %12s %12s\n", r.format.Name().c_str(),
                  r.bits_per_value, fmt::format("{:.6f}", r.attention.cosine).c_str(),
                  Num(r.attention.max_abs_err).c_str(), Num(r.attention.mean_abs_err).c_str(),
                  Num(r.keys.rmse).c_str(), Num(r.values.rmse).c_str());
    }
    if (o.min_cosine > 0) {
      std::printf("\n%s: attention cosine %s %g for every format\n", ok ? "pass" : "fail",
                  ok ? ">=" : "below", o.min_cosine);
    }
  }
  return ok ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
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
}  // namespace anxin::cli
