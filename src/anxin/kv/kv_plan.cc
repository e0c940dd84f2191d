#include "anxin/kv/kv_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "anxin/base/config.h"

namespace anxin::kv {

const std::vector<ModelPreset>& ModelPresets() {
  // layers, KV heads, head dim and parameter counts from each model's
  // published config.json / model card.
  static const std::vector<ModelPreset> presets = {
      {"llama-2-7b", {32, 32, 128}, 6.74e9}, {"llama-2-13b", {40, 40, 128}, 13.0e9},
      {"llama-2-70b", {80, 8, 128}, 69.0e9}, {"llama-3-8b", {32, 8, 128}, 8.03e9},
      {"llama-3-70b", {80, 8, 128}, 70.6e9}, {"mistral-7b", {32, 8, 128}, 7.24e9},
      {"qwen2-7b", {28, 4, 128}, 7.62e9},    {"internlm2-7b", {32, 8, 128}, 7.74e9},
  };
  return presets;
}

Status ApplyModelPreset(const std::string& name, KvPlanInput& in) {
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == name) {
      in.model = name;
      in.shape = p.shape;
      in.weights_bytes = static_cast<uint64_t>(p.params * 2);
      return Ok();
    }
  }
  std::string names;
  for (const ModelPreset& p : ModelPresets()) names += (names.empty() ? "" : ", ") + p.name;
  return NotFound(
      fmt::format("unknown model '{}' (known: {}); or give --layers, --kv-heads, "
                  "--head-dim and --weights",
                  name, names));
}

std::string FormatBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  const double sign = b < 0 ? -1 : 1;
  b = std::fabs(b);
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", sign * b) : fmt::format("{:.2f} {}", sign * b, units[u]);
}

Result<KvPlan> MakeKvPlan(const KvPlanInput& in) {
  const ModelKvShape& s = in.shape;
  if (s.layers <= 0 || s.kv_heads <= 0 || s.head_dim <= 0) {
    return InvalidArgument(fmt::format(
        "model shape {} layers, {} KV heads, head dim {}: all must be positive (--layers, "
        "--kv-heads, --head-dim or --model)",
        s.layers, s.kv_heads, s.head_dim));
  }
  if (in.tp <= 0) return InvalidArgument("--tp must be at least 1");
  if (in.device_memory == 0) return InvalidArgument("--device-memory is required, e.g. 80GiB");
  if (!(in.memory_utilization > 0 && in.memory_utilization <= 1)) {
    return InvalidArgument(
        fmt::format("--memory-utilization {} must be in (0, 1]", in.memory_utilization));
  }
  if (in.block_tokens <= 0 || in.block_tokens > 4096) {
    return InvalidArgument("--block-size must be between 1 and 4096 tokens");
  }
  if (in.seq_len <= 0) return InvalidArgument("--seq-len must be at least 1 token");
  if (in.formats.empty()) return InvalidArgument("no KV format given (--format)");
  KvPlan plan;
  plan.input = in;
  plan.kv_heads_per_device = (s.kv_heads + in.tp - 1) / in.tp;
  plan.usable_bytes =
      static_cast<uint64_t>(static_cast<double>(in.device_memory) * in.memory_utilization);
  plan.weights_per_device = in.weights_bytes / in.tp;
  plan.kv_budget_bytes = static_cast<int64_t>(plan.usable_bytes) -
                         static_cast<int64_t>(plan.weights_per_device) -
                         static_cast<int64_t>(in.reserve_bytes);
  plan.blocks_per_sequence = (in.seq_len + in.block_tokens - 1) / in.block_tokens;
  const ModelKvShape device_shape{s.layers, plan.kv_heads_per_device, s.head_dim};
  plan.fits = true;
  for (const KvFormat& f : in.formats) {
    if (f.quantized() && s.head_dim % f.group_size != 0) {
      return InvalidArgument(fmt::format("format {}: group size {} does not divide head dim {}",
                                         f.Name(), f.group_size, s.head_dim));
    }
    KvPlanRow r;
    r.format = f;
    r.bits_per_value = f.BitsPerValue();
    r.bytes_per_token = BytesPerToken(device_shape, f);
    r.block_bytes = static_cast<uint64_t>(std::ceil(r.bytes_per_token * in.block_tokens));
    if (f.quantized() && f.key_axis == KeyAxis::kPerChannel) {
      // Keys of the group being filled wait in fp16 (KIVI's residual).
      r.per_sequence_extra_bytes = static_cast<uint64_t>(f.group_size) * s.layers *
                                   plan.kv_heads_per_device * s.head_dim * 2;
    }
    if (plan.kv_budget_bytes > 0) {
      r.blocks = plan.kv_budget_bytes / static_cast<int64_t>(r.block_bytes);
      r.tokens = r.blocks * in.block_tokens;
      const int64_t per_seq = static_cast<int64_t>(plan.blocks_per_sequence) * r.block_bytes +
                              static_cast<int64_t>(r.per_sequence_extra_bytes);
      r.sequences = plan.kv_budget_bytes / per_seq;
    }
    if (r.sequences < 1) plan.fits = false;
    plan.rows.push_back(r);
  }
  for (KvPlanRow& r : plan.rows) {
    r.tokens_vs_first =
        plan.rows[0].tokens > 0 ? static_cast<double>(r.tokens) / plan.rows[0].tokens : 0;
  }
  return plan;
}

