// `anxin serve gate`: an admission proxy in front of an inference server:
// concurrency cap, queue with a deadline, 429 + Retry-After, streams passed
// through untouched, per-route metrics (docs/serve.md).
//
//   anxin serve gate --upstream http://127.0.0.1:8000 --port 9000 --max-concurrency 8
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "anxin/base/config.h"
#include "anxin/base/url.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/cli/serve_wait.h"
#include "anxin/serve/gate.h"

namespace anxin::cli {
namespace {

namespace serve = anxin::serve;

struct Opts {
  std::string host = "127.0.0.1", upstream, queue_timeout = "30s", connect_timeout = "5s",
              idle_timeout = "600s", bypass = "/health,/v1/models,/metrics",
              metrics_path = "/gate/metrics", port_file;
  int port = 9000, max_concurrency = 8, max_queue = 64, retry_after = 0;
  double duration = 0;
};

Status ParseUpstream(const std::string& url, serve::GateOptions& o) {
  // One reading of an address across anxin (base/url.h): no scheme is http://.
  auto u = ParseHttpUrl(url);
  if (!u) return std::unexpected(std::move(u.error()).With("--upstream"));
  if (u->scheme == "https") {
    return InvalidArgument(
        "--upstream: https is not proxied; point the gate at the server's "
        "plain-HTTP port");
  }
  if (!u->path.empty() && u->path != "/") {
    return InvalidArgument(fmt::format(
        "--upstream '{}': give http://HOST:PORT without a path, e.g. http://127.0.0.1:8000", url));
  }
  o.upstream_host = u->host == "localhost" ? "127.0.0.1" : u->host;
  o.upstream_port = u->port;
  return Ok();
}

int Run(const Opts& o, const GlobalOptions& g) {
  serve::GateOptions go;
  if (auto s = ParseUpstream(o.upstream, go); !s) return ReportError(s.error());
  go.http.host = o.host;
  go.http.port = o.port;
  go.max_concurrency = o.max_concurrency;
  go.max_queue = o.max_queue;
  go.retry_after_seconds = o.retry_after;
  go.metrics_path = o.metrics_path;
  struct {
    const std::string& text;
    const char* flag;
    double* out;
  } durations[] = {{o.queue_timeout, "--queue-timeout", &go.queue_timeout_seconds},
                   {o.connect_timeout, "--connect-timeout", &go.connect_timeout_seconds},
                   {o.idle_timeout, "--upstream-idle-timeout", &go.upstream_idle_timeout_seconds}};
  for (auto& d : durations) {
    auto v = ParseSeconds(d.text);
    if (!v) return ReportError(v.error().With(d.flag));
    *d.out = *v;
  }
  go.bypass.clear();
  std::stringstream ss(o.bypass);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) go.bypass.push_back(item);
  }
  BlockStopSignals();
  serve::Gate gate(go);
  if (auto s = gate.Start(); !s) return ReportError(s.error());
  if (!o.port_file.empty()) std::ofstream(o.port_file) << gate.port() << "\n";
  std::fprintf(stderr,
               "anxin serve gate: listening on http://%s:%d -> http://%s:%d (at most %d in "
               "flight, %d queued for %s; metrics at %s)\n",
               o.host.c_str(), gate.port(), go.upstream_host.c_str(), go.upstream_port,
               go.max_concurrency, go.max_queue, o.queue_timeout.c_str(), o.metrics_path.c_str());
  WaitForStop(o.duration);
  serve::GateSnapshot snap = gate.Snapshot();
  gate.Stop();
  if (g.json) {
    std::printf("%s\n", snap.ToJson().dump(2).c_str());
  } else {
    std::printf("admitted %llu (peak %d in flight of %d, peak queue %d); bypassed %llu\n",
                (unsigned long long)snap.admitted, snap.max_in_flight_seen, go.max_concurrency,
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
  app.add_option("--upstream", o->upstream, "the inference server, http://HOST:PORT")->required();
  app.add_option("--host", o->host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "port (0: any free one; see --port-file)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--max-concurrency", o->max_concurrency, "requests upstream at once")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--max-queue", o->max_queue, "requests waiting for a slot before 429")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--queue-timeout", o->queue_timeout, "longest wait for a slot before 429")
      ->capture_default_str();
  app.add_option("--retry-after", o->retry_after,
                 "Retry-After seconds on 429 (0: estimated from the queue)")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("--connect-timeout", o->connect_timeout, "to connect upstream")
      ->capture_default_str();
  app.add_option("--upstream-idle-timeout", o->idle_timeout,
                 "silence from upstream before 504 or cutting the stream")
      ->capture_default_str();
  app.add_option("--bypass", o->bypass, "paths forwarded without a slot, comma-separated")
      ->capture_default_str();
  app.add_option("--metrics-path", o->metrics_path, "where the gate's own metrics are")
      ->capture_default_str();
  app.add_option("--duration", o->duration, "stop after this many seconds (default: at Ctrl-C)")
      ->check(AtLeast(0));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_SUBCOMMAND(serve, gate,
                          "admission proxy: concurrency cap, queue, 429 + Retry-After, metrics",
                          Setup);

}  // namespace
}  // namespace anxin::cli
