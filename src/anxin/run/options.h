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
// A job over several nodes (--nnodes, --rdzv-*) is translated here into a
// ClusterRequest; the coordinator that serves it is made by the factory given
// to RunJob (coord::CreateEtcdCoordinator), so that run/ does not depend on
// the store's client.
//
// Thread safety: both functions may be called from any thread; RunJob takes
// SIGINT/SIGTERM for the duration of the job (base/stop_token.h).
#ifndef ANXIN_RUN_OPTIONS_H_
#define ANXIN_RUN_OPTIONS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/base/global_config.h"
#include "anxin/run/supervisor.h"

namespace anxin::run {

// The flags of `anxin run`, as given: "" and -1 mean "not given".
struct RunFlags {
  std::vector<std::string> command;
  int nproc_per_node = 1;
  std::string nnodes = "1";  // N, or MIN:MAX for an elastic job
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
  // In-process restart and warm spares (docs/recovery.md).
  bool no_in_process = false;
  std::string abort_timeout;  // "" = 5s
  int warm_spares = 0;
  // Multi-node (docs/recovery.md, "Many nodes").
  std::string rdzv_endpoint;  // etcd: host:port[,host:port...]
  std::string rdzv_id;        // "": the job id (ANXIN_JOB_ID, SLURM_JOB_ID)
  int node_rank = -1;         // -1: ordered by host name
  std::string rdzv_timeout;   // a recovery's barrier
  bool master_addr_given = false;
  // etcd's TLS and authentication: --rdzv-conf key=value,... and the named
  // flags, which win over it.
  std::string rdzv_conf;
  std::string etcd_cacert;
  std::string etcd_cert;
  std::string etcd_key;
  std::string etcd_server_name;
  std::string etcd_user;  // NAME or NAME:PASSWORD
};

// "4" -> {4, 4}; "2:8" -> {2, 8}. Anything else, or min > max, or below 1 ->
// kInvalidArgument naming --nnodes.
Result<std::pair<int, int>> ParseNnodes(std::string_view text);

// A multi-node job's rendezvous, from the flags and the loaded options.
struct ClusterRequest {
  std::string endpoints;  // --rdzv-endpoint
  std::string job;        // --rdzv-id, else the job id
  int min_nodes = 1;      // --nnodes
  int max_nodes = 1;
  int node_rank = -1;                  // --node-rank
  std::string address;                 // --master-addr when given, else "" (the host name)
  double barrier_timeout_seconds = 0;  // --rdzv-timeout; 0: the coordinator's default
  int max_restarts = 3;                // the restart policy each node applies
  int storm_limit = 3;
  // etcd's TLS and authentication; "" = none.
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string etcd_server_name;
  std::string etcd_user;
  std::string etcd_password;
};

// nullopt: a job on one node. etcd's TLS and user come from, in order: the
// --etcd-* flags, --rdzv-conf (cacert=, cert=, key=, server_name=, user=,
// password=), the run.etcd section (cacert, cert, key, server_name, user,
// password_file), the environment's ANXIN_ETCD_CACERT, _CERT, _KEY,
// _SERVER_NAME, _USER and _PASSWORD, then etcdctl's ETCDCTL_CACERT, _CERT,
// _KEY, _USER and _PASSWORD. A user given as NAME:PASSWORD carries its
// password. Errors: kInvalidArgument naming the flag or key.
Result<std::optional<ClusterRequest>> LoadClusterRequest(const RunFlags& flags,
                                                         const SupervisorOptions& options);

// Makes the coordinator of a multi-node job (coord::CreateEtcdCoordinator).
using CoordinatorFactory =
    std::function<Result<std::unique_ptr<Coordinator>>(const ClusterRequest&)>;

// Where the journal lives: the --state-dir flag, else the run: section's
// state_dir, else ".anxin/run"; origin names which of the three chose it
// ("--state-dir", "run.state_dir", "the default state directory").
struct StateDirChoice {
  std::string dir;
  std::string origin;
};
Result<StateDirChoice> ResolveStateDir(const std::string& flag, const GlobalConfig& config);

// Checks the flags and the run: section and merges them (with the playbook
// file and the environment's ANXIN_JOB_ID / SLURM_JOB_ID and
// ANXIN_AGENT_SOCKET) into the supervisor's options. Creates nothing.
// Errors: kInvalidArgument naming the flag or the file:line:col of the key.
Result<SupervisorOptions> LoadSupervisorOptions(const RunFlags& flags, const GlobalConfig& config);

// The whole `anxin run`: LoadSupervisorOptions, the state and log
// directories, the device backend (--backend/--scenario over device:), then
// the supervisor until the job ends or a signal stops it. Returns the exit
// status of Supervisor::Run. A multi-node job takes its coordinator from
// make_coordinator; without one it is kInvalidArgument.
Result<int> RunJob(const RunFlags& flags, const GlobalConfig& config,
                   const CoordinatorFactory& make_coordinator = nullptr);

}  // namespace anxin::run

#endif  // ANXIN_RUN_OPTIONS_H_