std::string KvPlanText(const KvPlan& p) {
  const KvPlanInput& in = p.input;
  std::string out;
  out += fmt::format(
      "model: {}{} layers, {} KV heads, head dim {}; tensor parallel {} ({} KV "
      "head{} per device)\n",
      in.model.empty() ? "" : in.model + ", ", in.shape.layers, in.shape.kv_heads,
      in.shape.head_dim, in.tp, p.kv_heads_per_device, p.kv_heads_per_device == 1 ? "" : "s");
  out += fmt::format(
      "memory per device: {} x {:.2f} = {} usable - weights {} - reserve {} = KV "
      "budget {}\n",
      FormatBytes(static_cast<double>(in.device_memory)), in.memory_utilization,
      FormatBytes(static_cast<double>(p.usable_bytes)),
      FormatBytes(static_cast<double>(p.weights_per_device)),
      FormatBytes(static_cast<double>(in.reserve_bytes)),
      FormatBytes(static_cast<double>(p.kv_budget_bytes)));
  out += fmt::format("sequence: {} tokens = {} blocks of {}\n\n", in.seq_len, p.blocks_per_sequence,
                     in.block_tokens);
  out += fmt::format("{:<20} {:>10} {:>12} {:>12} {:>10} {:>12} {:>10} {:>8}\n", "format",
                     "bits/value", "bytes/token", "block", "blocks", "tokens", "sequences",
                     "tokens x");
  for (const KvPlanRow& r : p.rows) {
    out += fmt::format("{:<20} {:>10.2f} {:>12.0f} {:>12} {:>10} {:>12} {:>10} {:>7.2f}x\n",
                       r.format.Name(), r.bits_per_value, r.bytes_per_token,
                       FormatBytes(static_cast<double>(r.block_bytes)), r.blocks, r.tokens,
                       r.sequences, r.tokens_vs_first);
  }
  for (const KvPlanRow& r : p.rows) {
    if (r.per_sequence_extra_bytes > 0) {
      out += fmt::format("{}: each sequence also holds {} of fp16 keys for its incomplete group\n",
                         r.format.Name(),
                         FormatBytes(static_cast<double>(r.per_sequence_extra_bytes)));
    }
  }
  if (p.kv_budget_bytes <= 0) {
    out +=
        "\nthe weights and the reserve leave no memory for the KV cache: use more devices "
        "(--tp), a larger device, or smaller weights\n";
  } else if (!p.fits) {
    out += fmt::format(
        "\nnot even one sequence of {} tokens fits in some formats: shorten "
        "--seq-len or add devices (--tp)\n",
        in.seq_len);
  }
  return out;
}

nlohmann::json KvPlanJson(const KvPlan& p) {
  const KvPlanInput& in = p.input;
  nlohmann::json j;
  j["model"] = in.model;
  j["layers"] = in.shape.layers;
  j["kv_heads"] = in.shape.kv_heads;
  j["head_dim"] = in.shape.head_dim;
  j["tp"] = in.tp;
  j["kv_heads_per_device"] = p.kv_heads_per_device;
  j["device_memory_bytes"] = in.device_memory;
  j["memory_utilization"] = in.memory_utilization;
  j["usable_bytes"] = p.usable_bytes;
  j["weights_per_device_bytes"] = p.weights_per_device;
  j["reserve_bytes"] = in.reserve_bytes;
  j["kv_budget_bytes"] = p.kv_budget_bytes;
  j["block_tokens"] = in.block_tokens;
  j["seq_len"] = in.seq_len;
  j["blocks_per_sequence"] = p.blocks_per_sequence;
  j["fits"] = p.fits;
  j["formats"] = nlohmann::json::array();
  for (const KvPlanRow& r : p.rows) {
    j["formats"].push_back({{"format", r.format.Name()},
                            {"bits_per_value", r.bits_per_value},
                            {"bytes_per_token", r.bytes_per_token},
                            {"block_bytes", r.block_bytes},
                            {"per_sequence_extra_bytes", r.per_sequence_extra_bytes},
                            {"blocks", r.blocks},
                            {"tokens", r.tokens},
                            {"sequences", r.sequences},
                            {"tokens_vs_first", r.tokens_vs_first}});
  }
  return j;
}

Result<KvPlanInput> MakeKvPlanInput(const KvPlanRequest& r) {
  KvPlanInput in;
  if (!r.model.empty()) {
    if (auto s = ApplyModelPreset(r.model, in); !s)
      return std::unexpected(s.error().With("--model"));
  }
  if (r.layers > 0) in.shape.layers = r.layers;
  if (r.kv_heads > 0) in.shape.kv_heads = r.kv_heads;
  if (r.head_dim > 0) in.shape.head_dim = r.head_dim;
  if (r.model.empty() && (r.layers <= 0 || r.kv_heads <= 0 || r.head_dim <= 0)) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument,
                                 "give --model NAME, or --layers, --kv-heads and --head-dim"));
  }
  auto dev = ParseBytes(r.device_memory);
  if (!dev) return std::unexpected(dev.error().With("--device-memory"));
  in.device_memory = *dev;
  if (!r.weights.empty()) {
    auto w = ParseBytes(r.weights);
    if (!w) return std::unexpected(w.error().With("--weights"));
    in.weights_bytes = *w;
  } else if (r.model.empty()) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument,
                                 "--weights is required without --model (e.g. --weights 16GiB)"));
  }
  auto reserve = ParseBytes(r.reserve);
  if (!reserve) return std::unexpected(reserve.error().With("--reserve"));
  in.reserve_bytes = *reserve;
  in.tp = r.tp;
  in.memory_utilization = r.utilization;
  in.block_tokens = r.block;
  in.seq_len = r.seq_len;
  auto formats = ParseKvFormatList(r.formats);
  if (!formats) return std::unexpected(formats.error().With("--format"));
  in.formats = std::move(*formats);
  return in;
}

Result<KvPlan> PlanKv(const KvPlanRequest& request) {
  ANXIN_ASSIGN_OR_RETURN(KvPlanInput in, MakeKvPlanInput(request));
  return MakeKvPlan(in);
}

}  // namespace anxin::kv
