#include "anxin/serve/sim/sim_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "anxin/base/config.h"

namespace anxin::serve::sim {
namespace {

// KV blocks of the simulated device: --num-blocks, else --kv-memory over the
// block size, else what the plan fits.
Status SizeBlocks(const SimServeRequest& r, const kv::KvPlan& plan, SimServePlan& out) {
  const kv::KvPlanRow& row = plan.rows[0];
  EngineOptions& e = out.options.engine;
  if (r.num_blocks > 0) {
    e.num_blocks = r.num_blocks;
    out.blocks_from = "--num-blocks";
  } else if (!r.kv_memory.empty()) {
    auto bytes = ParseBytes(r.kv_memory);
    if (!bytes) return std::unexpected(bytes.error().With("--kv-memory"));
    e.num_blocks = static_cast<int>(std::min<uint64_t>(*bytes / row.block_bytes, 1u << 30));
    out.blocks_from = "--kv-memory " + r.kv_memory;
  } else {
    e.num_blocks = static_cast<int>(std::min<int64_t>(row.blocks, 1 << 30));
    out.blocks_from = fmt::format("kv plan of {} on {}", plan.input.model, r.plan.device_memory);
  }
  if (e.num_blocks <= 0) {
    return InvalidArgument(fmt::format(
        "no KV blocks fit ({}): give --kv-memory, --num-blocks or a larger --device-memory",
        out.blocks_from));
  }
  return Ok();
}

}  // namespace

Result<SimServePlan> PlanSimServe(const SimServeRequest& r) {
  auto format = kv::ParseKvFormat(r.kv_format);
  if (!format) return std::unexpected(format.error().With("--kv-format"));
  kv::KvPlanRequest plan_request = r.plan;
  plan_request.formats = format->Name();
  ANXIN_ASSIGN_OR_RETURN(kv::KvPlan plan, kv::PlanKv(plan_request));

  SimServePlan out;
  out.model = plan.input.model;
  EngineOptions& e = out.options.engine;
  e.shape = {plan.input.shape.layers, plan.kv_heads_per_device, plan.input.shape.head_dim};
  e.format = *format;
  e.block_tokens = r.plan.block;
  ANXIN_TRY(SizeBlocks(r, plan, out));
  e.max_num_seqs = r.max_num_seqs;
  e.max_batched_tokens = r.max_batched_tokens;
  e.max_waiting = r.max_waiting;
  e.max_model_len = r.max_model_len;
  e.watermark = r.watermark;
  e.prefix_caching = !r.no_prefix_caching;
  if (r.max_num_seqs < 1 || r.max_batched_tokens < 1 || r.max_model_len < 1) {
    return InvalidArgument(
        "--max-num-seqs, --max-batched-tokens and --max-model-len must be at least 1");
  }
  if (!r.time_model.empty()) {
    auto tm = TimeModel::LoadFile(r.time_model);
    if (!tm) return std::unexpected(tm.error().With("--time-model"));
    e.time_model = *tm;
  }
  if (r.time_scale < 0) return InvalidArgument("--time-scale must be >= 0");
  out.options.time_scale = r.time_scale;
  out.options.model_name = r.served_name;
  out.options.always_usage = r.always_usage;
  out.options.http.host = r.host;
  out.options.http.port = r.port;
  return out;
}

}  // namespace anxin::serve::sim
