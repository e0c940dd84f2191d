// `anxin run`'s options: its flags, the `run:` section of the configuration
// and the recovery playbooks merged into SupervisorOptions, and the whole
// command (backend, state directories, signals, the supervisor) behind one
// call. Precedence: a flag, else the run: key, else the default
// (docs/recovery.md, docs/configuration.md).
//
//   RunFlags flags;
//   flags.command = {"python3", "train.py"};
//   flags.nproc_per_node = 2;
//   ANXIN_ASSIGN_OR_RETURN(SupervisorOptions o, LoadSupervisorOptions(flags, GlobalConfig{}));
//   // o.max_restarts == 3, o.state_dir == ".anxin/run", o.playbooks: the shipped default
//   ANXIN_ASSIGN_OR_RETURN(int status, RunJob(flags, GlobalConfig{}));  // runs the job
//   if (status != 0) spdlog::warn("the job ended with status {}", status);
//
// Thread safety: both functions may be called from any thread; RunJob takes
// SIGINT/SIGTERM for the duration of the job (base/stop_token.h).
#ifndef ANXIN_RUN_OPTIONS_H_
#define ANXIN_RUN_OPTIONS_H_

#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/base/global_config.h"
#include "anxin/run/supervisor.h"

namespace anxin::run {

// The flags of `anxin run`, as given: "" and -1 mean "not given".
struct RunFlags {
  std::vector<std::string> command;
  int nproc_per_node = 1;
  int nnodes = 1;
  int max_restarts = -1;
  int storm_limit = -1;
  int master_port = 0;  // 0: a free port at each launch
  std::string master_addr = "127.0.0.1";
  std::string backend;
  std::string scenario;
  std::string log_dir;
  std::string state_dir;
  std::string checkpoint_dir;
  std::string numa_bind = "auto";  // auto or off
  std::vector<std::string> env;    // NAME=VALUE
  std::string stop_grace;          // durations: "5s", "500ms"
  std::string hang_timeout;
  std::string link_timeout;
  std::string verify_timeout;
  int reset_retries = -1;
  std::string sdk_socket;
  std::string playbook;  // a YAML file of playbooks over the run: section's
  int min_nproc = -1;
  bool no_prefix = false;
};

// Checks the flags and the run: section and merges them (with the playbook
// file and the environment's ANXIN_JOB_ID / SLURM_JOB_ID and
// ANXIN_AGENT_SOCKET) into the supervisor's options. Creates nothing.
// Errors: kInvalidArgument naming the flag or the file:line:col of the key.
Result<SupervisorOptions> LoadSupervisorOptions(const RunFlags& flags, const GlobalConfig& config);

// The whole `anxin run`: LoadSupervisorOptions, the state and log
// directories, the device backend (--backend/--scenario over device:), then
// the supervisor until the job ends or a signal stops it. Returns the exit
// status of Supervisor::Run.
Result<int> RunJob(const RunFlags& flags, const GlobalConfig& config);

}  // namespace anxin::run

#endif  // ANXIN_RUN_OPTIONS_H_
