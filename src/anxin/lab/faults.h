// The faults file of `anxin lab up --faults FILE`: a timed list of faults to
// inject into the simulated cluster, each from the sim backend's fault library
// (temperature, HBM, links) or the run fault classes (an HCCL error line, a
// hang, a crash, a lost node). Docs: docs/lab.md.
//
//   ClusterShape shape{.nodes = 4};
//   ANXIN_ASSIGN_OR_RETURN(FaultPlan plan, LoadFaultPlan("examples/lab/faults.yaml", shape));
//   for (const LabFault& f : plan.faults) spdlog::info("{}", DescribeFault(f));
//
// Every problem is kInvalidArgument "file:line:col: faults[2].node: ...".
//
// Thread safety: pure functions.
#ifndef ANXIN_LAB_FAULTS_H_
#define ANXIN_LAB_FAULTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::lab {

enum class FaultKind {
  kTemperature,  // an NPU ramps to `to` C, stays `for`, cools down again
  kHbm,          // an NPU's HBM fills to the ratio `to` for `for`
  kLinkDown,     // an NPU's RoCE port goes down for `for`
  kHcclError,    // a rank prints an HCCL error line (EI0006) and stops
  kHang,         // a rank stops calling the collective
  kCrash,        // a rank exits 1
  kLostNode,     // the node's supervisor and agent are killed (-9); back after `for`
};
std::string_view FaultKindName(FaultKind kind);  // the YAML spelling: "link_down"

struct LabFault {
  double at_seconds = 0;  // from the moment the nodes start
  FaultKind kind = FaultKind::kTemperature;
  int node = 0;            // node index: node-<index>
  int npu = 0;             // device faults
  int port = 0;            // link_down
  int rank = 0;            // rank faults: the node's local rank
  double to = 0;           // temperature: C; hbm: used ratio
  double for_seconds = 0;  // device faults and lost_node: how long it lasts
  std::string where{};     // "file:line:col", for messages
};

struct FaultPlan {
  std::string source;
  std::vector<LabFault> faults;  // by time, file order among equal times
};

// The cluster a plan is checked against.
struct ClusterShape {
  int nodes = 4;
  int ranks_per_node = 1;
  int npus_per_node = 8;
};

// Reads the file; a fault on a node, NPU or rank the cluster does not have is
// an error naming its place.
Result<FaultPlan> LoadFaultPlan(const std::string& path, const ClusterShape& shape);
Result<FaultPlan> ParseFaultPlan(std::string_view yaml, const std::string& source,
                                 const ClusterShape& shape);

// "node-1 NPU 3 to 88 C for 45 s", "node-2 rank 0: HCCL error line".
std::string DescribeFault(const LabFault& f);
std::string NodeName(int index);  // "node-1"

// True for faults that a rank or the node suffers (anxin run recovers the
// job from them); false for device readings that only raise alerts.
bool NeedsRecovery(const LabFault& f);

// The Prometheus alerts (deploy/prometheus/rules) the fault should fire, in
// the order they fire; empty when only anxin run reports it.
std::vector<std::string> ExpectedAlerts(const LabFault& f);

}  // namespace anxin::lab

#endif  // ANXIN_LAB_FAULTS_H_
