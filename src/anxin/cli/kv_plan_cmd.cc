// `anxin kv plan`: how many tokens and concurrent sequences fit in device
// memory, per KV format, side by side (docs/serve.md).
//
//   anxin kv plan --model llama-3-8b --device-memory 80GiB --seq-len 4096
//   anxin kv plan --layers 80 --kv-heads 8 --head-dim 128 --weights 138GiB --tp 4
//                 --device-memory 64GiB --format fp16,int8,int4,int4-asym:kivi
#include <cstdio>
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/kv/kv_plan.h"

namespace anxin::cli::kv_plan_cmd {
namespace {

namespace kv = anxin::kv;

int Run(const kv::KvPlanRequest& request, const GlobalOptions& g) {
  auto plan = kv::PlanKv(request);
  if (!plan) return ReportError(plan.error());
  if (g.json) {
    std::printf("%s\n", kv::KvPlanJson(*plan).dump(2).c_str());
  } else {
    std::fputs(kv::KvPlanText(*plan).c_str(), stdout);
  }
  return plan->fits ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<kv::KvPlanRequest>();
  std::string presets;
  for (const auto& p : kv::ModelPresets()) presets += (presets.empty() ? "" : ", ") + p.name;
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
}  // namespace anxin::cli::kv_plan_cmd
