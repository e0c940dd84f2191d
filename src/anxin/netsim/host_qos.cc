#include "anxin/netsim/host_qos.h"

#include <nlohmann/json.hpp>
#include <set>

#include "anxin/base/strings.h"

namespace anxin::netsim {
namespace {

using nlohmann::json;

constexpr int kQosVersion = 1;  // doctor's qos_report.h kQosJsonVersion
constexpr int kUnknown = -1;

// One port's settings as read from the report.
struct PortQos {
  std::string name;
  std::string kind;
  std::array<bool, 8> pfc{};
  std::map<int, int> listed;
  bool default_unlisted = false;  // unlisted DSCPs take DSCP >> 3 (mlx5)
  int Effective(int dscp) const {
    auto it = listed.find(dscp);
    if (it != listed.end()) return it->second;
    return default_unlisted ? (dscp >> 3) & 7 : kUnknown;
  }
};

// j[key], or null when absent (operator[] on a const json must not miss).
json Field(const json& j, const char* key) { return j.contains(key) ? j[key] : json(); }

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

Result<PortQos> ReadPort(const json& p, size_t index) {
  const std::string at = "qos.ports[" + std::to_string(index) + "]";
  PortQos q;
  q.name = Str(p, "name");
  q.kind = Str(p, "kind");
  if (q.name.empty()) q.name = at;
  const json pfc = Field(p, "pfc");
  if (!pfc.is_array()) return InvalidArgument(at + ".pfc: expected a list of priorities");
  for (const json& v : pfc) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 7) {
      return InvalidArgument(at + ".pfc: " + v.dump() + " is not a priority 0..7");
    }
    q.pfc[static_cast<size_t>(v.get<int>())] = true;
  }
  const json map = Field(p, "dscp_to_priority");
  if (!map.is_object()) return InvalidArgument(at + ".dscp_to_priority: expected an object");
  for (const auto& [key, value] : map.items()) {
    auto dscp = ParseInt(key);
    if (!dscp || *dscp < 0 || *dscp > 63) {
      return InvalidArgument(at + ".dscp_to_priority: DSCP '" + key + "' is not in 0..63");
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 7) {
      return InvalidArgument(at + ".dscp_to_priority: DSCP " + key + " -> " + value.dump() +
                             " is not a priority 0..7");
    }
    q.listed[static_cast<int>(*dscp)] = value.get<int>();
  }
  q.default_unlisted = Str(p, "unlisted_dscp") == "dscp>>3";
  return q;
}

std::string Prio(int p) { return p == kUnknown ? "not listed" : std::to_string(p); }

// "" when a and b agree; else what differs first. A DSCP that one port does
// not list (and has no known default for) agrees with anything.
std::string Difference(const PortQos& a, const PortQos& b) {
  if (a.pfc != b.pfc) return "PFC on " + FormatPfc(a.pfc) + " vs " + FormatPfc(b.pfc);
  for (int d = 0; d < 64; ++d) {
    const int x = a.Effective(d), y = b.Effective(d);
    if (x != kUnknown && y != kUnknown && x != y) {
      return "DSCP " + std::to_string(d) + " -> priority " + Prio(x) + " vs " + Prio(y);
    }
  }
  return "";
}

// The job's DSCP on the chosen kinds of port: HCCL's on NPU ports, NCCL's on NICs.
void JobDscp(const json& traffic, const std::set<std::string>& kinds, HostQos& out) {
  std::map<int, std::string> found;  // dscp -> source
  std::vector<std::string> errors;
  if (traffic.is_array()) {
    for (const json& t : traffic) {
      const std::string lib = Str(t, "library");
      const bool on_kind =
          (lib == "hccl" && kinds.contains("npu")) || (lib == "nccl" && kinds.contains("nic"));
      const json in_use = Field(t, "in_use");
      if (!on_kind || !in_use.is_boolean() || !in_use.get<bool>()) continue;
      if (!Str(t, "error").empty()) {
        errors.push_back(Str(t, "error"));
      } else if (t.contains("dscp") && t["dscp"].is_number_integer()) {
        found.emplace(t["dscp"].get<int>(), Str(t, "source"));
      }
    }
  }
  if (!errors.empty()) {
    out.job_dscp_error = errors.front();
  } else if (found.empty()) {
    out.job_dscp_error = "the report shows no HCCL or NCCL traffic on these ports";
  } else if (found.size() > 1) {
    out.job_dscp_error = "the report shows HCCL and NCCL traffic on different DSCPs (" +
                         found.begin()->second + ", " + found.rbegin()->second +
                         "): choose the ports with qos_from: {file: F, ports: npu} (HCCL) or "
                         "{file: F, ports: nic} (NCCL)";
  } else {
    out.job_dscp = found.begin()->first;
    out.job_dscp_source = found.begin()->second;
  }
}

}  // namespace

std::string FormatPfc(const std::array<bool, 8>& pfc) {
  std::string s;
  for (int p = 0; p < 8; ++p) {
    if (pfc[static_cast<size_t>(p)]) s += (s.empty() ? "" : ",") + std::to_string(p);
  }
  return s.empty() ? "none" : s;
}

