// The processes of a lab, found again from its directory: DIR/processes.json
// names `anxin lab up` and every child it started (pid, start time, port),
// and every child's command line names DIR. `lab down` stops them all, also
// when `lab up` itself was killed with SIGKILL.
//
//   if (auto pid = RunningLab("/tmp/lab")) spdlog::info("running as {}", *pid);
//   DownSummary s;
//   ANXIN_TRY(StopLab("/tmp/lab", &s));   // s.left == 0: nothing is left
//
// A pid counts as the recorded process only while its start time (field 22
// of /proc/PID/stat) matches, so a pid reused by another program is never
// signalled.
//
// Thread safety: plain functions.
#ifndef ANXIN_LAB_PROCS_H_
#define ANXIN_LAB_PROCS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::lab {

// The start time of a process in clock ticks since boot; 0 when it is gone.
uint64_t ProcessStartTicks(pid_t pid);

// Processes other than this one whose command line holds "DIR/" (dir absolute).
std::vector<pid_t> ProcessesUnder(const std::string& dir);

// The pid of the `anxin lab up` that runs in dir, if one does.
std::optional<pid_t> RunningLab(const std::string& dir);

struct DownSummary {
  int stopped = 0;                // processes signalled
  int left = 0;                   // still there after the stop
  std::vector<int> ports_in_use;  // recorded ports something still listens on
};

// Stops `lab up` (SIGTERM: it stops its children itself), then every
// recorded child and every process that names dir, with SIGKILL to their
// process groups where they do not go within a few seconds; then checks the
// recorded ports. summary may be null.
Status StopLab(const std::string& dir, DownSummary* summary);

}  // namespace anxin::lab

#endif  // ANXIN_LAB_PROCS_H_
