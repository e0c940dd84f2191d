// How `anxin bench comm` reaches its ranks. The engines link MPI (and CUDA,
// NCCL) and so live in worker executables next to `anxin`
// (anxin-comm-worker, and anxin-comm-worker-nccl where CUDA and NCCL were
// found at build time); `anxin` itself links none of them. Two ways in:
//
// - The user starts `mpirun -np N anxin bench comm ...`: each rank's anxin
//   sees the launcher's environment (UnderMpiLauncher) and replaces itself
//   with the worker (ExecWorker), which then is that rank.
// - `anxin bench comm --np N ...`: anxin starts `mpirun -np N worker ...`
//   itself (BuildLaunch, RunLaunch) under a deadline, forwards rank 0's output
//   and turns a dead or stuck rank into one error line.
//
//   #include <cstdlib>
//   #include "anxin/comm/options.h"
//
//   Getenv getenv = [](const char* name) { return std::getenv(name); };
//   ANXIN_ASSIGN_OR_RETURN(std::string worker, FindWorker("mpi", getenv));
//   ANXIN_ASSIGN_OR_RETURN(std::string mpirun, FindMpirun(getenv));
//   std::string spec = ToJson(BenchOptions{}).dump();
//   LaunchRequest req{.mpirun = mpirun, .worker = worker, .ranks = 4, .spec = spec};
//   LaunchPlan plan = BuildLaunch(req);
//   auto print_line = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
//   ANXIN_ASSIGN_OR_RETURN(LaunchResult r, RunLaunch(plan, 600s, print_line, print_line));
//   int exit_status = r.status;   // the worker's exit status (0, 1 for a failed check)
//
// The worker, when launched this way, ends rank 0's output with one line
// "@@anxin-comm-status N" (kStatusMarker) that RunLaunch removes: mpirun's own
// exit status cannot tell "a check failed" from "a rank died", and a rank's
// non-zero exit makes mpirun print a banner.
//
// Thread safety: the functions may be called from any thread; RunLaunch calls
// on_stdout on the Subprocess's I/O thread, in order.
#ifndef ANXIN_COMM_LAUNCHER_H_
#define ANXIN_COMM_LAUNCHER_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::comm {

inline constexpr std::string_view kStatusMarker = "@@anxin-comm-status ";

using Getenv = std::function<const char*(const char*)>;

// True when this process is a rank started by mpirun/mpiexec (Open MPI,
// MPICH/Hydra, or a PMIx launcher such as srun).
bool UnderMpiLauncher(const Getenv& getenv);

// The worker for an engine: $ANXIN_COMM_WORKER (or $ANXIN_COMM_WORKER_NCCL
// for nccl), else next to this executable, else on PATH. Missing ->
// kUnavailable naming what to build.
[[nodiscard]] Result<std::string> FindWorker(std::string_view engine, const Getenv& getenv);
// $ANXIN_MPIRUN, else mpirun on PATH. Missing -> kUnavailable with the
// Debian package to install.
[[nodiscard]] Result<std::string> FindMpirun(const Getenv& getenv);

struct LaunchRequest {
  std::string mpirun{};
  std::string worker{};
  int ranks = 2;
  std::string hosts{};                     // "a:4,b:4" for mpirun -H; empty = this machine
  std::vector<std::string> mpirun_args{};  // passed to mpirun before the worker
  std::string spec{};                      // BenchOptions JSON for the worker's --spec
  // NAME=VALUE for every rank (algorithm choice, NCCL/HCCL settings); each is
  // set for mpirun and forwarded with -x to remote ranks.
  std::vector<std::string> env{};
  bool root = false;         // running as root: Open MPI refuses unless told
  int hardware_threads = 1;  // over this many local ranks needs --oversubscribe
};

struct LaunchPlan {
  std::vector<std::string> argv{};
  std::vector<std::string> env{};
};

LaunchPlan BuildLaunch(const LaunchRequest& request);

struct LaunchResult {
  int status = 0;  // the worker's exit status from its marker line
};

// Runs the plan to completion. Rank 0's stdout lines go to on_stdout (the
// marker line excepted); the worker's progress lines on stderr ("soak: ...",
// "telemetry: ...")
// go to on_progress as they come. A job that ends without the marker (a rank
// died, the watchdog fired, mpirun failed) -> kUnavailable with the one line
// that says why; past `timeout` -> kDeadlineExceeded, and the whole process
// group is stopped.
[[nodiscard]] Result<LaunchResult> RunLaunch(
    const LaunchPlan& plan, std::chrono::seconds timeout,
    const std::function<void(const std::string&)>& on_stdout,
    const std::function<void(const std::string&)>& on_progress);

// Picks the line that explains a failed job from its stderr: the worker's own
// "error: ..." line, else mpirun's sentence about the rank that died, else the
// last non-empty line.
std::string ExplainFailure(const std::vector<std::string>& stderr_lines);

// Replaces this process with `worker --spec SPEC` (environment kept, plus
// env). Returns only on failure.
[[nodiscard]] Status ExecWorker(const std::string& worker, const std::string& spec,
                                const std::vector<std::string>& env);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_LAUNCHER_H_
