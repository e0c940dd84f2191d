// RoCE QoS state of a NIC: trust mode, DSCP -> priority map and PFC from
// `mlnx_qos -i IF` (Mellanox) or `hccn_tool -i N -dscp_to_tc -g` / `-pfc -g`
// (the NPU's own RoCE ports), and ECN / CNP settings from sysfs.
//
//   std::string mlnx_qos_output;                     // what `mlnx_qos -i eth2` printed
//   ANXIN_ASSIGN_OR_RETURN(MlnxQos q, ParseMlnxQos(mlnx_qos_output));
//   int prio = q.PriorityOfDscp(26);          // explicit map, else the default dscp >> 3
//   bool lossless = q.pfc_enabled[prio];
#ifndef ANXIN_HOST_QOS_H_
#define ANXIN_HOST_QOS_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::host {

// The mlx5 default when a DSCP is not in the dscp2prio table: the top three
// bits of the DSCP select the priority.
inline int DefaultDscpPriority(int dscp) { return (dscp >> 3) & 7; }

struct MlnxQos {
  std::string trust;                // "dscp" or "pcp"; "" when the output had no trust line
  std::map<int, int> dscp_to_prio;  // listed entries only
  std::array<bool, 8> pfc_enabled{};
  bool has_pfc = false;
  int PriorityOfDscp(int dscp) const;
};

// Accepts the full output and the shorter excerpts seen in documentation
// (only some "prio:N dscp:a,b," lines). Output without a trust, dscp2prio or
// PFC section is kDataLoss (the tool failed or printed something else).
Result<MlnxQos> ParseMlnxQos(std::string_view text);

// `hccn_tool -i N -pfc -g`: "priority 0 1 ... 7" / "enabled 0 0 0 0 1 0 0 0".
Result<std::array<bool, 8>> ParsePfcTable(std::string_view text);

// `hccn_tool -i N -dscp_to_tc -g`: one mapping per line, the DSCP and TC as
// the numbers after the words "dscp" and "tc" ("dscp:33 tc:4", "DSCP 33 -> TC 4").
Result<std::map<int, int>> ParseHccnDscpToTc(std::string_view text);

// /sys/class/net/IF/ecn/roce_np|roce_rp/enable/<prio> and roce_np/cnp_dscp.
struct RoceEcn {
  std::array<std::optional<bool>, 8> np_enabled{};  // notification point (receiver sends CNP)
  std::array<std::optional<bool>, 8> rp_enabled{};  // reaction point (sender slows down)
  std::optional<int> cnp_dscp;
  std::optional<int> cnp_prio;
  bool present = false;  // the ecn directory exists
};
RoceEcn ReadRoceEcn(const HostRoot& root, std::string_view ifname);

// /sys/class/net/IF/qos/trust (MLNX_OFED), when mlnx_qos is not installed.
std::optional<std::string> ReadSysfsTrust(const HostRoot& root, std::string_view ifname);

}  // namespace anxin::host

#endif  // ANXIN_HOST_QOS_H_
