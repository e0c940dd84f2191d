// `anxin doctor --fix`: the safe host fixes of a report, planned (a dry run,
// the default) or applied, then the same checks run again. The two fixes are
// stopping irqbalance and writing /proc/irq/N/smp_affinity_list; nothing here
// ever talks to a switch or changes QoS or sysctls.
//
//   CollectOptions co;                                     // the live root "/"
//   auto tools = MakeToolSource(host::HostRoot(co.root), /*timeout_s=*/5);
//   ANXIN_ASSIGN_OR_RETURN(std::vector<const Check*> checks, BuiltinChecks().Select("irq"));
//   Report report = RunChecks(CollectFacts(co, *tools), checks);
//   FixRun run = RunFix(report, {.collect = co, .tools = tools.get(), .checks = checks});
//   std::cout << RenderFixRun(run);                        // a dry run: the exact commands
//   int exit_code = run.worst == Severity::kFail ? 1 : 0;
//
// File writes go under the root prefix (so a test applies them to a copy of
// a fixture tree); commands (systemctl) run only on the live root "/",
// through process_runner.h.
#ifndef ANXIN_DOCTOR_FIX_H_
#define ANXIN_DOCTOR_FIX_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/check_report.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/finding.h"
#include "anxin/doctor/process_runner.h"
#include "anxin/doctor/registry.h"
#include "anxin/doctor/tools.h"
#include "anxin/host/root_fs.h"

namespace anxin::doctor {

struct FixOutcome {
  FixAction action;
  std::string check_id;
  enum class State { kPlanned, kApplied, kSkipped, kFailed } state = State::kPlanned;
  std::string detail;  // why skipped / the error
};

struct PlannedFix {
  std::string check_id;
  FixAction action;
};
// The actions of every warn or fail finding, in check order.
std::vector<PlannedFix> CollectFixes(const Report& report);

// apply=false: every outcome is kPlanned (a dry run). apply=true: writes and
// runs each action in order, continuing after a failure so one bad IRQ does
// not leave the rest unpinned. Commands run through RunTool(run, argv, 30 s):
// a non-zero exit is a failed step with the command's message.
std::vector<FixOutcome> ApplyFixes(const std::vector<PlannedFix>& fixes, const host::HostRoot& root,
                                   bool apply, const ProcessRunner& run = RunProcess);

// The fix block alone: "dry run: would apply N fix step(s) ..." or
// "applying N fix step(s):", then one line per step.
std::string RenderFixes(const std::vector<FixOutcome>& outcomes, bool apply);

struct FixOptions {
  CollectOptions collect;                 // how the report's facts were collected
  ToolSource* tools = nullptr;            // the same tools, to collect again after applying
  std::vector<const Check*> checks = {};  // the checks the report ran
  bool apply = false;                     // false: a dry run
  ProcessRunner run = RunProcess;         // for commands (live root only)
};

// What --fix did, and the status the command exits by.
struct FixRun {
  bool applied = false;  // a real run (--apply), not a dry run
  std::vector<FixOutcome> outcomes;
  // The report's checks, or after applying the re-run's, that are still warn
  // or fail and that --fix does not (or could not) fix.
  std::vector<std::string> not_fixed;
  // The checks run again after applying a non-empty plan.
  std::optional<Report> after;
  // The exit status follows this: the report's worst, or the re-run's after
  // applying; kFail when a step failed.
  Severity worst = Severity::kOk;
  // The report's worst and summary line (what the checks said before --fix).
  Severity worst_before = Severity::kOk;
  std::string summary;
};

// Plans the report's fixes; with options.apply performs them and collects the
// facts again to re-run options.checks. REQUIRES: options.tools when applying.
FixRun RunFix(const Report& report, const FixOptions& options);

// The text --fix prints (and nothing else; the findings are `anxin doctor`'s
// without --fix): the fix block, then, for a dry run, the report's summary
// line, the checks without a safe fix, and for --apply the worst status after
// the fixes.
std::string RenderFixRun(const FixRun& run);

// Adds "fixes" (check, command, state, detail), "applied" and, after
// applying, "worst_after_fix" to a report's JSON object.
void AddFixRunJson(const FixRun& run, nlohmann::json& report_json);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_FIX_H_
