// `anxin demo`: the first thing a user runs (`make demo`). It plays a short
// story on a simulated node in stages (devices, agent, notify, run); each
// stage shows one part of anxin doing its work for real. Docs: docs/demo.md.
//
//   DemoFlags flags;
//   flags.stages = {"devices", "agent"};
//   flags.seconds = "2s";
//   ANXIN_ASSIGN_OR_RETURN(DemoPlan plan, PlanDemo(flags));   // checks the flags
//   ANXIN_ASSIGN_OR_RETURN(int status, RunDemo(flags, /*json=*/false, "1.0"));
//   if (status != 0) spdlog::warn("demo: status {}", status);
//
// Thread safety: RunDemo takes SIGINT/SIGTERM while it runs (Ctrl-C ends
// the demo after the current stage's step); call it from one thread.
#ifndef ANXIN_DEMO_DEMO_H_
#define ANXIN_DEMO_DEMO_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/agent/agent.h"
#include "anxin/base/error.h"

namespace anxin::demo {

// The flags of `anxin demo`, as given.
struct DemoFlags {
  std::string seconds = "6s";
  std::string interval = "0.5s";
  std::string scenario = "demo";
  bool no_color = false;
  int port = agent::kDefaultPort;   // the agent's; taken -> any free one
  std::string stay;                 // keep the agent serving this long afterwards
  std::vector<std::string> stages;  // only these, in the demo's order; empty = all
  // The second form: `anxin lab up` with the default faults on this many
  // nodes, the per-fault table, and everything torn down (docs/lab.md).
  bool cluster = false;
  int nodes = 4;
};

// What the flags come to.
struct DemoPlan {
  double seconds = 6;
  double interval_seconds = 0.5;
  std::optional<double> stay_seconds;
  std::vector<std::string> stages;  // in the demo's order
};

// The stages, in the order the demo plays them.
std::vector<std::string_view> DemoStageNames();

// Errors: kInvalidArgument naming the flag.
Result<DemoPlan> PlanDemo(const DemoFlags& flags);

// Plays the demo (or, with flags.cluster, the cluster form: lab::RunClusterDemo),
// printing as it goes (one JSON document at the end with
// json); `version` is the agent's build_info label. Returns the exit status
// (0, also when interrupted).
Result<int> RunDemo(const DemoFlags& flags, bool json, std::string_view version);

}  // namespace anxin::demo

#endif  // ANXIN_DEMO_DEMO_H_