std::string FormatDscpMap(const std::map<int, int>& m) {
  std::map<int, std::vector<int>> by_prio;
  for (const auto& [d, p] : m) by_prio[p].push_back(d);
  std::string out;
  for (const auto& [p, dscps] : by_prio) {
    std::string list;
    for (size_t i = 0; i < dscps.size();) {
      size_t j = i;
      while (j + 1 < dscps.size() && dscps[j + 1] == dscps[j] + 1) ++j;
      list += (list.empty() ? "" : ",") + std::to_string(dscps[i]) +
              (j > i ? "-" + std::to_string(dscps[j]) : "");
      i = j + 1;
    }
    out += (out.empty() ? "" : "; ") + std::to_string(p) + " <- " + list;
  }
  return out.empty() ? "none listed" : out;
}

Result<HostQos> ParseHostQos(std::string_view json_text, std::string_view kinds) {
  if (kinds != "auto" && kinds != "nic" && kinds != "npu") {
    return InvalidArgument("ports: '" + std::string(kinds) + "' is not auto, nic or npu");
  }
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("not JSON; save the report with `anxin doctor --json > FILE`");
  }
  if (!j.contains("qos")) {
    if (j.contains("hosts")) {
      return InvalidArgument(
          "an `anxin doctor --hosts` matrix; qos_from takes one host's `anxin doctor --json`");
    }
    if (j.contains("findings")) {
      return InvalidArgument(
          "a doctor report without a qos section (written by an anxin from before it had one); "
          "run `anxin doctor --json` again");
    }
    return InvalidArgument("not an `anxin doctor --json` report (no qos section)");
  }
  const json& qos = j["qos"];
  if (!qos.is_object() || !qos.contains("version") || !qos["version"].is_number_integer()) {
    return InvalidArgument("qos: not the section `anxin doctor --json` writes (no version)");
  }
  if (qos["version"].get<int64_t>() != kQosVersion) {
    return InvalidArgument("qos.version " + qos["version"].dump() + ": this anxin reads version " +
                           std::to_string(kQosVersion));
  }
  if (!qos.contains("ports") || !qos["ports"].is_array()) {
    return InvalidArgument("qos.ports: missing");
  }
  HostQos out;
  out.host = Str(j, "host");
  std::vector<PortQos> used;
  std::set<std::string> used_kinds;
  size_t of_kind = 0;
  for (size_t i = 0; i < qos["ports"].size(); ++i) {
    const json& p = qos["ports"][i];
    if (!p.is_object())
      return InvalidArgument("qos.ports[" + std::to_string(i) + "]: not an object");
    const std::string kind = Str(p, "kind");
    if (kinds != "auto" && kind != kinds) continue;
    ++of_kind;
    const std::string name = Str(p, "name").empty() ? "port " + std::to_string(i) : Str(p, "name");
    if (!Str(p, "error").empty() || Field(p, "pfc").is_null() ||
        Field(p, "dscp_to_priority").is_null()) {
      std::string why = Str(p, "error");
      if (why.empty()) why = Field(p, "pfc").is_null() ? "no PFC table" : "no DSCP map";
      out.skipped.push_back(name + ": " + why);
      continue;
    }
    const std::string trust = Str(p, "trust");
    if (!trust.empty() && trust != "dscp") {
      return InvalidArgument(name + " trusts " + trust +
                             ": it classifies by VLAN priority, not DSCP, so its DSCP map is not "
                             "in effect (anxin doctor's qos.trust); fix it or choose other ports");
    }
    ANXIN_ASSIGN_OR_RETURN(PortQos q, ReadPort(p, i));
    q.name = name;
    used.push_back(std::move(q));
    used_kinds.insert(kind);
  }
  if (used.empty()) {
    std::string what = kinds == "auto" ? "port" : std::string(kinds) + " port";
    std::string msg = of_kind == 0 ? "the report has no " + what + " (QoS not collected there)"
                                   : "no " + what + " with a readable PFC table and DSCP map";
    if (!out.skipped.empty()) msg += " (" + out.skipped.front() + ")";
    return InvalidArgument(msg);
  }
  for (size_t i = 1; i < used.size(); ++i) {
    std::string diff = Difference(used[0], used[i]);
    if (diff.empty()) continue;
    std::string msg = "ports " + used[0].name + " and " + used[i].name + " disagree (" + diff + ")";
    if (kinds == "auto" && used[0].kind != used[i].kind) {
      msg += ": choose one kind with qos_from: {file: F, ports: nic} or {file: F, ports: npu}";
    } else {
      msg +=
          ": the host is not configured alike; fix it, or copy one port's settings into "
          "switch.dscp_to_priority and switch.queues";
    }
    return InvalidArgument(msg);
  }
  out.pfc = used[0].pfc;
  for (const PortQos& q : used) {
    out.ports.push_back(q.name);
    for (const auto& [d, p] : q.listed) out.dscp_to_priority.emplace(d, p);
  }
  for (const std::string& k : used_kinds) out.kinds += (out.kinds.empty() ? "" : "+") + k;
  JobDscp(Field(qos, "traffic"), used_kinds, out);
  return out;
}

}  // namespace anxin::netsim
