// Applying doctor's safe host fixes: stopping irqbalance and writing
// /proc/irq/N/smp_affinity_list. Nothing here ever talks to a switch.
//
//   #include "anxin/doctor/process_runner.h"
//
//   Report report;                                        // from RunChecks (report.h)
//   host::HostRoot root;                                  // the live "/"
//   CommandRunner runner = [](const std::vector<std::string>& argv,
//                             double timeout_s) -> Result<std::string> {
//     ANXIN_ASSIGN_OR_RETURN(ProcessOutput out, RunProcess(argv, timeout_s));
//     return out.out;
//   };
//   auto actions = CollectFixes(report);                  // in check order
//   for (const FixOutcome& o : ApplyFixes(actions, root, /*apply=*/false, runner))
//     std::cout << o.action.Render() << "\n";             // dry run: the exact commands
//
// File writes go under the root prefix (so a test applies them to a copy of
// a fixture tree); commands (systemctl) run only on the live root "/".
#ifndef ANXIN_DOCTOR_FIX_H_
#define ANXIN_DOCTOR_FIX_H_

#include <functional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/finding.h"
#include "anxin/doctor/report.h"
#include "anxin/host/root_fs.h"

namespace anxin::doctor {

// Runs argv with a timeout and returns its standard output.
using CommandRunner =
    std::function<Result<std::string>(const std::vector<std::string>& argv, double timeout_s)>;

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
std::vector<PlannedFix> CollectFixes(const Report& report);

// apply=false: every outcome is kPlanned (a dry run). apply=true: writes and
// runs each action in order, continuing after a failure so one bad IRQ does
// not leave the rest unpinned.
std::vector<FixOutcome> ApplyFixes(const std::vector<PlannedFix>& fixes, const host::HostRoot& root,
                                   bool apply, const CommandRunner& run);

std::string RenderFixes(const std::vector<FixOutcome>& outcomes, bool apply);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_FIX_H_
