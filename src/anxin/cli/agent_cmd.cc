// `anxin agent`: the node's Prometheus exporter for devices and running jobs.
// Docs: docs/agent.md.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "anxin/agent/agent.h"
#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/cli/serve_wait.h"
#include "anxin/cli/version.h"
#include "anxin/device/registry.h"

namespace anxin::cli {
namespace {

struct Options {
  std::string backend;
  std::string scenario;
  std::optional<std::string> listen;
  std::optional<int> port;
  std::string port_file;
  std::optional<std::string> interval;
  std::optional<std::string> socket;
  std::optional<std::string> compat;
  std::optional<std::string> node;
  bool once = false;
  std::string duration;
  std::string at;
  std::optional<std::string> web_config;
  std::optional<std::string> doctor_interval;
  std::optional<std::string> doctor_root;
  bool hash_password = false;
};

// --hash-password: a bcrypt hash for basic_auth_users of the password on
// standard input's first line.
int HashPasswordFromStdin() {
  std::string line;
  if (!std::getline(std::cin, line)) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--hash-password reads the password from standard input; got "
                             "nothing (try: echo -n 'secret' | anxin agent --hash-password)"));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  auto hash = agent::HashPassword(line);
  std::fill(line.begin(), line.end(), '\0');
  if (!hash) return ReportError(hash.error().With("--hash-password"));
  std::printf("%s\n", hash->c_str());
  return kExitOk;
}

