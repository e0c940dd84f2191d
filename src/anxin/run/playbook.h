// Recovery playbooks of `anxin run`: ordered steps, each with a timeout and
// retries, chosen by the fault's class. Read from YAML (a `--playbook FILE`
// or the `run:` section of the configuration), validated with positions:
//
//   [yaml]
//   # playbooks.yaml
//   playbooks:
//     hccl:
//       - {step: stop_ranks, grace: 5s}
//       - {step: clear_device_memory}
//       - {step: reset_device, retries: 2, retry_delay: 1s}
//       - {step: exec, argv: [/usr/local/sbin/restart-container, "{device}"], timeout: 30s}
//       - {step: wait_links_up, timeout: 60s}
//       - {step: select_checkpoint}
//       - {step: relaunch}
//       - {step: verify_progress, timeout: 5m}
//   faults:
//     collective_timeout: hccl
//     network: hccl
//
// Read it:
//
//   PlaybookDefaults d;                          // from the flags
//   ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile("playbooks.yaml"));
//   PlaybookSet set = DefaultPlaybooks(d);
//   ANXIN_TRY(MergePlaybooks(root, d, {}, set));  // "playbooks.yaml:7:9: ..." on mistakes
//   const Playbook& p = set.For("collective_timeout");
//
// The shipped default (DefaultPlaybooks) is the sequence the supervisor has
// always run: stop_ranks, clear_device_memory, reset_device (for the classes
// in ResetFaultClasses), wait_links_up, select_checkpoint, relaunch,
// verify_progress.
//
// Thread safety: plain values and functions.
#ifndef ANXIN_RUN_PLAYBOOK_H_
#define ANXIN_RUN_PLAYBOOK_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"

namespace anxin::run {

enum class StepKind {
  kStopRanks,
  kClearDeviceMemory,
  kResetDevice,
  kWaitLinksUp,
  kSelectCheckpoint,
  kRelaunch,
  kVerifyProgress,
  kExec,
  kNotify,
};

// "stop_ranks", "clear_device_memory", ...; the name journaled for the step.
std::string_view StepKindName(StepKind kind);

struct PlaybookStep {
  StepKind kind = StepKind::kStopRanks;
  // stop_ranks: the grace between SIGTERM and SIGKILL. Backend steps: no try
  // starts after it. wait_links_up, verify_progress: the deadline. exec: the
  // command's limit (then TERM, 1 s, KILL). notify: the HTTP request's limit.
  double timeout_seconds = 0;
  int retries = 0;  // tries after the first failed one
  double retry_delay_seconds = 1;
  // On failure: true stops the recovery (the job ends with status 1), false
  // goes on with the next step. reset_device escalates instead.
  bool abort_on_failure = true;
  // Runs only for these fault classes (journaled as skipped otherwise); empty = all.
  std::vector<std::string> only_for;
  std::vector<std::string>
      argv;           // exec: templated with {checkpoint} {step} {attempt} {device} {fault}
  std::string url;    // notify: http://host:port/path
  std::string where;  // "file:line:col" of the step, for messages
};

struct Playbook {
  std::string name;
  std::vector<PlaybookStep> steps;
  // Whether the playbook relaunches the job; one that does not ends it.
  bool Relaunches() const;
};

// The built-in values the flags set (--stop-grace, --reset-retries, ...).
struct PlaybookDefaults {
  double stop_grace_seconds = 5;
  int reset_tries = 3;
  double reset_retry_delay_seconds = 1;
  double link_timeout_seconds = 60;
  double verify_timeout_seconds = 300;
  double exec_timeout_seconds = 60;
  double notify_timeout_seconds = 5;
};

struct PlaybookSet {
  std::map<std::string, Playbook> playbooks;    // by name
  std::map<std::string, std::string> by_fault;  // fault class -> playbook name
  // The playbook for a fault class: its mapping, else "default".
  const Playbook& For(const std::string& fault_class) const;
  // The playbook run when escalation stops the job (mapped as "escalation"),
  // nullptr when none is.
  const Playbook* Escalation() const;
};

// Fault classes the shipped detectors and signatures report.
const std::vector<std::string>& BuiltinFaultClasses();
// Classes the default playbook resets devices after: hangs, collective,
// network, peer and device faults; not a plain exit or an out-of-memory.
const std::vector<std::string>& ResetFaultClasses();

// The shipped playbook ("default", mapped from every class).
PlaybookSet DefaultPlaybooks(const PlaybookDefaults& defaults);

// Reads `playbooks:` and `faults:` from node (a playbook file's root or the
// run: section; other keys are the caller's to check) into set: playbooks
// with the same name replace the shipped ones, mappings are added.
// extra_classes: fault classes site signatures add. Mistakes ->
// kInvalidArgument "file:line:col: playbooks.x[2]: ..." (unknown step, key,
// fault class or playbook, bad duration, wrong type, a step in the wrong place).
Status MergePlaybooks(const ConfigNode& node, const PlaybookDefaults& defaults,
                      const std::vector<std::string>& extra_classes, PlaybookSet& set);

}  // namespace anxin::run

#endif  // ANXIN_RUN_PLAYBOOK_H_
