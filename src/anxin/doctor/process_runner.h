// Doctor's view of base/subprocess.h's RunCommand: a program (argv, never a
// shell string) with a timeout, its output captured, a timeout turned into an
// error. Used for mlnx_qos, hccn_tool, npu-smi, systemctl and ssh; the
// function-typed seam (ProcessRunner in multi_host.h) lets tests fake it.
//
//   ANXIN_ASSIGN_OR_RETURN(ProcessOutput out, RunProcess({"mlnx_qos", "-i", "eth2"}, 5.0));
//   if (out.exit_code != 0) {
//     return Unavailable("mlnx_qos exited with " + std::to_string(out.exit_code));
//   }
//
// The child runs in its own process group; on timeout the whole group is
// stopped (ssh's children too) and the result is kDeadlineExceeded. A program
// not on PATH is kNotFound. Thread safety: may be called from several threads.
#ifndef ANXIN_DOCTOR_PROCESS_RUNNER_H_
#define ANXIN_DOCTOR_PROCESS_RUNNER_H_

#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::doctor {

struct ProcessOutput {
  int exit_code = 0;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

Result<ProcessOutput> RunProcess(const std::vector<std::string>& argv, double timeout_s);

// The first executable named `name` on PATH, or in one of extra_dirs; "" if none.
std::string FindExecutable(const std::string& name,
                           const std::vector<std::string>& extra_dirs = {});

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_PROCESS_RUNNER_H_
