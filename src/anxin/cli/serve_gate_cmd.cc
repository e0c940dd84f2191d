// `anxin serve gate`: an admission proxy in front of an inference server:
// concurrency cap, queue with a deadline, 429 + Retry-After, streams passed
// through untouched, per-route metrics (docs/serve.md).
//
//   anxin serve gate --upstream http://127.0.0.1:8000 --port 9000 --max-concurrency 8
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "anxin/base/file.h"
#include "anxin/base/stop_token.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/serve/gate/gate.h"

namespace anxin::cli::serve_gate_cmd {
namespace {

namespace gate = anxin::serve::gate;

struct Opts {
  gate::GateRequest request;
  std::string port_file;
  double duration = 0;
};

int Run(const Opts& o, const GlobalOptions& g) {
  auto go = gate::MakeGateOptions(o.request);
  if (!go) return ReportError(go.error());
  BlockStopSignals();
  gate::Gate gate(*go);
  if (auto s = gate.Start(); !s) return ReportError(s.error());
  if (!o.port_file.empty()) {
    if (auto s = WriteFileAtomic(o.port_file, fmt::format("{}\n", gate.port())); !s) {
      gate.Stop();
      return ReportError(s.error().With("--port-file"));
    }
  }
  std::fprintf(stderr,
               "anxin serve gate: listening on http://%s:%d -> http://%s:%d (at most %d in "
               "flight, %d queued for %s; metrics at %s)\n",
               o.request.host.c_str(), gate.port(), go->upstream_host.c_str(), go->upstream_port,
               go->max_concurrency, go->max_queue, o.request.queue_timeout.c_str(),
               o.request.metrics_path.c_str());
  WaitForStop(o.duration);
  gate::GateSnapshot snap = gate.Snapshot();
  gate.Stop();
  if (g.json) {
    std::printf("%s\n", snap.ToJson().dump(2).c_str());
  } else {
    std::printf("admitted %llu (peak %d in flight of %d, peak queue %d); bypassed %llu\n",
                (unsigned long long)snap.admitted, snap.max_in_flight_seen, go->max_concurrency,
                snap.max_queued_seen, (unsigned long long)snap.forwarded_bypass);
    for (const auto& [route, r] : snap.routes) {
      std::string codes, rej, errs;
      for (const auto& [c, n] : r.codes) codes += fmt::format(" {}:{}", c, n);
      for (const auto& [k, n] : r.rejected) rej += fmt::format(" {}:{}", k, n);
      for (const auto& [k, n] : r.errors) errs += fmt::format(" {}:{}", k, n);
      std::printf("%s: status%s%s%s%s%s\n", route.c_str(), codes.c_str(),
                  rej.empty() ? "" : "; rejected", rej.c_str(), errs.empty() ? "" : "; errors",
                  errs.c_str());
    }
  }
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--upstream", o->request.upstream, "the inference server, http://HOST:PORT")
      ->required();
  app.add_option("--host", o->request.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->request.port, "port (0: any free one; see --port-file)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--max-concurrency", o->request.max_concurrency, "requests upstream at once")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-queue", o->request.max_queue, "requests waiting for a slot before 429")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--queue-timeout", o->request.queue_timeout, "longest wait for a slot before 429")
      ->capture_default_str();
  app.add_option("--retry-after", o->request.retry_after,
                 "Retry-After seconds on 429 (0: estimated from the queue)")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--connect-timeout", o->request.connect_timeout, "to connect upstream")
      ->capture_default_str();
  app.add_option("--upstream-idle-timeout", o->request.idle_timeout,
                 "silence from upstream before 504 or cutting the stream")
      ->capture_default_str();
  app.add_option("--bypass", o->request.bypass, "paths forwarded without a slot, comma-separated")
      ->capture_default_str();
  app.add_option("--metrics-path", o->request.metrics_path, "where the gate's own metrics are")
      ->capture_default_str();
  app.add_option("--duration", o->duration, "stop after this many seconds (default: at Ctrl-C)")
      ->check(AtLeast(0));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(serve, gate,
                          "admission proxy: concurrency cap, queue, 429 + Retry-After, metrics",
                          Setup);

}  // namespace
}  // namespace anxin::cli::serve_gate_cmd
