// `anxin run [options] -- CMD [ARGS]`: launch a single-node training job,
// watch it, and recover it from faults. Docs: docs/recovery.md.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/exit_codes.h"
#include "anxin/coord/etcd_coordinator.h"
#include "anxin/device/registry.h"
#include "anxin/host/topology.h"
#include "anxin/run/signatures.h"
#include "anxin/run/supervisor.h"

namespace anxin::cli {
namespace {

struct Options {
  std::vector<std::string> command;
  int nproc_per_node = 1;
  std::string nnodes = "1";
  int max_restarts = -1;  // -1: run.max_restarts, else 3
  int storm_limit = -1;
  int master_port = 0;
  std::string master_addr = "127.0.0.1";
  std::string backend;
  std::string scenario;
  std::string log_dir;
  std::string state_dir;
  std::string checkpoint_dir;
  std::string numa_bind = "auto";
  std::vector<std::string> env;
  std::string stop_grace;
  std::string hang_timeout;
  std::string link_timeout;
  std::string verify_timeout;
  int reset_retries = -1;
  std::string sdk_socket;
  std::string playbook;
  int min_nproc = -1;
  bool no_prefix = false;
  // Multi-node (coord/etcd_coordinator.h).
  std::string rdzv_endpoint;
  std::string rdzv_id;
  int node_rank = -1;
  std::string rdzv_timeout;
  bool master_addr_given = false;
};

static_assert(run::kExitRestartStorm == kExitRestartStorm);
static_assert(run::kExitEscalated == kExitEscalated);

run::Supervisor* g_supervisor = nullptr;

void OnSignal(int sig) {
  if (g_supervisor != nullptr) g_supervisor->RequestStop(sig);
}

// A duration flag, else the run: key, else the default.
Result<double> Duration(const std::string& flag_value, const char* flag,
                        const std::optional<ConfigNode>& section, const char* key, double def) {
  if (!flag_value.empty()) {
    auto v = ParseSeconds(flag_value);
    if (!v || *v < 0) {
      return InvalidArgument(std::string(flag) + ": expected a duration like 5s or 500ms, got '" +
                             flag_value + "'");
    }
    return *v;
  }
  if (section) return section->GetSeconds(key, def);
  return def;
}

Result<int> Count(int flag_value, const std::optional<ConfigNode>& section, const char* key,
                  int def) {
  if (flag_value >= 0) return flag_value;
  if (section) return section->GetInRange<int>(key, 0, 1000000, def);
  return def;
}

int Run(const Options& o, const GlobalOptions& g) {
  if (o.command.empty()) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "no command to run: give it after '--', e.g. anxin run "
                             "--nproc-per-node 2 -- python3 train.py"));
  }
  auto nnodes = coord::ParseNnodes(o.nnodes);
  if (!nnodes) return ReportError(nnodes.error());
  const bool multi_node = nnodes->second > 1 || !o.rdzv_endpoint.empty();
  if (multi_node && o.rdzv_endpoint.empty()) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--nnodes " + o.nnodes +
                                 ": a job over several nodes needs --rdzv-endpoint host:port "
                                 "(etcd) and --rdzv-id JOB"));
  }
  if (o.numa_bind != "auto" && o.numa_bind != "off") {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--numa-bind: expected auto or off, got '" + o.numa_bind + "'"));
  }
  std::optional<ConfigNode> section = FindSection(g.config, "run");
  if (section) {
    Status keys = section->CheckKeys({"detectors", "state_dir", "max_restarts", "storm_limit",
                                      "stop_grace", "reset_retries", "link_timeout",
                                      "verify_timeout", "playbooks", "faults", "escalation"});
    if (!keys) return ReportError(keys.error());
  }
  run::SupervisorOptions so;
  so.command = o.command;
  so.env = o.env;
  for (const std::string& e : so.env) {
    if (e.find('=') == std::string::npos || e.front() == '=') {
      return ReportError(
          Error(ErrorCode::kInvalidArgument, "--env: expected NAME=VALUE, got '" + e + "'"));
    }
  }
  so.launch.nproc_per_node = o.nproc_per_node;
  so.launch.master_addr = o.master_addr;
  so.launch.master_port = o.master_port;
  so.pick_port = o.master_port == 0;
  so.launch.numa_bind = o.numa_bind == "auto";
  so.log_dir = o.log_dir;
  so.checkpoint_dir = o.checkpoint_dir;
  so.run_section = section;
  so.prefix_output = !o.no_prefix;

  auto fail = [](const Error& e) { return ReportError(e); };
  auto restarts = Count(o.max_restarts, section, "max_restarts", 3);
  if (!restarts) return fail(restarts.error());
  so.max_restarts = *restarts;
  auto storm = Count(o.storm_limit, section, "storm_limit", 3);
  if (!storm) return fail(storm.error());
  so.storm_limit = std::max(1, *storm);
  auto resets = Count(o.reset_retries, section, "reset_retries", 3);
  if (!resets) return fail(resets.error());
  so.reset_retries = std::max(1, *resets);
  auto grace = Duration(o.stop_grace, "--stop-grace", section, "stop_grace", 5);
  if (!grace) return fail(grace.error());
  so.stop_grace_seconds = *grace;
  auto link = Duration(o.link_timeout, "--link-timeout", section, "link_timeout", 60);
  if (!link) return fail(link.error());
  so.link_timeout_seconds = *link;
  auto verify = Duration(o.verify_timeout, "--verify-timeout", section, "verify_timeout", 300);
  if (!verify) return fail(verify.error());
  so.verify_timeout_seconds = *verify;
  if (!o.hang_timeout.empty()) {
    auto h = Duration(o.hang_timeout, "--hang-timeout", std::nullopt, "", 0);
    if (!h || *h <= 0) {
      return fail(h ? Error(ErrorCode::kInvalidArgument, "--hang-timeout: must be above 0")
                    : h.error());
    }
    so.hang_timeout_seconds = *h;
  }
  // Escalation: run.escalation.{faults, window, min_nproc}, --min-nproc.
  std::optional<ConfigNode> esc;
  if (section && section->Has("escalation")) {
    auto e = section->Child("escalation");
    if (!e) return fail(e.error());
    Status k = e->CheckKeys({"faults", "window", "min_nproc"});
    if (!k) return fail(k.error());
    esc = *e;
  }
  auto esc_faults = Count(-1, esc, "faults", 3);
  if (!esc_faults) return fail(esc_faults.error());
  so.escalate_faults = *esc_faults;
  auto window = Duration("", "", esc, "window", 3600);
  if (!window) return fail(window.error());
  so.escalate_window_seconds = *window;
  auto min_nproc = Count(o.min_nproc, esc, "min_nproc", 0);
  if (!min_nproc) return fail(min_nproc.error());
  if (*min_nproc > o.nproc_per_node) {
    return fail(Error(ErrorCode::kInvalidArgument, "--min-nproc " + std::to_string(*min_nproc) +
                                                       " is above --nproc-per-node " +
                                                       std::to_string(o.nproc_per_node)));
  }
  so.min_nproc = *min_nproc;

  // Playbooks: the shipped default, then the run: section's, then --playbook.
  run::PlaybookDefaults pd;
  pd.stop_grace_seconds = so.stop_grace_seconds;
  pd.reset_tries = so.reset_retries;
  pd.link_timeout_seconds = so.link_timeout_seconds;
  pd.verify_timeout_seconds = so.verify_timeout_seconds;
  run::PlaybookSet books = run::DefaultPlaybooks(pd);
  std::vector<std::string> site_classes;
  if (section) {
    if (auto sigs = section->Find("detectors")) {
      if (auto lp = sigs->Find("log_patterns"); lp && lp->Has("signatures")) {
        auto list = lp->Child("signatures");
        if (!list) return fail(list.error());
        auto parsed = run::ParseSignatures(*list);
        if (!parsed) return fail(parsed.error());
        for (const run::LogSignature& sig : *parsed) site_classes.push_back(sig.fault_class);
      }
    }
    Status m = run::MergePlaybooks(*section, pd, site_classes, books);
    if (!m) return fail(m.error());
  }
  if (!o.playbook.empty()) {
    auto root = ConfigNode::LoadFile(o.playbook);
    if (!root) return fail(root.error().With("--playbook"));
    Status k = root->CheckKeys({"playbooks", "faults"});
    if (!k) return fail(k.error());
    Status m = run::MergePlaybooks(*root, pd, site_classes, books);
    if (!m) return fail(m.error());
  }
  so.playbooks = std::move(books);
  for (const char* v : {"ANXIN_JOB_ID", "SLURM_JOB_ID"}) {
    if (const char* id = std::getenv(v); id != nullptr && so.job_id.empty()) so.job_id = id;
  }

  so.state_dir = o.state_dir;
  if (so.state_dir.empty() && section) {
    auto s = section->Get<std::string>("state_dir", "");
    if (!s) return fail(s.error());
    so.state_dir = *s;
  }
  if (so.state_dir.empty()) so.state_dir = ".anxin/run";
  std::error_code ec;
  std::filesystem::create_directories(so.state_dir, ec);
  if (ec) {
    return fail(
        Error(ErrorCode::kUnavailable, "--state-dir " + so.state_dir + ": " + ec.message()));
  }
  if (!so.log_dir.empty()) {
    std::filesystem::create_directories(so.log_dir, ec);
    if (ec) {
      return fail(Error(ErrorCode::kUnavailable, "--log-dir " + so.log_dir + ": " + ec.message()));
    }
  }
  so.sdk_socket = o.sdk_socket;
  if (so.sdk_socket.empty()) {
    so.sdk_socket = so.state_dir + "/sdk-" + std::to_string(getpid()) + ".sock";
    if (so.sdk_socket.size() >= 100) so.sdk_socket.clear();  // too long for a socket address
  }
  if (const char* agent = std::getenv("ANXIN_AGENT_SOCKET")) so.sdk_forward = agent;

  std::string backend_name = !o.backend.empty() ? o.backend : g.config.device.backend;
  if (backend_name.empty()) backend_name = std::string(device::kDefaultBackend);
  const std::string& scenario = !o.scenario.empty() ? o.scenario : g.config.device.scenario;
  auto backend = device::CreateBackend(backend_name, {.scenario = scenario});
  if (!backend) return fail(backend.error());
  auto devices = (*backend)->Enumerate();
  if (!devices) return fail(devices.error());
  std::vector<host::NumaNode> nodes;
  if (so.launch.numa_bind) {
    auto n = host::ReadNumaNodes(host::HostRoot{});
    if (n) nodes = std::move(*n);
  }
  std::unique_ptr<run::Coordinator> coordinator;
  if (multi_node) {
    coord::ClusterOptions co;
    co.endpoints = o.rdzv_endpoint;
    co.job = o.rdzv_id.empty() ? so.job_id : o.rdzv_id;
    co.min_nodes = nnodes->first;
    co.max_nodes = nnodes->second;
    co.node_rank = o.node_rank;
    co.address = o.master_addr_given ? o.master_addr : "";
    co.max_restarts = so.max_restarts;
    co.storm_limit = so.storm_limit;
    if (!o.rdzv_timeout.empty()) {
      auto t = Duration(o.rdzv_timeout, "--rdzv-timeout", std::nullopt, "", 30);
      if (!t || *t <= 0) {
        return fail(t ? Error(ErrorCode::kInvalidArgument, "--rdzv-timeout: must be above 0")
                      : t.error());
      }
      co.barrier_timeout_seconds = *t;
    }
    auto c = coord::EtcdCoordinator::Create(std::move(co));
    if (!c) return fail(c.error());
    coordinator = std::move(*c);
  }
  run::Supervisor supervisor(std::move(so), backend->get(), std::move(*devices), std::move(nodes),
                             std::move(coordinator));
  g_supervisor = &supervisor;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto rc = supervisor.Run();
  g_supervisor = nullptr;
  if (!rc) return fail(rc.error());
  return *rc;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("--nproc-per-node", o->nproc_per_node, "ranks on this node, one per device")
      ->capture_default_str();
  app.add_option("--nnodes", o->nnodes,
                 "nodes in the job: N, or MIN:MAX for an elastic job (needs --rdzv-endpoint)")
      ->capture_default_str();
  app.add_option("--rdzv-endpoint", o->rdzv_endpoint,
                 "etcd of a multi-node job: host:port[,host:port...]");
  app.add_option("--rdzv-id", o->rdzv_id,
                 "the job's id, the same on every node (default: ANXIN_JOB_ID, SLURM_JOB_ID)");
  app.add_option("--node-rank", o->node_rank,
                 "this node's place in the job (default: ordered by host name)");
  app.add_option("--rdzv-timeout", o->rdzv_timeout,
                 "how long a recovery waits for the other nodes at its barrier (default 30s)");
  app.add_option("--max-restarts", o->max_restarts,
                 "relaunches allowed in the whole run (default: run.max_restarts, else 3)");
  app.add_option("--storm-limit", o->storm_limit,
                 "relaunches in a row without progress before giving up with status 4 "
                 "(default: run.storm_limit, else 3)");
  app.add_option("--master-port", o->master_port,
                 "MASTER_PORT for the ranks (default: a free port at each launch)");
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
  app.add_option("--reset-retries", o->reset_retries, "tries of each device reset (default 3)");
  app.add_option("--sdk-socket", o->sdk_socket,
                 "the socket the ranks' SDK reports to (default: STATE_DIR/sdk-PID.sock)");
  app.add_option("--playbook", o->playbook,
                 "YAML file of recovery playbooks and the fault classes they serve "
                 "(docs/recovery.md), over the run: section's");
  app.add_option("--min-nproc", o->min_nproc,
                 "fewest ranks the job may shrink to when a failing device is isolated "
                 "(default: run.escalation.min_nproc, else no shrinking)");
  app.add_flag("--no-prefix", o->no_prefix, "do not copy rank output to this terminal");
  app.add_option("command", o->command, "the rank command and its arguments, after --")
      ->expected(-1);
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(run, "run a training job and recover it from faults", Setup);

}  // namespace
}  // namespace anxin::cli
