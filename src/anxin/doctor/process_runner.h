// Doctor's use of base/subprocess.h: every program doctor starts (mlnx_qos,
// hccn_tool, npu-smi, systemctl, ssh) runs through base's RunCommand with an
// argument vector (never a shell string) and a timeout. Nothing here forks,
// reads pipes or keeps time itself; this file only fixes doctor's policy on
// top: a timeout is an error, a missing program says it is not installed, and
// a tool's non-zero exit is an error carrying its message.
//
//   ANXIN_ASSIGN_OR_RETURN(CommandOutput out, RunProcess({"ssh", "--", "h", "anxin"}, 30));
//   bool answered = out.exit_code == 0 || out.exit_code == 1;  // not ssh's 255
//   ANXIN_ASSIGN_OR_RETURN(std::string text,
//                          RunTool(RunProcess, {"mlnx_qos", "-i", "eth2"}, 5));
//
// The ProcessRunner seam lets tests fake the programs (multi_host_test,
// checks_test). The child leads its own process group, so a timeout stops
// what it started too (ssh's children). Thread safety: may be called from
// several threads.
#ifndef ANXIN_DOCTOR_PROCESS_RUNNER_H_
#define ANXIN_DOCTOR_PROCESS_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/base/subprocess.h"

namespace anxin::doctor {

// Runs argv for at most timeout_s seconds and returns what it printed and how
// it ended.
using ProcessRunner =
    std::function<Result<CommandOutput>(const std::vector<std::string>& argv, double timeout_s)>;

// RunCommand(argv) with a timeout of timeout_s (then SIGTERM to the group, 1
// s, SIGKILL). A timeout is kDeadlineExceeded; a program that is not on PATH
// is kNotFound "NAME is not installed (...)"; a non-zero exit is not an error.
Result<CommandOutput> RunProcess(const std::vector<std::string>& argv, double timeout_s);

// A ProcessRunner like RunProcess that also finds programs in extra_dirs,
// searched after PATH (vendor tools such as /usr/local/Ascend/driver/tools
// are often not on PATH); the child sees that PATH too.
ProcessRunner ProcessRunnerAlsoIn(std::vector<std::string> extra_dirs);

// run(argv, timeout_s)'s standard output when it exited 0. Otherwise
// kUnavailable "NAME exited 3: <its stderr, else stdout, up to 300 bytes>"
// (or "killed by SIGSEGV"); errors of run pass through unchanged.
Result<std::string> RunTool(const ProcessRunner& run, const std::vector<std::string>& argv,
                            double timeout_s);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_PROCESS_RUNNER_H_
