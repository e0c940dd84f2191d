// A host's QoS settings for a scenario, from `anxin doctor --json`: the
// switch.qos_from key (docs/netsim.md, "A node's settings") reads the report's
// `qos` section (docs/doctor.md, "JSON output") and takes the DSCP -> priority
// map and the PFC priorities of the host's ports, and the DSCP the job's
// collectives use (HCCL_RDMA_TC / NCCL_IB_TC) for `dscp: job`.
//
//   std::string text = "{}";   // what `anxin doctor --json` saved
//   ANXIN_ASSIGN_OR_RETURN(HostQos q, ParseHostQos(text, "npu"));
//   bool lossless4 = q.pfc[4];
//   (void)lossless4;
//
// Thread safety: pure functions.
#ifndef ANXIN_NETSIM_HOST_QOS_H_
#define ANXIN_NETSIM_HOST_QOS_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::netsim {

// What switch.qos_from took from a doctor report.
struct HostQos {
  std::string file;                     // as the scenario names it
  std::string host;                     // the report's host
  std::string kinds;                    // the ports used: "nic", "npu" or "nic+npu"
  std::vector<std::string> ports;       // the ports whose settings were taken
  std::vector<std::string> skipped;     // "eth3: why" for ports the report could not read
  std::array<bool, 8> pfc{};            // PFC-enabled priorities, the same on every port
  std::map<int, int> dscp_to_priority;  // the DSCPs the tools listed (others: DSCP >> 3)
  // The DSCP of the job's collectives on these ports, for `dscp: job`.
  std::optional<int> job_dscp;
  std::string job_dscp_source;  // "HCCL_RDMA_TC default 132"
  std::string job_dscp_error;   // why there is none
  // Scenario keys that won over the host's settings ("DSCP 48 -> 7 (host: 6)").
  std::vector<std::string> overrides;
};

// kinds: "auto" (every port), "nic" (Mellanox NICs, mlnx_qos) or "npu" (the
// NPUs' RoCE ports, hccn_tool). Errors are kInvalidArgument without a file
// name: not doctor's JSON, no qos section, no readable port of that kind, a
// NIC that does not trust DSCP, or ports whose PFC priorities or DSCP maps
// disagree (the two ports and the first difference named).
[[nodiscard]] Result<HostQos> ParseHostQos(std::string_view json_text, std::string_view kinds);

// "3 <- 24-31; 4 <- 33; 6 <- 48": the listed map by priority.
std::string FormatDscpMap(const std::map<int, int>& dscp_to_priority);
// "4" or "3,4" or "none".
std::string FormatPfc(const std::array<bool, 8>& pfc);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_HOST_QOS_H_
