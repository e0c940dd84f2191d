// `anxin run [options] -- CMD [ARGS]`: launch a training job (on one node or many),
// watch it, and recover it from faults. Docs: docs/recovery.md.
#include <memory>

#include "anxin/cli/command.h"
#include "anxin/cli/exit_codes.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/coord/etcd_coordinator.h"
#include "anxin/run/options.h"

namespace anxin::cli::run_cmd {
namespace {

static_assert(run::kExitRestartStorm == kExitRestartStorm);
static_assert(run::kExitEscalated == kExitEscalated);

int Run(const run::RunFlags& flags, const GlobalOptions& g) {
  auto rc = run::RunJob(flags, g.config, coord::CreateEtcdCoordinator);
  if (!rc) return ReportError(rc.error());
  return *rc;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<run::RunFlags>();
  app.add_option("--nproc-per-node", o->nproc_per_node, "ranks on this node, one per device")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--nnodes", o->nnodes,
                 "nodes in the job: N, or MIN:MAX for an elastic job (needs --rdzv-endpoint)")
      ->capture_default_str();
  app.add_option("--rdzv-endpoint", o->rdzv_endpoint,
                 "etcd of a multi-node job: host:port[,host:port...]");
  app.add_option("--rdzv-id", o->rdzv_id,
                 "the job's id, the same on every node (default: ANXIN_JOB_ID, SLURM_JOB_ID)");
  app.add_option("--node-rank", o->node_rank,
                 "this node's place in the job (default: ordered by host name)")
      ->check(AtLeast(0));
  app.add_option("--rdzv-timeout", o->rdzv_timeout,
                 "how long a recovery waits for the other nodes at its barrier (default 30s)");
  app.add_option("--rdzv-conf", o->rdzv_conf,
                 "etcd's TLS and user as KEY=VALUE,...: cacert, cert, key, server_name, user, "
                 "password (the --etcd-* flags win)");
  app.add_option("--etcd-cacert", o->etcd_cacert,
                 "CA file that signed the etcd members' certificates (https)");
  app.add_option("--etcd-cert", o->etcd_cert,
                 "client certificate for an etcd started with --client-cert-auth");
  app.add_option("--etcd-key", o->etcd_key, "the client certificate's key");
  app.add_option("--etcd-server-name", o->etcd_server_name,
                 "the name in the etcd members' certificates, when not the endpoint's host");
  app.add_option("--etcd-user", o->etcd_user,
                 "etcd user, NAME or NAME:PASSWORD (else the password from ANXIN_ETCD_PASSWORD)");
  app.add_option("--max-restarts", o->max_restarts,
                 "relaunches allowed in the whole run (default: run.max_restarts, else 3)")
      ->check(AtLeast(0));
  app.add_option("--storm-limit", o->storm_limit,
                 "relaunches in a row without progress before giving up with status 4 "
                 "(default: run.storm_limit, else 3)")
      ->check(AtLeast(1));
  app.add_option("--master-port", o->master_port,
                 "MASTER_PORT for the ranks (default: a free port at each launch)")
      ->check(PortNumber());
  app.add_option("--master-addr", o->master_addr,
                 "MASTER_ADDR for the ranks; in a multi-node job, this node's address as the "
                 "others reach it (default: the host name)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->master_addr_given = true; });
  app.add_option("--backend", o->backend, "device backend (default: config device.backend)");
  app.add_option("--scenario", o->scenario, "sim: scenario file or built-in name");
  app.add_option("--log-dir", o->log_dir, "write each rank's output to DIR/rank-N.log");
  app.add_option("--state-dir", o->state_dir,
                 "incident journal directory (default: run.state_dir, else .anxin/run)");
  app.add_option("--checkpoint-dir", o->checkpoint_dir,
                 "the job's checkpoint directory: resume from its newest valid checkpoint");
  app.add_option("--numa-bind", o->numa_bind,
                 "auto: bind each rank's CPUs and memory to its device's NUMA node; off")
      ->capture_default_str();
  app.add_option("--env", o->env,
                 "NAME=VALUE for every rank (templated like the command); repeat for more")
      ->expected(1)
      ->allow_extra_args(false)  // one value each time; a following "--" starts the command
      ->take_all();
  app.add_option("--stop-grace", o->stop_grace, "time between SIGTERM and SIGKILL (default 5s)");
  app.add_option("--hang-timeout", o->hang_timeout,
                 "no progress for this long is a hang (default: run.detectors.hang.timeout, "
                 "else 60s)");
  app.add_option("--link-timeout", o->link_timeout,
                 "how long to wait for device links after a reset (default 60s)");
  app.add_option("--verify-timeout", o->verify_timeout,
                 "how long a relaunch may take to show progress (default 300s)");
  app.add_option("--reset-retries", o->reset_retries, "tries of each device reset (default 3)")
      ->check(AtLeast(1));
  app.add_option("--sdk-socket", o->sdk_socket,
                 "the socket the ranks' SDK reports to (default: STATE_DIR/sdk-PID.sock)");
  app.add_option("--playbook", o->playbook,
                 "YAML file of recovery playbooks and the fault classes they serve "
                 "(docs/recovery.md), over the run: section's");
  app.add_option("--min-nproc", o->min_nproc,
                 "fewest ranks the job may shrink to when a failing device is isolated "
                 "(default: run.escalation.min_nproc, else no shrinking)")
      ->check(AtLeast(1));
  app.add_flag("--no-prefix", o->no_prefix, "do not copy rank output to this terminal");
  app.add_flag("--no-in-process", o->no_in_process,
               "relaunch every rank after a fault, even ranks under anxin_sdk.run() that could "
               "rejoin in their processes");
  app.add_option("--abort-timeout", o->abort_timeout,
                 "how long a surviving rank has to abort its process group before it is killed "
                 "and relaunched (default 5s)");
  app.add_option("--warm-spares", o->warm_spares,
                 "spare processes of the command kept waiting in anxin_sdk.run() to replace a "
                 "rank that dies (default 0)")
      ->check(AtLeast(0));
  app.add_option("command", o->command, "the rank command and its arguments, after --")
      ->expected(-1);
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(run, "run a training job and recover it from faults", Setup);

}  // namespace
}  // namespace anxin::cli::run_cmd
