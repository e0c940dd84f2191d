// KV-cache sizing: from a model's shape, the device memory, the weights and a
// KV format, how many tokens and how many concurrent sequences of a given
// length fit; several formats side by side (`anxin kv plan`).
//
//   KvPlanInput in;
//   ANXIN_TRY(ApplyModelPreset("llama-3-8b", in));   // shape and weights
//   in.device_memory = 80ull << 30;
//   in.seq_len = 4096;
//   in.formats = {ParseKvFormat("fp16").value(), ParseKvFormat("int4").value()};
//   ANXIN_ASSIGN_OR_RETURN(KvPlan plan, MakeKvPlan(in));
//   std::fputs(KvPlanText(plan).c_str(), stdout);
//
//   KvPlanRequest req{.model = "llama-3-8b", .device_memory = "80GiB"};   // as flags give it
//   req.formats = "fp16,int4";
//   ANXIN_ASSIGN_OR_RETURN(KvPlan same, PlanKv(req));
//
// Per device: with tensor parallelism of tp, each device holds
// ceil(kv_heads / tp) KV heads and weights / tp bytes.
// Thread safety: pure functions.
#ifndef ANXIN_KV_KV_PLAN_H_
#define ANXIN_KV_KV_PLAN_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/kv/kv_format.h"

namespace anxin::kv {

struct ModelPreset {
  std::string name;  // "llama-3-8b"
  ModelKvShape shape;
  double params = 0;  // parameters, for the weights' size
};
// The presets `--model` knows, from the models' published configurations.
const std::vector<ModelPreset>& ModelPresets();

struct KvPlanInput {
  std::string model;  // preset name or "" (shape given by hand)
  ModelKvShape shape{};
  int tp = 1;
  uint64_t device_memory = 0;
  double memory_utilization = 0.9;      // share of device memory the server may use
  uint64_t weights_bytes = 0;           // whole model; divided by tp
  uint64_t reserve_bytes = 1ull << 30;  // activations, graphs, workspace
  int block_tokens = 16;
  int seq_len = 4096;  // tokens of one sequence (prompt + output)
  std::vector<KvFormat> formats{};
};

// Sets shape and weights (bf16, 2 bytes a parameter) from a preset.
// kNotFound listing the presets.
[[nodiscard]] Status ApplyModelPreset(const std::string& name, KvPlanInput& in);

// A plan asked for as a command line gives it (`anxin kv plan`, `anxin serve
// sim`): a preset name with optional shape overrides, sizes as text ("80GiB").
// Errors name the flag (--model, --device-memory, --weights, --reserve,
// --format).
struct KvPlanRequest {
  std::string model{};  // preset; "" needs layers, kv_heads, head_dim and weights
  std::string device_memory{}, weights{}, reserve = "1GiB";
  int layers = 0, kv_heads = 0, head_dim = 0;  // > 0 overrides the preset
  int tp = 1, block = 16, seq_len = 4096;
  double utilization = 0.9;
  std::string formats = "fp16,int8,int4";  // comma-separated
};
[[nodiscard]] Result<KvPlanInput> MakeKvPlanInput(const KvPlanRequest& request);

struct KvPlanRow {
  KvFormat format;
  double bits_per_value = 0;
  double bytes_per_token = 0;  // per device, all layers, K and V
  uint64_t block_bytes = 0;
  uint64_t per_sequence_extra_bytes = 0;  // the fp16 key residual of :kivi
  int64_t blocks = 0;
  int64_t tokens = 0;          // blocks x block_tokens
  int64_t sequences = 0;       // concurrent sequences of seq_len tokens
  double tokens_vs_first = 0;  // tokens relative to the first format
};

struct KvPlan {
  KvPlanInput input;
  int kv_heads_per_device = 0;
  uint64_t usable_bytes = 0;  // device_memory x memory_utilization
  uint64_t weights_per_device = 0;
  int64_t kv_budget_bytes = 0;  // usable - weights - reserve (may be negative)
  int blocks_per_sequence = 0;
  std::vector<KvPlanRow> rows;
  // Every format fits at least one sequence.
  bool fits = false;
};

[[nodiscard]] Result<KvPlan> MakeKvPlan(const KvPlanInput& input);
std::string KvPlanText(const KvPlan& plan);
nlohmann::json KvPlanJson(const KvPlan& plan);
// MakeKvPlan(MakeKvPlanInput(request)).
[[nodiscard]] Result<KvPlan> PlanKv(const KvPlanRequest& request);

// "1.5 GiB", "512 MiB".
std::string FormatBytes(double bytes);

}  // namespace anxin::kv

#endif  // ANXIN_KV_KV_PLAN_H_
