// `anxin sim net`: the packet-level RoCE fabric simulator (docs/netsim.md).
// The `sim` group is registered here too: it holds simulators of what a
// cluster would do before anyone tries it on one.
//
//   anxin sim net SCENARIO.yaml [--json] [--svg FILE] [--save FILE] [--seed N] [--hosts N]
//   anxin sim net --compare A.yaml B.yaml
#include <cstdio>
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/netsim/netsim.h"

namespace anxin::cli::sim_net_cmd {
namespace {

ANXIN_REGISTER_COMMAND_GROUP(sim, "what-if simulators: the RoCE fabric under collectives");

struct Opts {
  netsim::SimNetOptions sim;
  uint64_t seed = 0;
  int hosts = 0;
};

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("SCENARIO", o->sim.scenarios, "scenario YAML file (two with --compare)")
      ->required();
  app.add_flag("--compare", o->sim.compare, "run two scenarios and print them side by side");
  app.add_option("--svg", o->sim.svg_file, "write the queue/pause timeline as SVG");
  app.add_option("--save", o->sim.save_file,
                 "write the collectives as `anxin bench comm` JSON (for bench comm compare)");
  app.add_option("--seed", o->seed, "override the scenario's seed")->check(AtLeast(0));
  app.add_option("--hosts", o->hosts, "override topology.hosts; collectives span every host")
      ->check(InRange(2, 65536));
  return [o](const GlobalOptions& g) -> int {
    o->sim.json = g.json;
    if (o->seed != 0) o->sim.seed = o->seed;
    if (o->hosts != 0) o->sim.hosts = o->hosts;
    auto out = netsim::RunSimNet(o->sim);
    if (!out) return ReportError(out.error());
    std::fputs(out->text.c_str(), stdout);
    return out->status;
  };
}

ANXIN_REGISTER_SUBCOMMAND(sim, net,
                          "packet-level RoCE fabric simulator: collectives, DSCP queues, PFC, "
                          "ECN/DCQCN",
                          Setup);

}  // namespace
}  // namespace anxin::cli::sim_net_cmd
