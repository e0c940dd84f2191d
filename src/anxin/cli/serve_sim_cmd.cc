// `anxin serve sim`: an OpenAI-compatible server whose engine is a
// continuous-batching scheduler over the paged KV block manager, in simulated
// time (docs/serve.md).
//
//   anxin serve sim --model llama-3-8b --device-memory 80GiB --kv-format int4 --port 8000
//   anxin serve sim --num-blocks 64 --max-num-seqs 8 --time-scale 0.1 --port 0
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "anxin/base/file.h"
#include "anxin/base/stop_token.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/serve/sim/sim_options.h"

namespace anxin::cli::serve_sim_cmd {
namespace {

namespace sim = anxin::serve::sim;

struct Opts {
  sim::SimServeRequest request;
  std::string port_file;
  double duration = 0;
};

int Run(const Opts& o, const GlobalOptions& g) {
  auto plan = sim::PlanSimServe(o.request);
  if (!plan) return ReportError(plan.error());
  const sim::EngineOptions& e = plan->options.engine;
  BlockStopSignals();
  sim::SimServer sim(plan->options);
  if (auto s = sim.Start(); !s) return ReportError(s.error());
  if (!o.port_file.empty()) {
    if (auto s = WriteFileAtomic(o.port_file, fmt::format("{}\n", sim.port())); !s) {
      sim.Stop();
      return ReportError(s.error().With("--port-file"));
    }
  }
  std::fprintf(stderr,
               "anxin serve sim: listening on http://%s:%d (model %s as '%s', KV %s, %d blocks of "
               "%d tokens from %s, cap %d sequences, time x%g)\n",
               o.request.host.c_str(), sim.port(), plan->model.c_str(),
               o.request.served_name.c_str(), e.format.Name().c_str(), e.num_blocks, e.block_tokens,
               plan->blocks_from.c_str(), e.max_num_seqs, o.request.time_scale);
  std::fprintf(stderr, "time model: %s\n", e.time_model.Describe().c_str());
  WaitForStop(o.duration);
  sim::SimSnapshot snap = sim.Snapshot();
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
  app.add_option("--host", o->request.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->request.port, "port (0: any free one; see --port-file)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--model", o->request.plan.model,
                 "model preset for the KV shape (see anxin kv plan --help)")
      ->capture_default_str();
  app.add_option("--layers", o->request.plan.layers, "override the preset's layers")
      ->check(AtLeast(1));
  app.add_option("--kv-heads", o->request.plan.kv_heads, "override the preset's KV heads")
      ->check(AtLeast(1));
  app.add_option("--head-dim", o->request.plan.head_dim, "override the preset's head dimension")
      ->check(AtLeast(1));
  app.add_option("--tp", o->request.plan.tp, "tensor-parallel devices")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--kv-format", o->request.kv_format,
                 "KV format: fp16, int8, int8-asym, int4, int4-asym")
      ->capture_default_str();
  app.add_option(
         "--device-memory", o->request.plan.device_memory,
         "device memory in powers of 1024 (80GiB for a device sold as \"80 GB\"); KV blocks "
         "as anxin kv plan sizes them")
      ->capture_default_str()
      ->check(Bytes(1));
  app.add_option("--memory-utilization", o->request.plan.utilization, "share of device memory used")
      ->capture_default_str()
      ->check(Share());
  app.add_option("--weights", o->request.plan.weights, "weights size (default: the preset's, bf16)")
      ->check(Bytes(0));
  app.add_option("--reserve", o->request.plan.reserve, "memory kept for activations")
      ->capture_default_str()
      ->check(Bytes(0));
  app.add_option("--kv-memory", o->request.kv_memory,
                 "KV cache size instead of the plan, e.g. 20GiB")
      ->check(Bytes(1));
  app.add_option("--num-blocks", o->request.num_blocks, "KV blocks instead of the plan")
      ->check(AtLeast(1));
  app.add_option("--block-size", o->request.plan.block, "tokens per KV block")
      ->capture_default_str()
      ->check(InRange(1, 4096));
  app.add_option("--max-num-seqs", o->request.max_num_seqs,
                 "concurrency cap: sequences in the batch")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-batched-tokens", o->request.max_batched_tokens, "prefill tokens per step")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-waiting", o->request.max_waiting, "queued requests before 429")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--max-model-len", o->request.max_model_len, "prompt + output tokens of a request")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--watermark", o->request.watermark, "share of blocks admission leaves free")
      ->capture_default_str()
      ->check(InRange(0, 1));
  app.add_flag("--no-prefix-caching", o->request.no_prefix_caching,
               "do not reuse cached prompt blocks");
  app.add_option("--time-model", o->request.time_model,
                 "YAML table of prefill/decode step times (default: built-in roofline)");
  app.add_option("--time-scale", o->request.time_scale,
                 "wall seconds per simulated second (0: as fast as possible)")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--served-model-name", o->request.served_name, "model name in responses")
      ->capture_default_str();
  app.add_flag("--always-usage", o->request.always_usage,
               "send the usage chunk on every stream, not only when asked");
  app.add_option("--duration", o->duration, "stop after this many seconds (default: at Ctrl-C)")
      ->check(AtLeast(0));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(serve, sim,
                          "simulated OpenAI-compatible server: paged KV, continuous batching",
                          Setup);

}  // namespace
}  // namespace anxin::cli::serve_sim_cmd
