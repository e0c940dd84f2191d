// qos.*: the RoCE QoS audit. The collective traffic's DSCP must map to a
// PFC-enabled (lossless) priority, HCCL_RDMA_SL must be that priority, trust
// must be dscp, control traffic and CNPs must not share the data priority,
// and ECN must be on for it. Mellanox NICs are read with mlnx_qos and sysfs,
// the NPUs' own RoCE ports with hccn_tool.
#include <set>

#include "anxin/doctor/check_util.h"
#include "anxin/doctor/qos_env.h"
#include "anxin/doctor/registry.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

std::string PfcList(const std::array<bool, 8>& pfc) {
  std::string s;
  for (int p = 0; p < 8; ++p) {
    if (pfc[static_cast<size_t>(p)]) s += (s.empty() ? "" : ",") + std::to_string(p);
  }
  return s.empty() ? "none" : s;
}

std::string PfcArg(int prio) {
  std::string s;
  for (int p = 0; p < 8; ++p) s += std::string(p ? "," : "") + (p == prio ? "1" : "0");
  return s;
}

// The lossless priorities a NIC's data traffic uses: the one its DSCP maps to
// when the job's traffic class is known, else every PFC-enabled priority.
std::vector<int> DataPriorities(const HostFacts& f, const NicFacts& n) {
  if (!n.qos) return {};
  if (auto d = NcclDscp(f); d.in_use && d.error.empty()) return {n.qos->PriorityOfDscp(d.dscp)};
  std::vector<int> out;
  for (int p = 0; p < 8; ++p) {
    if (n.qos->pfc_enabled[static_cast<size_t>(p)]) out.push_back(p);
  }
  return out;
}

Finding Trust(const HostFacts& f) {
  Finding r;
  size_t seen = 0, bad = 0;
  for (const NicFacts& n : f.nics) {
    if (!n.qos || n.qos->trust.empty()) {
      Note(r, Severity::kSkip,
           n.pci.address + ": " + (n.qos_error.empty() ? "no trust state" : n.qos_error));
      continue;
    }
    ++seen;
    if (n.qos->trust != "dscp") {
      ++bad;
      Note(r, Severity::kFail, n.ifname + ": trust " + n.qos->trust);
      r.fix +=
          (r.fix.empty() ? "" : "; ") + std::string("mlnx_qos -i ") + n.ifname + " --trust dscp";
    }
  }
  if (seen == 0)
    return f.nics.empty() ? Skip("no Mellanox NICs")
                          : Skip("trust state not readable: " + r.evidence.front());
  r.summary = bad == 0
                  ? std::to_string(seen) + " NICs trust dscp"
                  : std::to_string(bad) + " of " + std::to_string(seen) + " NICs do not trust dscp";
  if (r.severity == Severity::kSkip) r.severity = Severity::kOk;
  return r;
}

Finding DscpPfc(const HostFacts& f) {
  Finding r;
  size_t seen = 0, bad = 0;
  TrafficDscp nccl = NcclDscp(f);
  TrafficDscp hccl = HcclDscp(f);
  for (const TrafficDscp* t : {&nccl, &hccl}) {
    if (t->in_use && !t->error.empty()) {
      Note(r, Severity::kFail, t->error);
      ++bad;
    }
  }
  if (nccl.in_use && nccl.error.empty()) {
    for (const NicFacts& n : f.nics) {
      if (!n.qos || !n.qos->has_pfc) {
        Note(r, Severity::kSkip,
             n.pci.address + ": " + (n.qos_error.empty() ? "no PFC table" : n.qos_error));
        continue;
      }
      ++seen;
      int prio = n.qos->PriorityOfDscp(nccl.dscp);
      if (!n.qos->pfc_enabled[static_cast<size_t>(prio)]) {
        ++bad;
        Note(r, Severity::kFail,
             n.ifname + ": DSCP " + std::to_string(nccl.dscp) + " (" + nccl.source +
                 ") -> priority " + std::to_string(prio) +
                 ", PFC off (PFC on: " + PfcList(n.qos->pfc_enabled) + ")");
        r.fix += (r.fix.empty() ? "" : "; ") + std::string("mlnx_qos -i ") + n.ifname + " --pfc " +
                 PfcArg(prio) + " (and the same priority lossless on the switch), or move " +
                 nccl.source + " to a DSCP of a PFC priority";
      }
    }
  }
  if (hccl.in_use && hccl.error.empty()) {
    for (const NpuPortFacts& p : f.npu_ports) {
      std::string port = "NPU " + std::to_string(p.npu);
      if (!p.pfc) {
        Note(r, Severity::kSkip, port + ": " + p.error);
        continue;
      }
      ++seen;
      if (!p.dscp_to_tc || !p.dscp_to_tc->contains(hccl.dscp)) {
        Note(r, Severity::kWarn,
             port + ": DSCP " + std::to_string(hccl.dscp) + " (" + hccl.source +
                 ") has no dscp_to_tc entry");
        continue;
      }
      int tc = p.dscp_to_tc->at(hccl.dscp);
      if (!(*p.pfc)[static_cast<size_t>(tc)]) {
        ++bad;
        Note(r, Severity::kFail,
             port + ": DSCP " + std::to_string(hccl.dscp) + " (" + hccl.source + ") -> TC " +
                 std::to_string(tc) + ", PFC off (PFC on: " + PfcList(*p.pfc) + ")");
      }
    }
  }
  if (seen == 0 && bad == 0) {
    if (!nccl.in_use && !hccl.in_use)
      return Skip("no NCCL or HCCL traffic configured on this host");
    return Skip(r.evidence.empty() ? "no NIC QoS state readable"
                                   : "no NIC QoS state readable: " + r.evidence.front());
  }
  if (r.severity == Severity::kSkip) r.severity = Severity::kOk;
  r.summary = bad == 0
                  ? "collective DSCP maps to a PFC priority on " + std::to_string(seen) + " ports"
                  : std::to_string(bad) + " ports carry collective traffic on a lossy priority";
  return r;
}

