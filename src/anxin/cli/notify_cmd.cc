// `anxin notify`: the Alertmanager webhook receiver that delivers to
// Feishu/Lark bots, JSON webhooks and files through a durable spool
// (docs/notify.md).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "anxin/base/file.h"
#include "anxin/base/stop_token.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/notify/config.h"
#include "anxin/notify/service.h"

namespace anxin::cli::notify_cmd {
namespace {

struct Opts {
  std::string listen = "127.0.0.1:" + std::to_string(notify::kDefaultPort);
  int port = -1;
  std::string port_file;
  std::string spool = "/var/lib/anxin/notify";
  int threads = 16;
  notify::LocalSinks sinks;
};

int Run(const Opts& o, const GlobalOptions& g) {
  std::optional<ConfigNode> section = FindSection(g.config, "notify");
  Result<notify::NotifyConfig> config = std::unexpected(Error(ErrorCode::kInternal, "unset"));
  if (!o.sinks.file.empty() || !o.sinks.webhook.empty()) {
    if (section) {
      spdlog::info(
          "notify: --sink-file/--sink-webhook given: the notify: section of the "
          "configuration is not used");
    }
    config = notify::LocalSinkConfig(o.sinks);
  } else if (!section) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "no notify: section in the configuration: give --config FILE with "
                             "receivers and routes, or --sink-file/--sink-webhook "
                             "(docs/notify.md)"));
  } else {
    config = notify::ParseNotifyConfig(*section, SystemEnvironment());
  }
  if (!config) return ReportError(config.error());
  notify::ServiceOptions so;
  const size_t colon = o.listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument, "--listen: expected HOST:PORT, got '" + o.listen + "'"));
  }
  so.host = o.listen.substr(0, colon);
  try {
    so.port = std::stoi(o.listen.substr(colon + 1));
  } catch (const std::exception&) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument, "--listen: expected HOST:PORT, got '" + o.listen + "'"));
  }
  if (o.port >= 0) so.port = o.port;
  if (so.port < 0 || so.port > 65535) {
    return ReportError(Error(ErrorCode::kInvalidArgument, "--port: out of range [0, 65535]"));
  }
  so.spool_dir = o.spool;
  so.threads = o.threads;
  StopOnSignals stop;  // before any thread starts
  auto service = notify::Service::Start(std::move(*config), so);
  if (!service) return ReportError(service.error());
  if (!o.port_file.empty()) {
    Status st = WriteFileAtomic(o.port_file, std::to_string((*service)->port()) + "\n");
    if (!st) return ReportError(st.error().With("--port-file"));
  }
  std::fprintf(stderr, "anxin notify: listening on http://%s:%d/webhook (spool %s)\n",
               so.host.c_str(), (*service)->port(), so.spool_dir.c_str());
  const int sig = stop.WaitFor(0);
  spdlog::info("notify: {} received, draining", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*service)->Stop();
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--listen", o->listen, "HOST:PORT to serve the webhook, /metrics and /healthz on")
      ->capture_default_str();
  app.add_option("--port", o->port,
                 "port, overriding --listen's (0: any free one; see --port-file)")
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--spool", o->spool, "directory of the durable spool")->capture_default_str();
  app.add_option("--threads", o->threads, "HTTP worker threads")
      ->capture_default_str()
      ->check(InRange(1, 256));
  app.add_option("--sink-file", o->sinks.file,
                 "deliver every alert to this JSON-lines file (instead of the notify: section)");
  app.add_option("--sink-webhook", o->sinks.webhook,
                 "deliver every alert as JSON to this URL (instead of the notify: section)");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(notify, "deliver Alertmanager alerts to Feishu/Lark bots, webhooks, files",
                       Setup);

}  // namespace
}  // namespace anxin::cli::notify_cmd
