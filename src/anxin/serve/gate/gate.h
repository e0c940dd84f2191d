// `anxin serve gate`: an admission proxy in front of an inference server. At
// most max_concurrency requests are upstream at once; the rest wait in a FIFO
// queue for at most queue_timeout; a request that finds the queue full, or
// waits past its deadline, gets 429 with Retry-After. Responses (streamed SSE
// included) are passed to the client byte for byte as they arrive; a client
// that leaves frees its slot at once and closes its upstream connection, so
// the server stops generating for it. Metrics per route at metrics_path.
//
//   GateOptions o;
//   o.upstream_port = 8000;
//   o.max_concurrency = 8;
//   Gate gate(o);
//   ANXIN_TRY(gate.Start());        // its own thread; gate.port() to reach it
//   GateSnapshot s = gate.Snapshot();
//   gate.Stop();
//
//   GateRequest req{.upstream = "http://127.0.0.1:8000", .queue_timeout = "10s"};  // as flags
//   ANXIN_ASSIGN_OR_RETURN(GateOptions from_flags, MakeGateOptions(req));
//
// Thread safety: Start, Stop, port, Snapshot and MetricsText from any thread.
#ifndef ANXIN_SERVE_GATE_GATE_H_
#define ANXIN_SERVE_GATE_GATE_H_

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/net/stream_server.h"

namespace anxin::serve::gate {

struct GateOptions {
  net::StreamServerOptions http{};
  std::string upstream_host = "127.0.0.1";
  int upstream_port = 8000;
  int max_concurrency = 8;
  int max_queue = 64;
  double queue_timeout_seconds = 30;
  double connect_timeout_seconds = 5;
  // No byte from upstream for this long: 504 (or the stream is cut).
  double upstream_idle_timeout_seconds = 600;
  // Retry-After in seconds; 0: estimated from the queue and recent service times.
  int retry_after_seconds = 0;
  // Paths that pass without taking a slot (health checks, model lists).
  std::vector<std::string> bypass = {"/health", "/v1/models", "/metrics"};
  std::string metrics_path = "/gate/metrics";
  // Distinct route labels kept; later paths count as "other".
  int max_routes = 64;
  int max_idle_upstream = 256;  // kept-alive upstream connections
};

// `anxin serve gate` as its flags give it: the upstream as a URL, durations
// as text ("30s"), bypass paths comma-separated.
struct GateRequest {
  std::string upstream{};  // http://HOST:PORT, IPv4 or localhost
  std::string queue_timeout = "30s", connect_timeout = "5s", idle_timeout = "600s";
  std::string bypass = "/health,/v1/models,/metrics";
  std::string metrics_path = "/gate/metrics";
  std::string host = "127.0.0.1";
  int port = 9000, max_concurrency = 8, max_queue = 64, retry_after = 0;
};
// Errors name the flag (--upstream, --queue-timeout, ...) and the fix.
[[nodiscard]] Result<GateOptions> MakeGateOptions(const GateRequest& request);

struct GateRouteStats {
  std::map<int, uint64_t> codes;             // responses by status
  std::map<std::string, uint64_t> rejected;  // queue_full, queue_timeout
  std::map<std::string, uint64_t>
      errors;  // unreachable, timeout, truncated, client_gone, bad_response
};

struct GateSnapshot {
  int in_flight = 0, queued = 0, max_in_flight_seen = 0, max_queued_seen = 0;
  uint64_t admitted = 0, forwarded_bypass = 0, upstream_connects = 0, upstream_reused = 0;
  std::map<std::string, GateRouteStats> routes;
  net::StreamServerStats http;
  nlohmann::json ToJson() const;
};

class Gate {
 public:
  explicit Gate(GateOptions options);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  [[nodiscard]] Status Start();
  void Stop();
  int port() const;
  GateSnapshot Snapshot() const;
  std::string MetricsText() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin::serve::gate

#endif  // ANXIN_SERVE_GATE_GATE_H_
