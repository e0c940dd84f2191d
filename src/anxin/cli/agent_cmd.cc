// `anxin agent`: the node's Prometheus exporter for devices and running jobs.
// Docs: docs/agent.md.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "anxin/agent/command.h"
#include "anxin/agent/web_config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/cli/version.h"

namespace anxin::cli::agent_cmd {
namespace {

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

struct Options : agent::AgentFlags {
  bool hash_password = false;
};

int Run(const Options& o, const GlobalOptions& g) {
  if (o.hash_password) return HashPasswordFromStdin();
  auto rc = agent::RunAgentCommand(o, g.config, kVersion);
  if (!rc) return ReportError(rc.error());
  return *rc;
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
}  // namespace anxin::cli::agent_cmd
