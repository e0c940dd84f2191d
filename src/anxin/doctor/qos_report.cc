#include "anxin/doctor/qos_report.h"

#include <string>

#include "anxin/doctor/qos_env.h"

namespace anxin::doctor {
namespace {

using nlohmann::json;

json PfcJson(const std::array<bool, 8>& pfc) {
  json out = json::array();
  for (int p = 0; p < 8; ++p) {
    if (pfc[static_cast<size_t>(p)]) out.push_back(p);
  }
  return out;
}

json DscpMap(const std::map<int, int>& m) {
  json out = json::object();
  for (const auto& [dscp, prio] : m) out[std::to_string(dscp)] = prio;
  return out;
}

json Traffic(std::string_view library, std::string_view variable, const TrafficDscp& t) {
  return json{{"library", library},
              {"in_use", t.in_use},
              {"variable", variable},
              {"source", t.source},
              {"dscp", t.error.empty() ? json(t.dscp) : json(nullptr)},
              {"error", t.error}};
}

json NicPort(const NicFacts& n) {
  json p{{"kind", "nic"},
         {"name", n.ifname.empty() ? n.pci.address : n.ifname},
         {"pci", n.pci.address},
         {"trust", nullptr},
         {"pfc", nullptr},
         {"dscp_to_priority", nullptr},
         {"unlisted_dscp", "dscp>>3"},
         {"cnp_dscp", n.ecn.cnp_dscp ? json(*n.ecn.cnp_dscp) : json(nullptr)},
         {"error", n.qos_error}};
  if (n.qos) {
    if (!n.qos->trust.empty()) p["trust"] = n.qos->trust;
    if (n.qos->has_pfc) p["pfc"] = PfcJson(n.qos->pfc_enabled);
    // mlnx_qos lists the DSCPs it maps; the others take the mlx5 default.
    if (n.qos->has_pfc || !n.qos->dscp_to_prio.empty()) {
      p["dscp_to_priority"] = DscpMap(n.qos->dscp_to_prio);
    }
    if (p["error"] == "" && !n.qos->has_pfc) p["error"] = "mlnx_qos printed no PFC table";
  }
  return p;
}

json NpuPort(const HostFacts& f, const NpuPortFacts& n) {
  auto pci = f.npu_pci.find(n.npu);
  json p{{"kind", "npu"},
         {"name", "npu" + std::to_string(n.npu)},
         {"pci", pci != f.npu_pci.end() ? json(pci->second) : json(nullptr)},
         {"trust", nullptr},
         {"pfc", n.pfc ? PfcJson(*n.pfc) : json(nullptr)},
         {"dscp_to_priority", n.dscp_to_tc ? DscpMap(*n.dscp_to_tc) : json(nullptr)},
         {"unlisted_dscp", "unknown"},
         {"cnp_dscp", nullptr},
         {"error", n.error}};
  if (n.error.empty() && n.pfc && !n.dscp_to_tc) {
    p["error"] = "hccn_tool -i " + std::to_string(n.npu) + " -dscp_to_tc -g gave no mapping";
  }
  return p;
}

}  // namespace

json QosJson(const HostFacts& f) {
  json ports = json::array();
  for (const NicFacts& n : f.nics) ports.push_back(NicPort(n));
  for (const NpuPortFacts& n : f.npu_ports) ports.push_back(NpuPort(f, n));
  return json{{"version", kQosJsonVersion},
              {"traffic", json::array({Traffic("hccl", "HCCL_RDMA_TC", HcclDscp(f)),
                                       Traffic("nccl", "NCCL_IB_TC", NcclDscp(f))})},
              {"ports", ports}};
}

}  // namespace anxin::doctor
