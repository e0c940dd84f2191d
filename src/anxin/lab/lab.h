// `anxin lab`: a simulated multi-node cluster on this machine with the real
// monitoring stack, for watching the whole operations loop: a fault on one
// node -> the alert in Prometheus -> Alertmanager -> `anxin notify` -> a signed
// card in a Feishu-compatible sink -> `anxin run` recovers every node -> the
// resolved card. Docs: docs/lab.md.
//
//   LabFlags flags;
//   flags.action = "up";
//   flags.nodes = 4;
//   flags.dir = "/tmp/lab";
//   flags.exit_when_done = true;      // stop once the table is complete
//   ANXIN_ASSIGN_OR_RETURN(int status, RunLab(flags, /*json=*/false));
//
// `up` starts, as processes on loopback ports it picks: a 3-member etcd, per
// node an `anxin agent` (sim backend, 8 NPUs, its own scenario) and an
// `anxin run` supervisor (the sample trainer, one gloo world across the
// nodes), Prometheus with the shipped configuration and rules, Alertmanager,
// `anxin notify`, and serves the status page and the Feishu sink itself. It
// records every child (pid, start time, port) in DIR, so that `down` stops
// them all, also after `up` was killed with SIGKILL.
//
// Thread safety: call from one thread; `up` takes SIGINT/SIGTERM while it runs.
#ifndef ANXIN_LAB_LAB_H_
#define ANXIN_LAB_LAB_H_

#include <string>

#include "anxin/base/error.h"

namespace anxin::lab {

inline constexpr int kDefaultPagePort = 9470;
inline constexpr int kMaxNodes = 32;

struct LabFlags {
  std::string action;              // up | status | report | down
  int nodes = 4;                   // up: 1..kMaxNodes
  int ranks_per_node = 1;          // up: gloo ranks per node (each drives NPU 0..)
  std::string faults;              // up: the faults file; "" = examples/lab/faults.yaml
  std::string dir = ".anxin/lab";  // where everything lives
  int port = kDefaultPagePort;     // up: the status page and the sink; 0: any free one
  bool exit_when_done = false;     // up: stop everything once the table is complete
  std::string timeout = "10m";     // up with exit_when_done: give up waiting after this
};

// Runs the action; returns the exit status. Errors: kInvalidArgument for bad
// flags or a bad faults file (exit 2), kFailedPrecondition for a missing
// program (naming its Debian package) and kUnavailable for a busy port
// (exit 3).
Result<int> RunLab(const LabFlags& flags, bool json);

// `anxin demo --cluster`: `up` with the default faults in a temporary
// directory, waits for the table, prints it, and tears everything down.
Result<int> RunClusterDemo(int nodes, bool json);

}  // namespace anxin::lab

#endif  // ANXIN_LAB_LAB_H_
