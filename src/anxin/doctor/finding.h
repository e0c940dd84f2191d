// What a doctor check reports: a Finding with a severity, the evidence it saw,
// why it matters and how to fix it, plus the safe fix actions (if any) that
// `anxin doctor --fix` can apply.
//
//   Finding f;
//   f.check_id = "cpu.governor";
//   f.severity = Severity::kWarn;
//   f.summary = "12 CPUs not in performance";
//   f.evidence.push_back("cpu3: powersave");
//   f.actions.push_back(FixAction::Write("/proc/irq/145/smp_affinity_list", "12"));
#ifndef ANXIN_DOCTOR_FINDING_H_
#define ANXIN_DOCTOR_FINDING_H_

#include <string>
#include <string_view>
#include <vector>

namespace anxin::doctor {

// Ordered so that the worst of several is the largest.
enum class Severity { kOk = 0, kSkip = 1, kWarn = 2, kFail = 3 };
std::string_view SeverityName(Severity s);  // "ok", "skip", "warn", "fail"
bool ParseSeverity(std::string_view name, Severity& out);

// One step of a fix: either write a file (under the root prefix) or run a
// command (argv, never a shell string). Commands run only on the live host.
struct FixAction {
  std::string description;
  std::string write_path;  // host path, e.g. /proc/irq/145/smp_affinity_list
  std::string write_content;
  std::vector<std::string> argv;

  static FixAction Write(std::string path, std::string content, std::string description = "");
  static FixAction Command(std::vector<std::string> argv, std::string description = "");
  bool is_write() const { return !write_path.empty(); }
  // The exact shell line a person would type: "echo 12 > /proc/irq/145/smp_affinity_list".
  std::string Render() const;
};

struct Finding {
  std::string check_id;
  Severity severity = Severity::kOk;
  std::string summary;                // one line
  std::vector<std::string> evidence;  // what was seen, one fact per line
  std::string why;                    // why it matters (from the check)
  std::string fix;                    // what to do, in words or commands
  std::vector<FixAction> actions;     // safe host fixes `--fix` can apply
};

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_FINDING_H_
