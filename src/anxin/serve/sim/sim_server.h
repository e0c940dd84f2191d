// `anxin serve sim`: an OpenAI-compatible HTTP server whose engine is the
// continuous-batching scheduler over the paged KV block manager (sim_engine.h),
// running in simulated time paced against the wall clock. Load testers and
// clients see real HTTP, real SSE streams and real queueing, without a GPU.
//
//   SimServerOptions o;
//   o.engine.num_blocks = 4096;
//   SimServer sim(o);
//   ANXIN_TRY(sim.Start());                  // serves on its own thread
//   // POST http://127.0.0.1:<sim.port()>/v1/completions {"prompt": "...", "stream": true}
//   SimSnapshot s = sim.Snapshot();          // engine and HTTP figures
//   sim.Stop();
//
// Routes: POST /v1/completions, POST /v1/chat/completions (stream or not;
// stream_options.include_usage adds the usage chunk before `data: [DONE]`),
// GET /v1/models, GET /health, GET /metrics (Prometheus text), GET
// /sim/stats (JSON). A client that disconnects cancels its request.
//
// Thread safety: Start, Stop, port and Snapshot from any thread.
#ifndef ANXIN_SERVE_SIM_SIM_SERVER_H_
#define ANXIN_SERVE_SIM_SIM_SERVER_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/error.h"
#include "anxin/net/stream_server.h"
#include "anxin/serve/sim/sim_engine.h"

namespace anxin::serve::sim {

struct SimServerOptions {
  net::StreamServerOptions http{};
  EngineOptions engine{};
  // Wall seconds per simulated second: 1 = real time, 0.1 = ten times
  // faster, 0 = as fast as the CPU goes.
  double time_scale = 1.0;
  std::string model_name = "anxin-sim";
  int default_max_tokens = 16;        // completions without max_tokens
  int default_chat_max_tokens = 256;  // chat completions without max_tokens
  bool always_usage = false;          // usage chunk even when not asked for
};

struct SimSnapshot {
  EngineStats engine;
  net::StreamServerStats http;
  uint64_t responses_ok = 0, responses_error = 0, streams_open = 0, client_disconnects = 0;
  double max_step_lag_seconds = 0;  // how far behind the wall clock steps ran
  nlohmann::json ToJson() const;
};

class SimServer {
 public:
  explicit SimServer(SimServerOptions options);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  [[nodiscard]] Status Start();
  void Stop();
  int port() const;
  SimSnapshot Snapshot() const;
  std::string MetricsText() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_SIM_SERVER_H_
