// `anxin kv plan`: how many tokens and concurrent sequences fit in device
// memory, per KV format, side by side (docs/serve.md).
//
//   anxin kv plan --model llama-3-8b --device-memory 80GiB --seq-len 4096
//   anxin kv plan --layers 80 --kv-heads 8 --head-dim 128 --weights 138GiB --tp 4
//                 --device-memory 64GiB --format fp16,int8,int4,int4-asym:kivi
#include <cstdio>
#include <memory>
#include <sstream>

#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/serve/kv_plan.h"

namespace anxin::cli {
namespace {

namespace serve = anxin::serve;

struct Opts {
  std::string model, device_memory, weights, reserve = "1GiB", formats = "fp16,int8,int4";
  int layers = 0, kv_heads = 0, head_dim = 0, tp = 1, block = 16, seq_len = 4096;
  double utilization = 0.9;
};

int Run(const Opts& o, const GlobalOptions& g) {
  serve::KvPlanInput in;
  if (!o.model.empty()) {
    if (auto s = serve::ApplyModelPreset(o.model, in); !s)
      return ReportError(s.error().With("--model"));
  }
  if (o.layers > 0) in.shape.layers = o.layers;
  if (o.kv_heads > 0) in.shape.kv_heads = o.kv_heads;
  if (o.head_dim > 0) in.shape.head_dim = o.head_dim;
  if (o.model.empty() && (o.layers <= 0 || o.kv_heads <= 0 || o.head_dim <= 0)) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "give --model NAME, or --layers, --kv-heads and --head-dim"));
  }
  auto dev = ParseBytes(o.device_memory);
  if (!dev) return ReportError(dev.error().With("--device-memory"));
  in.device_memory = *dev;
  if (!o.weights.empty()) {
    auto w = ParseBytes(o.weights);
    if (!w) return ReportError(w.error().With("--weights"));
    in.weights_bytes = *w;
  } else if (o.model.empty()) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--weights is required without --model (e.g. --weights 16GiB)"));
  }
  auto reserve = ParseBytes(o.reserve);
  if (!reserve) return ReportError(reserve.error().With("--reserve"));
  in.reserve_bytes = *reserve;
  in.tp = o.tp;
  in.memory_utilization = o.utilization;
  in.block_tokens = o.block;
  in.seq_len = o.seq_len;
  std::stringstream ss(o.formats);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto f = serve::ParseKvFormat(item);
    if (!f) return ReportError(f.error().With("--format"));
    in.formats.push_back(*f);
  }
  auto plan = serve::MakeKvPlan(in);
  if (!plan) return ReportError(plan.error());
  if (g.json) {
    std::printf("%s\n", serve::KvPlanJson(*plan).dump(2).c_str());
  } else {
    std::fputs(serve::KvPlanText(*plan).c_str(), stdout);
  }
  return plan->fits ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  std::string presets;
  for (const auto& p : serve::ModelPresets()) presets += (presets.empty() ? "" : ", ") + p.name;
  app.add_option("--model", o->model, "model preset: " + presets);
  app.add_option("--layers", o->layers, "transformer layers (overrides the preset)")
      ->check(AtLeast(1));
  app.add_option("--kv-heads", o->kv_heads, "KV heads (overrides the preset)")->check(AtLeast(1));
  app.add_option("--head-dim", o->head_dim, "head dimension (overrides the preset)")
      ->check(AtLeast(1));
  app.add_option("--weights", o->weights,
                 "size of the whole model's weights, e.g. 16GiB (default with --model: 2 bytes a "
                 "parameter)")
      ->check(Bytes(0));
  app.add_option("--tp", o->tp, "tensor-parallel devices sharing the model")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option(
         "--device-memory", o->device_memory,
         "memory of one device in powers of 1024, e.g. 80GiB: a device sold as \"80 GB\" has "
         "80 GiB (\"80GB\" is refused as ambiguous)")
      ->required()
      ->check(Bytes(1));
  app.add_option("--memory-utilization", o->utilization,
                 "share of device memory the server may use (vLLM's gpu_memory_utilization)")
      ->capture_default_str()
      ->check(Share());
  app.add_option("--reserve", o->reserve,
                 "memory kept for activations, graphs and workspace (measure yours)")
      ->capture_default_str()
      ->check(Bytes(0));
  app.add_option("--block-size", o->block, "tokens per KV block")
      ->capture_default_str()
      ->check(InRange(1, 4096));
  app.add_option("--seq-len", o->seq_len, "tokens of one sequence, prompt + output")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--format", o->formats,
                 "KV formats, comma-separated: fp16, int8, int8-asym, int4 (q4_0), int4-asym, "
                 "with :gN and :kivi")
      ->capture_default_str();
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(kv, plan,
                          "how many tokens and sequences fit in device memory, per KV format",
                          Setup);

}  // namespace
}  // namespace anxin::cli
