// `anxin serve sim` as its flags give it, turned into the server's options:
// the KV shape from a model preset, the KV blocks sized as `anxin kv plan`
// sizes them on the given device (or as --kv-memory / --num-blocks say), the
// scheduler's caps and the time model.
//
//   SimServeRequest req;                       // llama-3-8b on 80GiB, fp16
//   req.kv_format = "int4";
//   ANXIN_ASSIGN_OR_RETURN(SimServePlan plan, PlanSimServe(req));
//   int blocks = plan.options.engine.num_blocks;   // blocks the plan sized
//   std::string from = plan.blocks_from;         // "kv plan of llama-3-8b on 80GiB"
//   SimServer sim(plan.options);
//
// Errors name the flag and the fix (--kv-format, --model, --kv-memory, ...).
//
// Thread safety: pure functions.
#ifndef ANXIN_SERVE_SIM_SIM_OPTIONS_H_
#define ANXIN_SERVE_SIM_SIM_OPTIONS_H_

#include <string>

#include "anxin/base/error.h"
#include "anxin/kv/kv_plan.h"
#include "anxin/serve/sim/sim_server.h"

namespace anxin::serve::sim {

struct SimServeRequest {
  // Model preset, shape overrides, device memory, weights, reserve, tp, block
  // size and memory utilization; its formats are replaced by kv_format.
  kv::KvPlanRequest plan{.model = "llama-3-8b", .device_memory = "80GiB"};
  std::string kv_format = "fp16";
  std::string kv_memory;  // KV cache bytes instead of the plan ("20GiB")
  int num_blocks = 0;     // KV blocks instead of the plan or kv_memory
  int max_num_seqs = 256, max_batched_tokens = 8192, max_waiting = 100000, max_model_len = 32768;
  double watermark = 0.01;
  bool no_prefix_caching = false;
  std::string time_model;  // YAML step-time table; "" = the built-in roofline
  double time_scale = 1.0;
  std::string served_name = "anxin-sim";
  bool always_usage = false;
  std::string host = "127.0.0.1";
  int port = 8000;
};

struct SimServePlan {
  SimServerOptions options;
  std::string model;        // the preset the shape came from
  std::string blocks_from;  // where num_blocks came from, for the start line
};

[[nodiscard]] Result<SimServePlan> PlanSimServe(const SimServeRequest& request);

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_SIM_OPTIONS_H_
