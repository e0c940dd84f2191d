#include "anxin/host/qos.h"

#include <cctype>

#include "anxin/base/strings.h"

namespace anxin::host {

int MlnxQos::PriorityOfDscp(int dscp) const {
  auto it = dscp_to_prio.find(dscp);
  return it != dscp_to_prio.end() ? it->second : DefaultDscpPriority(dscp);
}

namespace {
// "priority 0 1 2 ..." followed by "enabled 0 0 0 1 ...".
bool ParsePfcLines(std::string_view prio_line, std::string_view enabled_line,
                   std::array<bool, 8>& out) {
  auto prios = SplitWords(prio_line);
  auto flags = SplitWords(enabled_line);
  if (prios.empty() || flags.empty() || ToLower(flags[0]) != "enabled") return false;
  for (size_t i = 1; i < prios.size() && i < flags.size(); ++i) {
    auto p = ParseInt(prios[i]);
    auto f = ParseInt(flags[i]);
    if (!p || !f || *p < 0 || *p > 7) return false;
    out[static_cast<size_t>(*p)] = *f != 0;
  }
  return true;
}
}  // namespace

Result<std::array<bool, 8>> ParsePfcTable(std::string_view text) {
  auto lines = SplitLines(text);
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    auto w = SplitWords(lines[i]);
    if (w.empty() || ToLower(w[0]) != "priority") continue;
    std::array<bool, 8> out{};
    if (ParsePfcLines(lines[i], lines[i + 1], out)) return out;
  }
  return DataLoss("no PFC table ('priority 0 1 ...' followed by 'enabled ...') in the output");
}

Result<MlnxQos> ParseMlnxQos(std::string_view text) {
  MlnxQos q;
  bool saw_map = false;
  for (std::string_view raw : SplitLines(text)) {
    std::string_view line = Trim(raw);
    std::string lower = ToLower(line);
    if (lower.starts_with("priority trust state:")) {
      q.trust = std::string(Trim(line.substr(21)));
    } else if (lower.starts_with("prio:") && lower.find("dscp:") != std::string::npos) {
      // "prio:3 dscp:31,30,29,28,27,26,25,24,"
      size_t d = lower.find("dscp:");
      auto prio = ParseInt(Split(line.substr(5), ' ')[0]);
      if (!prio || *prio < 0 || *prio > 7)
        return DataLoss("mlnx_qos: bad line '" + std::string(line) + "'");
      for (std::string_view v : Split(line.substr(d + 5), ',')) {
        if (Trim(v).empty()) continue;
        auto dscp = ParseInt(v);
        if (!dscp || *dscp < 0 || *dscp > 63) {
          return DataLoss("mlnx_qos: bad DSCP '" + std::string(v) + "' in '" + std::string(line) +
                          "'");
        }
        q.dscp_to_prio[static_cast<int>(*dscp)] = static_cast<int>(*prio);
      }
      saw_map = true;
    }
  }
  if (auto pfc = ParsePfcTable(text)) {
    q.pfc_enabled = *pfc;
    q.has_pfc = true;
  }
  if (q.trust.empty() && !saw_map && !q.has_pfc) {
    return DataLoss("mlnx_qos output has no trust state, dscp2prio or PFC section");
  }
  return q;
}

Result<std::map<int, int>> ParseHccnDscpToTc(std::string_view text) {
  std::map<int, int> out;
  for (std::string_view line : SplitLines(text)) {
    std::string lower = ToLower(line);
    size_t d = lower.find("dscp");
    size_t t = lower.find("tc", d == std::string::npos ? 0 : d + 4);
    if (d == std::string::npos || t == std::string::npos) continue;
    auto number_after = [&](size_t pos) -> std::optional<int64_t> {
      while (pos < lower.size() && !std::isdigit(static_cast<unsigned char>(lower[pos]))) {
        if (std::isalpha(static_cast<unsigned char>(lower[pos]))) return std::nullopt;
        ++pos;
      }
      size_t b = pos;
      while (pos < lower.size() && std::isdigit(static_cast<unsigned char>(lower[pos]))) ++pos;
      return ParseInt(std::string_view(lower).substr(b, pos - b));
    };
    auto dscp = number_after(d + 4);
    auto tc = number_after(t + 2);
    if (!dscp || !tc) continue;
    if (*dscp < 0 || *dscp > 63 || *tc < 0 || *tc > 7) {
      return DataLoss("hccn_tool dscp_to_tc: value out of range in '" + std::string(line) + "'");
    }
    out[static_cast<int>(*dscp)] = static_cast<int>(*tc);
  }
  if (out.empty()) return DataLoss("no 'dscp N tc M' lines in the hccn_tool -dscp_to_tc -g output");
  return out;
}

RoceEcn ReadRoceEcn(const HostRoot& root, std::string_view ifname) {
  RoceEcn e;
  std::string base = "/sys/class/net/" + std::string(ifname) + "/ecn";
  e.present = root.Exists(base);
  if (!e.present) return e;
  for (int p = 0; p < 8; ++p) {
    std::string ps = std::to_string(p);
    if (auto v = root.ReadAttr(base + "/roce_np/enable/" + ps)) {
      if (auto n = ParseInt(*v)) e.np_enabled[static_cast<size_t>(p)] = *n != 0;
    }
    if (auto v = root.ReadAttr(base + "/roce_rp/enable/" + ps)) {
      if (auto n = ParseInt(*v)) e.rp_enabled[static_cast<size_t>(p)] = *n != 0;
    }
  }
  if (auto v = root.ReadAttr(base + "/roce_np/cnp_dscp")) {
    if (auto n = ParseInt(*v)) e.cnp_dscp = static_cast<int>(*n);
  }
  if (auto v = root.ReadAttr(base + "/roce_np/cnp_802p_prio")) {
    if (auto n = ParseInt(*v)) e.cnp_prio = static_cast<int>(*n);
  }
  return e;
}

std::optional<std::string> ReadSysfsTrust(const HostRoot& root, std::string_view ifname) {
  auto v = root.ReadAttr("/sys/class/net/" + std::string(ifname) + "/qos/trust");
  if (!v) return std::nullopt;
  return *v;
}

}  // namespace anxin::host