int Run(const Options& o, const GlobalOptions& g) {
  if (o.hash_password) return HashPasswordFromStdin();
  // Configuration file < environment < flags.
  auto config = agent::ParseAgentConfig(FindSection(g.config, "agent"));
  if (!config) return ReportError(config.error());
  agent::AgentConfig c = *config;
  if (o.listen) {
    if (auto s = agent::ParseListen(*o.listen, "--listen", c); !s) return ReportError(s.error());
  }
  if (o.port) c.port = *o.port;
  if (c.port < 0 || c.port > 65535) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument,
              "--port: expected 0 to 65535 (0: any free port), got " + std::to_string(c.port)));
  }
  if (o.interval) {
    auto s = ParseSeconds(*o.interval);
    if (!s || *s <= 0) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--interval: expected a duration above 0 like 1s or "
                               "500ms, got '" +
                                   *o.interval + "'"));
    }
    c.interval_seconds = *s;
  }
  if (o.compat) {
    auto m = agent::ParseCompat(*o.compat);
    if (!m) return ReportError(m.error().With("--compat"));
    c.compat = *m;
  }
  if (o.node) c.node = *o.node;
  if (o.doctor_interval) {
    auto s = ParseSeconds(*o.doctor_interval);
    if (!s || (*s != 0 && *s < 1)) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--doctor-interval: expected 0 (off) or a duration of at least 1s "
                               "like 10m, got '" +
                                   *o.doctor_interval + "'"));
    }
    c.doctor_interval_seconds = *s;
  }
  if (const char* env = std::getenv("ANXIN_DOCTOR_ROOT"); env != nullptr && *env != '\0') {
    c.doctor_root = env;  // as `anxin doctor` reads it; the DaemonSet sets /host
  }
  if (o.doctor_root) c.doctor_root = *o.doctor_root;
  if (o.web_config) c.web_config = *o.web_config;
  agent::WebConfig web;
  if (!c.web_config.empty()) {
    auto loaded = agent::LoadWebConfig(c.web_config);
    if (!loaded) return ReportError(loaded.error().With("--web.config.file"));
    web = std::move(*loaded);
  }
  std::string socket = c.socket;
  if (const char* env = std::getenv("ANXIN_AGENT_SOCKET"); env && *env) socket = env;
  if (o.socket)
    socket = *o.socket;  // "" turns the socket off
  else if (socket.empty())
    socket = std::string(agent::kDefaultSocket);
  double duration = 0;
  if (!o.duration.empty()) {
    auto d = ParseSeconds(o.duration);
    if (!d || *d <= 0) {
      return ReportError(
          Error(ErrorCode::kInvalidArgument,
                "--duration: expected a duration above 0 like 30s, got '" + o.duration + "'"));
    }
    duration = *d;
  }

  // --at: the sim scenario as it is that far in, on a virtual clock that
  // stands still there. Like an agent started at that moment, the sample
  // shows the devices' state then, and the fault-event counters start from
  // nothing (events before a subscription are not replayed); the clock does
  // not move on, so no later event can slip into the sample.
  std::optional<VirtualClock> virtual_clock;
  double at_seconds = 0;
  if (!o.at.empty()) {
    // A running agent samples in real time; only --once reads the virtual clock.
    if (!o.once)
      return ReportError(
          Error(ErrorCode::kInvalidArgument, "--at needs --once: add --once, or drop --at"));
    auto at = ParseSeconds(o.at);
    if (!at)
      return ReportError(Error(ErrorCode::kInvalidArgument, "--at: " + at.error().message()));
    at_seconds = *at;
    virtual_clock.emplace(RealClock().Now());
  }
  std::string backend_name = !o.backend.empty() ? o.backend : g.config.device.backend;
  if (backend_name.empty()) backend_name = std::string(device::kDefaultBackend);
  const std::string& scenario = !o.scenario.empty() ? o.scenario : g.config.device.scenario;
  Clock* clock = virtual_clock ? static_cast<Clock*>(&*virtual_clock) : &RealClock();
  auto backend = device::CreateBackend(backend_name, {.scenario = scenario, .clock = clock});
  if (!backend) {
    Error e = backend.error();
    const bool input = e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kNotFound;
    if (input && !o.scenario.empty() && backend_name == "sim") e.With("--scenario");
    return ReportError(e);
  }
  if (virtual_clock) virtual_clock->Advance(FromSeconds(at_seconds));

  agent::AgentOptions options;
  if (!c.node.empty()) options.node = c.node;
  options.host = c.host;
  options.port = c.port;
  options.socket_path = o.once ? "" : socket;
  options.interval = FromSeconds(c.interval_seconds);
  options.compat = c.compat;
  options.clock = clock;
  options.job_expiry = FromSeconds(c.job_expiry_seconds);
  options.version = kVersion;
  options.doctor_interval = FromSeconds(c.doctor_interval_seconds);
  options.doctor_root = c.doctor_root;
  options.web = web;

  if (o.once) {
    auto a = agent::Agent::Create(**backend, options);
    if (!a) return ReportError(a.error());
    (*a)->devices().SampleOnce();
    if ((*a)->doctor()) (*a)->doctor()->RunOnce();
    std::fputs((*a)->Exposition().c_str(), stdout);
    return kExitOk;
  }

  BlockStopSignals();  // before any thread starts
  auto a = agent::Agent::Create(**backend, options);
  if (!a) return ReportError(a.error());
  if (auto s = (*a)->Start(); !s) return ReportError(s.error());
  std::string doctor = c.doctor_interval_seconds > 0
                           ? "every " + fmt::format("{:g}s", c.doctor_interval_seconds)
                           : std::string("off");
  std::fprintf(
      stderr,
      "anxin agent: serving %s/metrics and the page %s/ (%zu devices from %s, every %gs%s), "
      "SDK socket %s, doctor checks %s%s\n",
      (*a)->url().c_str(), (*a)->url().c_str(), (*a)->devices().devices().size(),
      (*backend)->Describe().c_str(), c.interval_seconds,
      c.compat == agent::Compat::kNone
          ? ""
          : (", compat " + std::string(agent::CompatName(c.compat))).c_str(),
      socket.empty() ? "off" : socket.c_str(), doctor.c_str(),
      web.users.empty() ? "" : ", basic auth on");
  if (!o.port_file.empty()) std::ofstream(o.port_file) << (*a)->port() << "\n";
  WaitForStop(duration);
  (*a)->Stop();
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("--backend", o->backend,
                 "device backend: sim (default; config device.backend, env ANXIN_DEVICE_BACKEND)");
  app.add_option("--scenario", o->scenario,
                 "sim: scenario YAML file, or a built-in one: default (8 x Ascend910C), demo, "
                 "faults, h100-node (default: config device.scenario, env ANXIN_SCENARIO)");
  app.add_option("--listen", o->listen,
                 "HOST:PORT to serve on (default 127.0.0.1:9466; :9466 = every address; "
                 "config agent.listen)");
  app.add_option("--port", o->port,
                 "port only, overriding --listen's (0: any free one; see "
                 "--port-file)")
      ->check(PortNumber());
  app.add_option("--port-file", o->port_file, "write the port here once listening");
  app.add_option("--interval", o->interval,
                 "device sample interval, e.g. 1s, 500ms (default 1s; config agent.interval)");
  app.add_option("--socket", o->socket,
                 "SDK socket path (default: env ANXIN_AGENT_SOCKET, config agent.socket, else "
                 "/run/anxin/agent.sock; \"\" = no socket)");
  app.add_option("--compat", o->compat,
                 "also export another exporter's metric names: npu-exporter, dcgm or none "
                 "(config agent.compat)");
  app.add_option("--node", o->node, "the node label (default: the host name; config agent.node)");
  app.add_flag("--once", o->once, "sample once, print the exposition on stdout and exit");
  app.add_option("--duration", o->duration,
                 "stop after this long, e.g. 30s (default: at Ctrl-C "
                 "or SIGTERM)");
  app.add_option("--at", o->at,
                 "with --once, sim: the scenario as it is this far in (e.g. 65s), on a virtual "
                 "clock");
  app.add_option("--web.config.file", o->web_config,
                 "TLS and basic auth, in the Prometheus exporter-toolkit format (config "
                 "agent.web_config; docs/agent.md#security)");
  app.add_option("--doctor-interval", o->doctor_interval,
                 "run doctor's host checks this often and export their states, e.g. 10m; 0 = off "
                 "(default 10m; config agent.doctor_interval)");
  app.add_option("--doctor-root", o->doctor_root,
                 "host tree the checks read (default /; /host in a container; env "
                 "ANXIN_DOCTOR_ROOT; config agent.doctor_root)")
      ->check(ExistingDirectory());
  app.add_flag("--hash-password", o->hash_password,
               "print a bcrypt hash of the password read from stdin, for basic_auth_users, "
               "and exit");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(agent, "the node's Prometheus exporter: devices, running jobs, itself",
                       Setup);

}  // namespace
}  // namespace anxin::cli
