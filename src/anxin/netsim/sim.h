// The packet-level RoCE fabric simulation behind `anxin sim net`: discrete
// events in integer picoseconds on one core, deterministic for a seed.
//
// NICs send each flow (a queue pair's message) at the line rate, or at the
// DCQCN rate after CNPs; switch egress ports have 8 priority queues served by
// strict priority then DWRR (ETS); a shared buffer counts bytes per ingress
// port and priority and sends PFC pause/resume upstream at XOFF/XON, which
// stops that priority of the upstream port hop by hop; egress queues mark
// ECN between Kmin and Kmax; receivers answer marks with CNPs on their own
// priority. Packets are MTU-sized (or trains of train_packets MTUs).
//
//   Scenario s = DefaultScenario();         // or LoadScenario("fabric.yaml")
//   s.collectives.push_back(CollectiveSpec{});
//   ANXIN_ASSIGN_OR_RETURN(SimResult r, Simulate(s));
//   double us = r.collectives[0].time_us;   // completion time
//   double p99 = r.control.p99_us;          // control-message latency
//   (void)us;
//   (void)p99;
//
// Thread safety: Simulate is reentrant (no shared state).
#ifndef ANXIN_NETSIM_SIM_H_
#define ANXIN_NETSIM_SIM_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/netsim/scenario.h"

namespace anxin::netsim {

struct CollectiveResult {
  std::string name;
  CollKind op = CollKind::kAllReduce;
  CollAlgo algo = CollAlgo::kRing;
  int ranks = 0;
  uint64_t bytes = 0;
  int iteration = 0;
  double start_us = 0, time_us = 0;
  double algbw = 0, busbw = 0;  // GB/s (1e9 bytes), nccl-tests' definitions
  double model_us = 0;          // the alpha-beta model of an idle fabric
  uint64_t flows = 0;
};

struct LatencySummary {
  uint64_t count = 0;
  double p50_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
};

struct QueueSummary {
  int priority = 0;
  uint64_t max_bytes = 0;    // deepest egress queue of this priority on any switch port
  std::string max_port;      // where ("leaf0->spine1")
  uint64_t pauses_sent = 0;  // PFC XOFF frames
  double paused_us = 0;      // summed over ports
  double longest_pause_us = 0;
  uint64_t ecn_marks = 0;
  uint64_t drops = 0;
  uint64_t bytes = 0;  // bytes that left switch egress ports on it
};

struct StormPort {
  std::string port;
  int priority = 0;
  double longest_pause_us = 0;
};

// Occupancy and pauses over time in equal bins (for the SVG and --json).
struct Timeline {
  double bin_us = 0;
  std::vector<std::array<uint64_t, kPriorities>> max_queue_bytes;
  std::vector<std::array<uint32_t, kPriorities>> pauses;
};

struct FlowResult {
  int src = 0, dst = 0;
  uint64_t bytes = 0;
  double start_us = 0, fct_us = 0;
};

struct SimResult {
  std::string scenario;
  std::optional<HostQos> qos_from;  // the host report switch.qos_from read
  int hosts = 0, switches = 0;
  std::vector<CollectiveResult> collectives;
  LatencySummary control;
  LatencySummary handshake;       // the collectives' ready notifications
  std::vector<FlowResult> flows;  // traffic.flows and incast, in file order
  std::array<QueueSummary, kPriorities> queues{};
  std::vector<StormPort> storms;  // a pause that lasted longer than storm_ps
  Timeline timeline;
  uint64_t cnps = 0, drops = 0, lossless_drops = 0;
  uint64_t unfinished_flows = 0;  // > 0: the fabric stalled (PFC deadlock)
  double sim_us = 0;
  uint64_t events = 0;
  double wall_s = 0;
  double cpu_s = 0;         // this process's CPU time during the run
  double events_per_s = 0;  // per CPU second: the engine's speed on one core
  uint64_t peak_flows = 0, peak_packets = 0;
  uint64_t peak_memory_bytes = 0;
};

// Runs the scenario to the end. A run that passes limits.max_events,
// limits.max_memory or limits.max_sim_time stops with kResourceExhausted
// naming the limit and the key that raises it.
[[nodiscard]] Result<SimResult> Simulate(const Scenario& scenario);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_SIM_H_
