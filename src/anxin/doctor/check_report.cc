#include "anxin/doctor/check_report.h"

#include <unistd.h>

#include <algorithm>

#include "anxin/doctor/qos_report.h"

namespace anxin::doctor {

Severity Report::Worst() const {
  Severity w = Severity::kOk;
  for (const Finding& f : findings) w = std::max(w, f.severity);
  return w;
}

size_t Report::Count(Severity s) const {
  return static_cast<size_t>(std::count_if(findings.begin(), findings.end(),
                                           [&](const Finding& f) { return f.severity == s; }));
}

Report RunChecks(const HostFacts& facts, const std::vector<const Check*>& checks) {
  Report r;
  char name[256] = {};
  if (facts.root.is_live() && ::gethostname(name, sizeof(name) - 1) == 0) {
    r.host = name;
  } else {
    r.host = facts.root.root();
  }
  r.root = facts.root.root();
  for (const Check* c : checks) r.findings.push_back(BuiltinChecks().Run(*c, facts));
  r.qos = QosJson(facts);
  return r;
}

std::string RenderTable(const Report& report, bool verbose) {
  size_t w = 5;
  for (const Finding& f : report.findings) w = std::max(w, f.check_id.size());
  std::string out;
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s.append(n - s.size(), ' ');
    return s;
  };
  out += pad("CHECK", w) + "  STATUS  SUMMARY\n";
  for (const Finding& f : report.findings) {
    out += pad(f.check_id, w) + "  " + pad(std::string(SeverityName(f.severity)), 6) + "  " +
           f.summary + "\n";
  }
  for (const Finding& f : report.findings) {
    bool problem = f.severity == Severity::kWarn || f.severity == Severity::kFail;
    if (!problem && !(verbose && !f.evidence.empty())) continue;
    out +=
        "\n" + f.check_id + " (" + std::string(SeverityName(f.severity)) + "): " + f.summary + "\n";
    for (const std::string& e : f.evidence) out += "  - " + e + "\n";
    if (problem) {
      out += "  why: " + f.why + "\n";
      out += "  fix: " + f.fix + "\n";
      if (!f.actions.empty()) {
        out += "  anxin doctor --fix can apply " + std::to_string(f.actions.size()) + " step(s)\n";
      }
    }
  }
  out += "\n" + RenderSummaryLine(report);
  return out;
}

std::string RenderSummaryLine(const Report& report) {
  return std::to_string(report.findings.size()) +
         " checks: " + std::to_string(report.Count(Severity::kOk)) + " ok, " +
         std::to_string(report.Count(Severity::kWarn)) + " warn, " +
         std::to_string(report.Count(Severity::kFail)) + " fail, " +
         std::to_string(report.Count(Severity::kSkip)) + " skipped (" + report.root + ")\n";
}

nlohmann::json ToJson(const Report& report) {
  nlohmann::json j;
  j["host"] = report.host;
  j["root"] = report.root;
  j["worst"] = std::string(SeverityName(report.Worst()));
  j["findings"] = nlohmann::json::array();
  for (const Finding& f : report.findings) {
    nlohmann::json jf;
    jf["id"] = f.check_id;
    jf["status"] = std::string(SeverityName(f.severity));
    jf["summary"] = f.summary;
    jf["evidence"] = f.evidence;
    jf["why"] = f.why;
    jf["fix"] = f.fix;
    jf["fix_commands"] = nlohmann::json::array();
    for (const FixAction& a : f.actions) jf["fix_commands"].push_back(a.Render());
    j["findings"].push_back(jf);
  }
  if (!report.qos.is_null()) j["qos"] = report.qos;
  return j;
}

Result<Report> ReportFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("findings") || !j["findings"].is_array()) {
    return DataLoss("not an anxin doctor --json report (no findings array)");
  }
  Report r;
  r.host = j.value("host", "");
  r.root = j.value("root", "");
  for (const auto& jf : j["findings"]) {
    if (!jf.is_object() || !jf.contains("id") || !jf.contains("status") || !jf["id"].is_string() ||
        !jf["status"].is_string()) {
      return DataLoss("doctor report: a finding without id or status");
    }
    Finding f;
    f.check_id = jf["id"].get<std::string>();
    if (!ParseSeverity(jf["status"].get<std::string>(), f.severity)) {
      return DataLoss("doctor report: unknown status '" + jf["status"].get<std::string>() + "'");
    }
    f.summary = jf.value("summary", "");
    if (jf.contains("evidence") && jf["evidence"].is_array()) {
      for (const auto& e : jf["evidence"]) {
        if (e.is_string()) f.evidence.push_back(e.get<std::string>());
      }
    }
    f.why = jf.value("why", "");
    f.fix = jf.value("fix", "");
    r.findings.push_back(std::move(f));
  }
  if (j.contains("qos") && j["qos"].is_object()) r.qos = j["qos"];
  return r;
}

}  // namespace anxin::doctor
