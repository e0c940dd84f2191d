// Running the selected checks over a host's facts, and printing the result as
// a table or JSON (the JSON is also what `--hosts` reads back from each host).
//
//   CollectOptions options;                               // root "/": this host
//   auto tools = MakeToolSource(host::HostRoot(options.root), /*timeout_s=*/5);
//   HostFacts facts = CollectFacts(options, *tools);
//   ANXIN_ASSIGN_OR_RETURN(auto checks, BuiltinChecks().Select("irq,qos"));
//   Report report = RunChecks(facts, checks);
//   std::cout << RenderTable(report);
//   int exit_code = report.Worst() == Severity::kFail ? 1 : 0;
#ifndef ANXIN_DOCTOR_CHECK_REPORT_H_
#define ANXIN_DOCTOR_CHECK_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/finding.h"
#include "anxin/doctor/registry.h"

namespace anxin::doctor {

struct Report {
  std::string host;  // host name (or the --hosts entry)
  std::string root;  // "/" or the captured tree
  std::vector<Finding> findings;
  // The host's RoCE QoS as data (qos_report.h); null when not collected.
  nlohmann::json qos;
  Severity Worst() const;
  size_t Count(Severity s) const;
};

Report RunChecks(const HostFacts& facts, const std::vector<const Check*>& checks);

// Columns: CHECK, STATUS, SUMMARY; then, for every finding that is not ok,
// its evidence, why it matters and the fix. verbose adds evidence of ok checks.
std::string RenderTable(const Report& report, bool verbose = false);

// The table's last line: "16 checks: 10 ok, 2 warn, 4 fail, 0 skipped (ROOT)\n".
std::string RenderSummaryLine(const Report& report);

// {host, root, worst, findings: [...], qos: {...}} (docs/doctor.md, "JSON output").
nlohmann::json ToJson(const Report& report);
// Reads back what ToJson wrote (another anxin's --json output).
Result<Report> ReportFromJson(const nlohmann::json& j);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_CHECK_REPORT_H_
