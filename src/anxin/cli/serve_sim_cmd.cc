// `anxin serve sim`: an OpenAI-compatible server whose engine is a
// continuous-batching scheduler over the paged KV block manager, in simulated
// time (docs/serve.md).
//
//   anxin serve sim --model llama-3-8b --device-memory 80GiB --kv-format int4 --port 8000
//   anxin serve sim --num-blocks 64 --max-num-seqs 8 --time-scale 0.1 --port 0
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/cli/serve_wait.h"
#include "anxin/serve/kv_plan.h"
#include "anxin/serve/sim_server.h"

namespace anxin::cli {
namespace {

namespace serve = anxin::serve;

struct Opts {
  std::string host = "127.0.0.1", model = "llama-3-8b", kv_format = "fp16", kv_memory,
              device_memory = "80GiB", weights, reserve = "1GiB", time_model,
              served_name = "anxin-sim", port_file;
  int port = 8000, layers = 0, kv_heads = 0, head_dim = 0, tp = 1, num_blocks = 0, block = 16;
  int max_num_seqs = 256, max_batched_tokens = 8192, max_waiting = 100000, max_model_len = 32768;
  double utilization = 0.9, watermark = 0.01, time_scale = 1.0, duration = 0;
  bool no_prefix_caching = false, always_usage = false;
};

int Run(const Opts& o, const GlobalOptions& g) {
  serve::SimServerOptions so;
  serve::EngineOptions& e = so.engine;
  auto format = serve::ParseKvFormat(o.kv_format);
  if (!format) return ReportError(format.error().With("--kv-format"));
  serve::KvPlanInput plan_in;
  if (auto s = serve::ApplyModelPreset(o.model, plan_in); !s) {
    return ReportError(s.error().With("--model"));
  }
  if (o.layers > 0) plan_in.shape.layers = o.layers;
  if (o.kv_heads > 0) plan_in.shape.kv_heads = o.kv_heads;
  if (o.head_dim > 0) plan_in.shape.head_dim = o.head_dim;
  plan_in.tp = o.tp;
  plan_in.block_tokens = o.block;
  plan_in.formats = {*format};
  plan_in.memory_utilization = o.utilization;
  auto dev = ParseBytes(o.device_memory);
  if (!dev) return ReportError(dev.error().With("--device-memory"));
  plan_in.device_memory = *dev;
  if (!o.weights.empty()) {
    auto w = ParseBytes(o.weights);
    if (!w) return ReportError(w.error().With("--weights"));
    plan_in.weights_bytes = *w;
  }
  auto reserve = ParseBytes(o.reserve);
  if (!reserve) return ReportError(reserve.error().With("--reserve"));
  plan_in.reserve_bytes = *reserve;
  auto plan = serve::MakeKvPlan(plan_in);
  if (!plan) return ReportError(plan.error());
  const serve::KvPlanRow& row = plan->rows[0];
  e.shape = {plan_in.shape.layers, plan->kv_heads_per_device, plan_in.shape.head_dim};
  e.format = *format;
  e.block_tokens = o.block;
  std::string blocks_from;
  if (o.num_blocks > 0) {
    e.num_blocks = o.num_blocks;
    blocks_from = "--num-blocks";
  } else if (!o.kv_memory.empty()) {
    auto kv = ParseBytes(o.kv_memory);
    if (!kv) return ReportError(kv.error().With("--kv-memory"));
    e.num_blocks = static_cast<int>(std::min<uint64_t>(*kv / row.block_bytes, 1u << 30));
    blocks_from = "--kv-memory " + o.kv_memory;
  } else {
    e.num_blocks = static_cast<int>(std::min<int64_t>(row.blocks, 1 << 30));
    blocks_from = fmt::format("kv plan of {} on {}", plan_in.model, o.device_memory);
  }
  if (e.num_blocks <= 0) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             fmt::format("no KV blocks fit ({}): give --kv-memory, --num-blocks "
                                         "or a larger --device-memory",
                                         blocks_from)));
  }
  e.max_num_seqs = o.max_num_seqs;
  e.max_batched_tokens = o.max_batched_tokens;
  e.max_waiting = o.max_waiting;
  e.max_model_len = o.max_model_len;
  e.watermark = o.watermark;
  e.prefix_caching = !o.no_prefix_caching;
  if (o.max_num_seqs < 1 || o.max_batched_tokens < 1 || o.max_model_len < 1) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--max-num-seqs, --max-batched-tokens and --max-model-len must be "
                             "at least 1"));
  }
  if (!o.time_model.empty()) {
    auto tm = serve::TimeModel::LoadFile(o.time_model);
    if (!tm) return ReportError(tm.error().With("--time-model"));
    e.time_model = *tm;
  }
  if (o.time_scale < 0) {
    return ReportError(Error(ErrorCode::kInvalidArgument, "--time-scale must be >= 0"));
  }
  so.time_scale = o.time_scale;
  so.model_name = o.served_name;
  so.always_usage = o.always_usage;
  so.http.host = o.host;
  so.http.port = o.port;
  BlockStopSignals();
  serve::SimServer sim(so);
  if (auto s = sim.Start(); !s) return ReportError(s.error());
  if (!o.port_file.empty()) {
    std::ofstream(o.port_file) << sim.port() << "\n";
  }
  std::fprintf(stderr,
               "anxin serve sim: listening on http://%s:%d (model %s as '%s', KV %s, %d blocks of "
               "%d tokens from %s, cap %d sequences, time x%g)\n",
               o.host.c_str(), sim.port(), plan_in.model.c_str(), o.served_name.c_str(),
               format->Name().c_str(), e.num_blocks, e.block_tokens, blocks_from.c_str(),
               e.max_num_seqs, o.time_scale);
  std::fprintf(stderr, "time model: %s\n", e.time_model.Describe().c_str());
  WaitForStop(o.duration);
  serve::SimSnapshot snap = sim.Snapshot();
  sim.Stop();
  if (g.json) {
    std::printf("%s\n", snap.ToJson().dump(2).c_str());
  } else {
    const auto& s = snap.engine;
    std::printf(
        "requests: %llu submitted, %llu completed, %llu cancelled by clients, %llu "
        "refused (queue full), %llu invalid\n",
        (unsigned long long)s.submitted, (unsigned long long)s.completed,
        (unsigned long long)s.cancelled, (unsigned long long)s.refused_queue_full,
        (unsigned long long)s.refused_invalid);
    std::printf(
        "tokens: %llu prompt (%llu from the prefix cache), %llu generated; %llu "
        "preemptions (%llu tokens recomputed)\n",
        (unsigned long long)s.prompt_tokens, (unsigned long long)s.prefix_cached_tokens,
        (unsigned long long)s.generated_tokens, (unsigned long long)s.preemptions,
        (unsigned long long)s.recomputed_tokens);
    std::printf("steps: %llu, %.3f s simulated; largest batch %d of cap %d\n",
                (unsigned long long)s.steps, s.simulated_seconds, s.max_running, e.max_num_seqs);
  }
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--host", o->host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "port (0: any free one; see --port-file)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--model", o->model, "model preset for the KV shape (see anxin kv plan --help)")
      ->capture_default_str();
  app.add_option("--layers", o->layers, "override the preset's layers")->check(AtLeast(1));
  app.add_option("--kv-heads", o->kv_heads, "override the preset's KV heads")->check(AtLeast(1));
  app.add_option("--head-dim", o->head_dim, "override the preset's head dimension")
      ->check(AtLeast(1));
  app.add_option("--tp", o->tp, "tensor-parallel devices")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--kv-format", o->kv_format, "KV format: fp16, int8, int8-asym, int4, int4-asym")
      ->capture_default_str();
  app.add_option(
         "--device-memory", o->device_memory,
         "device memory in powers of 1024 (80GiB for a device sold as \"80 GB\"); KV blocks "
         "as anxin kv plan sizes them")
      ->capture_default_str()
      ->check(Bytes(1));
  app.add_option("--memory-utilization", o->utilization, "share of device memory used")
      ->capture_default_str()
      ->check(Share());
  app.add_option("--weights", o->weights, "weights size (default: the preset's, bf16)")
      ->check(Bytes(0));
  app.add_option("--reserve", o->reserve, "memory kept for activations")
      ->capture_default_str()
      ->check(Bytes(0));
  app.add_option("--kv-memory", o->kv_memory, "KV cache size instead of the plan, e.g. 20GiB")
      ->check(Bytes(1));
  app.add_option("--num-blocks", o->num_blocks, "KV blocks instead of the plan")->check(AtLeast(1));
  app.add_option("--block-size", o->block, "tokens per KV block")
      ->capture_default_str()
      ->check(InRange(1, 4096));
  app.add_option("--max-num-seqs", o->max_num_seqs, "concurrency cap: sequences in the batch")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-batched-tokens", o->max_batched_tokens, "prefill tokens per step")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-waiting", o->max_waiting, "queued requests before 429")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--max-model-len", o->max_model_len, "prompt + output tokens of a request")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--watermark", o->watermark, "share of blocks admission leaves free")
      ->capture_default_str()
      ->check(InRange(0, 1));
  app.add_flag("--no-prefix-caching", o->no_prefix_caching, "do not reuse cached prompt blocks");
  app.add_option("--time-model", o->time_model,
                 "YAML table of prefill/decode step times (default: built-in roofline)");
  app.add_option("--time-scale", o->time_scale,
                 "wall seconds per simulated second (0: as fast as possible)")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--served-model-name", o->served_name, "model name in responses")
      ->capture_default_str();
  app.add_flag("--always-usage", o->always_usage,
               "send the usage chunk on every stream, not only when asked");
  app.add_option("--duration", o->duration, "stop after this many seconds (default: at Ctrl-C)")
      ->check(AtLeast(0));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(serve, sim,
                          "simulated OpenAI-compatible server: paged KV, continuous batching",
                          Setup);

}  // namespace
}  // namespace anxin::cli