Finding RdmaSl(const HostFacts& f) {
  TrafficDscp hccl = HcclDscp(f);
  if (!hccl.in_use) return Skip("HCCL not in use (no NPUs, no HCCL_* variables)");
  int sl = 4;
  std::string sl_src = "HCCL_RDMA_SL default 4";
  if (auto v = f.Env("HCCL_RDMA_SL")) {
    auto n = ParseInt(*v);
    if (!n || *n < 0 || *n > 7) {
      Finding r;
      Note(r, Severity::kFail, "HCCL_RDMA_SL=" + *v + " is not a priority 0-7");
      r.summary = "HCCL_RDMA_SL invalid";
      return r;
    }
    sl = static_cast<int>(*n);
    sl_src = "HCCL_RDMA_SL=" + *v;
  }
  Finding r;
  size_t seen = 0, bad = 0;
  for (const NpuPortFacts& p : f.npu_ports) {
    std::string port = "NPU " + std::to_string(p.npu);
    if (!p.pfc) {
      Note(r, Severity::kSkip, port + ": " + p.error);
      continue;
    }
    ++seen;
    if (!(*p.pfc)[static_cast<size_t>(sl)]) {
      ++bad;
      Note(r, Severity::kFail, port + ": " + sl_src + " but PFC is on priority " + PfcList(*p.pfc));
      continue;
    }
    if (hccl.error.empty() && p.dscp_to_tc && p.dscp_to_tc->contains(hccl.dscp) &&
        p.dscp_to_tc->at(hccl.dscp) != sl) {
      ++bad;
      Note(r, Severity::kFail,
           port + ": " + sl_src + " but DSCP " + std::to_string(hccl.dscp) + " maps to TC " +
               std::to_string(p.dscp_to_tc->at(hccl.dscp)));
    }
  }
  if (seen == 0)
    return Skip(r.evidence.empty() ? "no NPU RoCE ports readable" : r.evidence.front());
  if (r.severity == Severity::kSkip) r.severity = Severity::kOk;
  r.summary = bad == 0 ? sl_src + " is the PFC priority on " + std::to_string(seen) + " NPU ports"
                       : std::to_string(bad) + " NPU ports: " + sl_src + " is not the PFC priority";
  return r;
}

Finding ControlSeparation(const HostFacts& f) {
  Finding r;
  size_t seen = 0, bad = 0;
  for (const NicFacts& n : f.nics) {
    if (!n.qos || n.qos->trust != "dscp" || (n.qos->dscp_to_prio.empty() && !n.qos->has_pfc))
      continue;
    auto data = DataPriorities(f, n);
    if (data.empty()) continue;
    ++seen;
    std::set<int> data_set(data.begin(), data.end());
    int control = n.qos->PriorityOfDscp(0);
    bool is_bad = false;
    if (data_set.contains(control)) {
      Note(r, Severity::kFail,
           n.ifname + ": control traffic (DSCP 0) shares data priority " + std::to_string(control));
      is_bad = true;
    }
    if (n.ecn.cnp_dscp) {
      int cnp = n.qos->PriorityOfDscp(*n.ecn.cnp_dscp);
      if (data_set.contains(cnp)) {
        Note(r, Severity::kFail,
             n.ifname + ": CNP DSCP " + std::to_string(*n.ecn.cnp_dscp) + " shares data priority " +
                 std::to_string(cnp));
        is_bad = true;
      }
    }
    if (is_bad) ++bad;
  }
  for (const NpuPortFacts& p : f.npu_ports) {
    TrafficDscp hccl = HcclDscp(f);
    if (!p.dscp_to_tc || !hccl.error.empty() || !p.dscp_to_tc->contains(hccl.dscp)) continue;
    ++seen;
    int data = p.dscp_to_tc->at(hccl.dscp);
    if (p.dscp_to_tc->contains(0) && p.dscp_to_tc->at(0) == data) {
      ++bad;
      Note(r, Severity::kFail,
           "NPU " + std::to_string(p.npu) + ": control traffic (DSCP 0) shares data TC " +
               std::to_string(data));
    }
  }
  if (seen == 0) return Skip("no NIC with a DSCP map and a data priority");
  r.summary =
      bad == 0
          ? "control and CNP traffic on their own priorities (" + std::to_string(seen) + " ports)"
          : std::to_string(bad) + " ports mix control or CNP traffic into the data priority";
  return r;
}

