// The scenario of `anxin sim net`: a RoCE fabric (topology, NICs, switch
// queues, PFC, ECN, DCQCN) and the traffic to run on it (collectives, control
// messages, background flows), read from YAML with file:line:col errors
// (docs/netsim.md lists every key).
//
//   ANXIN_ASSIGN_OR_RETURN(Scenario s, LoadScenario("dscp48.yaml"));
//   s.topology.hosts = 64;                    // edit before running
//   ANXIN_TRY(ValidateScenario(s));           // the checks LoadScenario made
//   int prio = s.PriorityOfDscp(26);          // DSCP -> switch priority
//   (void)prio;
//
// Thread safety: plain values.
#ifndef ANXIN_NETSIM_SCENARIO_H_
#define ANXIN_NETSIM_SCENARIO_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/netsim/host_qos.h"

namespace anxin::netsim {

inline constexpr int kPriorities = 8;
inline constexpr uint64_t kPsPerSecond = 1'000'000'000'000ull;

enum class TopologyKind { kStar, kLeafSpine, kRail, kFatTree };
std::string_view TopologyName(TopologyKind k);

struct TopologySpec {
  TopologyKind kind = TopologyKind::kLeafSpine;
  int hosts = 8;
  int hosts_per_leaf = 8;  // leaf_spine, rail: downlinks per leaf
  int spines = 0;          // leaf_spine, rail: 0 = from oversubscription
  double oversubscription = 1.0;
  int rails = 1;  // rail: NICs per server, one leaf plane per rail
  int k = 4;      // fat_tree: switch radix; k^3/4 hosts at most
  int switch_ports = 64;
  double link_gbps = 200;         // host <-> leaf
  double uplink_gbps = 0;         // between switches; 0 = link_gbps
  uint64_t delay_ps = 1'000'000;  // per link, one way (1 us)
};

struct QueueSpec {
  bool strict = false;      // strict priority (served before every ETS queue)
  int ets_weight = 0;       // DWRR weight among the ETS queues; 0 = equal share
  bool pfc = false;         // lossless: PFC XOFF/XON on this priority
  uint64_t xoff_bytes = 0;  // per ingress port and priority
  uint64_t xon_bytes = 0;
  bool ecn = false;
  uint64_t kmin_bytes = 0, kmax_bytes = 0;  // egress queue length
  double pmax = 0;
};

struct DcqcnSpec {
  bool enabled = false;
  double g = 1.0 / 256;
  uint64_t alpha_timer_ps = 55'000'000;  // alpha decays every 55 us without CNP
  uint64_t increase_timer_ps = 55'000'000;
  uint64_t cnp_interval_ps = 50'000'000;  // at most one CNP per flow per interval
  double rai_gbps = 0.4;                  // additive increase
  double min_rate_gbps = 0.1;
  int fast_recovery_steps = 5;
  int cnp_dscp = 48;
};

enum class CollAlgo { kRing, kTree, kHalvingDoubling, kPairwise };
std::string_view AlgoName(CollAlgo a);
[[nodiscard]] Result<CollAlgo> ParseAlgo(std::string_view name);

enum class CollKind { kAllReduce, kAllGather, kReduceScatter, kAlltoAll };
std::string_view CollName(CollKind k);

struct CollectiveSpec {
  CollKind op = CollKind::kAllReduce;
  CollAlgo algo = CollAlgo::kRing;
  uint64_t bytes = 1 << 20;  // nccl-tests' S: the larger of one rank's buffers
  int ranks = 0;             // the first N hosts; 0 = every host
  int dscp = 26;
  uint64_t start_ps = 0;
  int repeat = 1;            // back to back
  uint64_t chunk_bytes = 0;  // tree pipelining chunk; 0 = NCCL's choice (NcclTreeChunk)
  // HCCL/NCCL-style ready notification: before each message the receiver
  // tells the sender it may write (0 = none). It travels on control_dscp,
  // so a congested control queue stretches every step.
  uint64_t handshake_bytes = 0;
  int control_dscp = 48;
  std::string name;
};

struct ControlSpec {
  uint64_t bytes = 256;
  uint64_t interval_ps = 10'000'000;  // one message every 10 us
  int dscp = 48;
  int count = 0;  // 0: until the collectives end
};

struct FlowSpec {
  int src = 0, dst = 1;
  uint64_t bytes = 1 << 20;
  int dscp = 0;
  uint64_t start_ps = 0;
};

struct Limits {
  uint64_t max_events = 2'000'000'000ull;
  uint64_t max_memory = 4ull << 30;
  uint64_t max_sim_ps = 10 * kPsPerSecond;
};

struct Scenario {
  std::string source;  // file name, for reports
  uint64_t seed = 1;
  TopologySpec topology;
  uint32_t mtu = 4096;                  // payload bytes per packet
  uint32_t header_bytes = 62;           // Ethernet + IPv4 + UDP + BTH + ICRC + FCS
  uint32_t train_packets = 1;           // packets simulated as one unit (1 = exact)
  uint64_t buffer_bytes = 32ull << 20;  // switch shared buffer
  std::array<QueueSpec, kPriorities> queues{};
  std::map<int, int> dscp_to_priority;  // explicit entries; default dscp >> 3
  // switch.qos_from: the host report the DSCP map and PFC priorities came from.
  std::optional<HostQos> qos_from;
  DcqcnSpec dcqcn;
  uint64_t rto_ps = 100'000'000;    // resend of a dropped packet (lossy queues)
  uint64_t storm_ps = 500'000'000;  // a pause longer than this is a PFC storm
  std::vector<CollectiveSpec> collectives;
  bool serial = false;  // each collective starts when the one before has finished
  std::vector<ControlSpec> control;
  std::vector<FlowSpec> flows;
  Limits limits;

  int PriorityOfDscp(int dscp) const;
};

// Defaults without any file: 8 hosts on a leaf-spine, PFC + ECN on priority 3.
Scenario DefaultScenario();

// Reads and validates a scenario. Unknown keys, bad values, impossible
// topologies and thresholds out of order are kInvalidArgument
// "file:line:col: key: problem".
[[nodiscard]] Result<Scenario> LoadScenario(const std::string& path);
// How a scenario reads the files it names (switch.qos_from), given the path
// resolved against the scenario's directory. Empty: ReadFile, at most 16 MiB.
using ScenarioFileReader = std::function<Result<std::string>(const std::string& path)>;
[[nodiscard]] Result<Scenario> ParseScenario(std::string_view yaml, const std::string& name,
                                             const ScenarioFileReader& read_file = {});
// The checks that do not need a position (also run after edits by flags).
[[nodiscard]] Status ValidateScenario(const Scenario& s);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_SCENARIO_H_
