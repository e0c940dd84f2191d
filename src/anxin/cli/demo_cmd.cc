// `anxin demo`: the first thing a user runs (`make demo`): a short story on a
// simulated node in stages (src/anxin/demo/). Docs: docs/demo.md.
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/cli/version.h"
#include "anxin/demo/demo.h"

namespace anxin::cli::demo_cmd {
namespace {

int Run(const demo::DemoFlags& flags, const GlobalOptions& g) {
  auto rc = demo::RunDemo(flags, g.json, kVersion);
  if (!rc) return ReportError(rc.error());
  return *rc;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<demo::DemoFlags>();
  app.add_option("--seconds", o->seconds, "how long to watch the node")->capture_default_str();
  app.add_option("--interval", o->interval, "refresh interval")->capture_default_str();
  app.add_option("--scenario", o->scenario, "the sim scenario to play (file or built-in name)")
      ->capture_default_str();
  app.add_flag("--no-color", o->no_color, "no ANSI colours (also: NO_COLOR set)");
  app.add_option("--port", o->port, "the demo agent's port (taken: any free one; 0: any free one)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_option("--stages", o->stages,
                 "run only these stages, e.g. devices,agent (default: all; see docs/demo.md)")
      ->delimiter(',');
  app.add_option("--stay", o->stay,
                 "keep the agent and its page serving this long after the stages, e.g. 10m");
  app.add_flag("--cluster", o->cluster,
               "the cluster form: `anxin lab up` with the default faults, the per-fault table, "
               "then everything stopped (docs/lab.md)");
  app.add_option("--nodes", o->nodes, "with --cluster: the simulated nodes (1-32)")
      ->capture_default_str()
      ->check(InRange(1, 32));
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(demo, "a short tour of anxin on a simulated node (8 NPUs by default)",
                       Setup);

}  // namespace
}  // namespace anxin::cli::demo_cmd
