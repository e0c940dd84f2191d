// `anxin lab up|status|report|down`: a simulated multi-node cluster with the
// real monitoring stack, faults on a timetable and the per-fault table
// (src/anxin/lab/). Docs: docs/lab.md.
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/lab/lab.h"

namespace anxin::cli::lab_cmd {
namespace {

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<lab::LabFlags>();
  app.add_option("action", o->action, "up | status | report | down")
      ->required()
      ->check(CLI::IsMember({"up", "status", "report", "down"}));
  app.add_option("--dir", o->dir, "the lab's directory: configuration, data, logs, the report")
      ->capture_default_str();
  app.add_option("--nodes", o->nodes, "up: simulated nodes, 1-32 (8 NPUs each)")
      ->capture_default_str()
      ->check(InRange(1, lab::kMaxNodes));
  app.add_option("--ranks-per-node", o->ranks_per_node,
                 "up: gloo ranks of the sample trainer per node (rank i drives NPU i)")
      ->capture_default_str()
      ->check(InRange(1, 8));
  app.add_option("--faults", o->faults,
                 "up: the timed faults file (default: examples/lab/faults.yaml)");
  app.add_option("--port", o->port, "up: the status page and the Feishu sink (0: any free port)")
      ->capture_default_str()
      ->check(PortNumber());
  app.add_flag("--exit-when-done", o->exit_when_done,
               "up: stop everything once every fault's row is complete, print the table");
  app.add_option(
         "--timeout", o->timeout,
         "up with --exit-when-done: give up (status 1) when the table is not complete by then")
      ->capture_default_str();
  return [o](const GlobalOptions& g) {
    auto rc = lab::RunLab(*o, g.json);
    if (!rc) return ReportError(rc.error());
    return *rc;
  };
}

ANXIN_REGISTER_COMMAND(lab,
                       "a simulated cluster with etcd, Prometheus, Alertmanager and notify: "
                       "faults, cards, recovery",
                       Setup);

}  // namespace
}  // namespace anxin::cli::lab_cmd
