// The host's RoCE QoS as data: the `qos` section of `anxin doctor --json`
// (docs/doctor.md, "JSON output"), read by `anxin sim net`'s switch.qos_from
// so a simulated fabric can run with one node's DSCP map and PFC priorities.
//
//   auto tools = MakeToolSource(host::HostRoot("/"), 5);
//   HostFacts facts = CollectFacts(CollectOptions{}, *tools);
//   nlohmann::json qos = QosJson(facts);   // {"version": 1, "traffic": [...], "ports": [...]}
//
// Per port (a Mellanox NIC from mlnx_qos, an NPU RoCE port from hccn_tool):
// its PFC-enabled priorities, its DSCP -> priority map as the tool listed it
// (and what unlisted DSCPs get), trust and CNP DSCP; per library (HCCL, NCCL):
// whether the job uses it and the DSCP its traffic class variable selects.
// Every key is always present; unknown values are null and `error` says why.
#ifndef ANXIN_DOCTOR_QOS_REPORT_H_
#define ANXIN_DOCTOR_QOS_REPORT_H_

#include <nlohmann/json.hpp>

#include "anxin/doctor/facts.h"

namespace anxin::doctor {

inline constexpr int kQosJsonVersion = 1;

nlohmann::json QosJson(const HostFacts& facts);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_QOS_REPORT_H_