Finding Ecn(const HostFacts& f) {
  Finding r;
  size_t seen = 0, bad = 0;
  for (const NicFacts& n : f.nics) {
    if (!n.ecn.present) continue;
    auto data = DataPriorities(f, n);
    if (data.empty()) continue;
    ++seen;
    std::vector<std::string> off;
    for (int p : data) {
      auto np = n.ecn.np_enabled[static_cast<size_t>(p)];
      auto rp = n.ecn.rp_enabled[static_cast<size_t>(p)];
      if (np && !*np) off.push_back("roce_np/enable/" + std::to_string(p));
      if (rp && !*rp) off.push_back("roce_rp/enable/" + std::to_string(p));
    }
    if (!off.empty()) {
      ++bad;
      std::string list;
      for (const auto& o : off) list += (list.empty() ? "" : ", ") + o;
      Note(r, Severity::kFail, n.ifname + ": ECN off on the RoCE priority (" + list + " = 0)");
      for (const auto& o : off) {
        r.fix += (r.fix.empty() ? "" : "; ") + std::string("echo 1 > /sys/class/net/") + n.ifname +
                 "/ecn/" + o;
      }
    }
  }
  if (seen == 0) return Skip("no NIC exposes /sys/class/net/IF/ecn with a known data priority");
  r.summary = bad == 0 ? "ECN on for the RoCE priority on " + std::to_string(seen) + " NICs"
                       : std::to_string(bad) + " of " + std::to_string(seen) +
                             " NICs have ECN off on the RoCE priority";
  return r;
}

}  // namespace

Status RegisterQosChecks(CheckRegistry& r) {
  ANXIN_TRY(r.Add(
      {"qos.control_separation", "control/CNP own priority",
       "The field report's default DSCP settings did not separate control traffic from data; "
       "when many nodes started AllReduce at once, switch buffers filled and control messages "
       "queued behind data. Control and CNP packets need their own queue.",
       "map DSCP 0 and the CNP DSCP (/sys/class/net/IF/ecn/roce_np/cnp_dscp) to priorities "
       "other than the data priority (mlnx_qos -i IF --dscp2prio set,DSCP,PRIO)",
       ControlSeparation}));
  ANXIN_TRY(r.Add(
      {"qos.dscp_pfc", "traffic DSCP is lossless",
       "RoCE needs a lossless priority: if the collective traffic's DSCP (HCCL_RDMA_TC / 4 or "
       "NCCL_IB_TC / 4) maps to a priority without PFC, congestion drops packets and "
       "go-back-N retransmits stall every collective (the field report: 500 us AllReduce at 128 "
       "nodes until the DSCP was fixed).",
       "map the traffic's DSCP to the PFC priority (mlnx_qos --dscp2prio / hccn_tool "
       "-dscp_to_tc) or enable PFC on its priority, on the NIC and the switch alike",
       DscpPfc}));
  ANXIN_TRY(r.Add(
      {"qos.ecn", "ECN on RoCE priority",
       "Without ECN (DCQCN) on the RoCE priority, senders never slow down and PFC pauses spread "
       "congestion through the fabric.",
       "echo 1 > /sys/class/net/IF/ecn/roce_np/enable/P and .../roce_rp/enable/P", Ecn}));
  ANXIN_TRY(r.Add(
      {"qos.rdma_sl", "HCCL_RDMA_SL = PFC prio",
       "HCCL sends on priority HCCL_RDMA_SL (default 4); it must equal the PFC-enabled priority "
       "its DSCP maps to, or the traffic is lossy on the wire even when the DSCP looks right.",
       "export HCCL_RDMA_SL=<the PFC priority from hccn_tool -i N -pfc -g>", RdmaSl}));
  ANXIN_TRY(
      r.Add({"qos.trust", "NIC trusts DSCP",
             "With trust pcp the NIC ignores DSCP and classifies by VLAN priority, so every DSCP "
             "setting above has no effect.",
             "mlnx_qos -i IF --trust dscp", Trust}));
  return Ok();
}

}  // namespace anxin::doctor
