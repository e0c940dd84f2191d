#include "anxin/run/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/stop_token.h"
#include "anxin/base/strings.h"
#include "anxin/device/registry.h"
#include "anxin/host/topology.h"
#include "anxin/run/signatures.h"

namespace anxin::run {
namespace {

using Section = std::optional<ConfigNode>;

// A duration flag, else the section's key, else the default.
Result<double> Duration(const std::string& flag_value, const char* flag, const Section& section,
                        const char* key, double def) {
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

// A count flag (>= 0 when given), else the section's key, else the default.
Result<int> Count(int flag_value, const Section& section, const char* key, int def) {
  if (flag_value >= 0) return flag_value;
  if (section) return section->GetInRange<int>(key, 0, 1000000, def);
  return def;
}

Status CheckFlags(const RunFlags& f) {
  if (f.command.empty()) {
    return InvalidArgument(
        "no command to run: give it after '--', e.g. anxin run --nproc-per-node 2 -- python3 "
        "train.py");
  }
  ANXIN_ASSIGN_OR_RETURN(const auto nnodes, ParseNnodes(f.nnodes));
  if (nnodes.second > 1 && f.rdzv_endpoint.empty()) {
    return InvalidArgument("--nnodes " + f.nnodes +
                           ": a job over several nodes needs --rdzv-endpoint host:port (etcd) "
                           "and --rdzv-id JOB");
  }
  if (f.numa_bind != "auto" && f.numa_bind != "off") {
    return InvalidArgument("--numa-bind: expected auto or off, got '" + f.numa_bind + "'");
  }
  return Ok();
}

Result<Section> RunSection(const GlobalConfig& config) {
  Section section = FindSection(config, "run");
  if (section) {
    ANXIN_TRY(section->CheckKeys({"detectors", "state_dir", "max_restarts", "storm_limit",
                                  "stop_grace", "reset_retries", "link_timeout", "verify_timeout",
                                  "playbooks", "faults", "escalation", "etcd"}));
  }
  return section;
}

Result<StateDirChoice> StateDir(const std::string& flag, const Section& section) {
  if (!flag.empty()) return StateDirChoice{flag, "--state-dir"};
  if (section) {
    ANXIN_ASSIGN_OR_RETURN(std::string dir, section->Get<std::string>("state_dir", ""));
    if (!dir.empty()) return StateDirChoice{std::move(dir), "run.state_dir"};
  }
  return StateDirChoice{".anxin/run", "the default state directory"};
}

// The command, its environment and how the ranks are launched.
Status LoadLaunch(const RunFlags& f, SupervisorOptions& so) {
  so.command = f.command;
  so.env = f.env;
  for (const std::string& e : so.env) {
    if (e.find('=') == std::string::npos || e.front() == '=') {
      return InvalidArgument("--env: expected NAME=VALUE, got '" + e + "'");
    }
  }
  so.launch.nproc_per_node = f.nproc_per_node;
  so.launch.master_addr = f.master_addr;
  so.launch.master_port = f.master_port;
  so.pick_port = f.master_port == 0;
  so.launch.numa_bind = f.numa_bind == "auto";
  so.log_dir = f.log_dir;
  so.checkpoint_dir = f.checkpoint_dir;
  so.prefix_output = !f.no_prefix;
  return Ok();
}

// Restart budget, storm limit, reset tries and the timeouts.
Status LoadLimits(const RunFlags& f, const Section& section, SupervisorOptions& so) {
  ANXIN_ASSIGN_OR_RETURN(so.max_restarts, Count(f.max_restarts, section, "max_restarts", 3));
  ANXIN_ASSIGN_OR_RETURN(const int storm, Count(f.storm_limit, section, "storm_limit", 3));
  so.storm_limit = std::max(1, storm);
  ANXIN_ASSIGN_OR_RETURN(const int resets, Count(f.reset_retries, section, "reset_retries", 3));
  so.reset_retries = std::max(1, resets);
  ANXIN_ASSIGN_OR_RETURN(so.stop_grace_seconds,
                         Duration(f.stop_grace, "--stop-grace", section, "stop_grace", 5));
  ANXIN_ASSIGN_OR_RETURN(so.link_timeout_seconds,
                         Duration(f.link_timeout, "--link-timeout", section, "link_timeout", 60));
  ANXIN_ASSIGN_OR_RETURN(so.verify_timeout_seconds, Duration(f.verify_timeout, "--verify-timeout",
                                                             section, "verify_timeout", 300));
  ANXIN_ASSIGN_OR_RETURN(so.abort_timeout_seconds,
                         Duration(f.abort_timeout, "--abort-timeout", std::nullopt, "", 5));
  if (so.abort_timeout_seconds <= 0) return InvalidArgument("--abort-timeout: must be above 0");
  so.in_process = !f.no_in_process;
  if (f.warm_spares < 0) return InvalidArgument("--warm-spares: must be 0 or more");
  if (f.warm_spares > 0 && f.no_in_process) {
    return InvalidArgument(
        "--warm-spares needs in-process restart: a spare joins through anxin_sdk.run(); drop "
        "--no-in-process");
  }
  so.warm_spares = f.warm_spares;
  if (!f.hang_timeout.empty()) {
    ANXIN_ASSIGN_OR_RETURN(const double h,
                           Duration(f.hang_timeout, "--hang-timeout", std::nullopt, "", 0));
    if (h <= 0) return InvalidArgument("--hang-timeout: must be above 0");
    so.hang_timeout_seconds = h;
  }
  return Ok();
}

// run.escalation.{faults, window, min_nproc}, --min-nproc.
Status LoadEscalation(const RunFlags& f, const Section& section, SupervisorOptions& so) {
  Section esc;
  if (section && section->Has("escalation")) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode e, section->Child("escalation"));
    ANXIN_TRY(e.CheckKeys({"faults", "window", "min_nproc"}));
    esc = e;
  }
  ANXIN_ASSIGN_OR_RETURN(so.escalate_faults, Count(-1, esc, "faults", 3));
  ANXIN_ASSIGN_OR_RETURN(so.escalate_window_seconds, Duration("", "", esc, "window", 3600));
  ANXIN_ASSIGN_OR_RETURN(const int min_nproc, Count(f.min_nproc, esc, "min_nproc", 0));
  if (min_nproc > f.nproc_per_node) {
    return InvalidArgument("--min-nproc " + std::to_string(min_nproc) +
                           " is above --nproc-per-node " + std::to_string(f.nproc_per_node));
  }
  so.min_nproc = min_nproc;
  return Ok();
}

// The shipped default, then the run: section's, then --playbook.
Status LoadPlaybooks(const RunFlags& f, const Section& section, SupervisorOptions& so) {
  const PlaybookDefaults pd = PlaybookDefaultsFor(so);
  PlaybookSet books = DefaultPlaybooks(pd);
  std::vector<std::string> site_classes;
  if (section) {
    if (auto sigs = section->Find("detectors")) {
      if (auto lp = sigs->Find("log_patterns"); lp && lp->Has("signatures")) {
        ANXIN_ASSIGN_OR_RETURN(ConfigNode list, lp->Child("signatures"));
        ANXIN_ASSIGN_OR_RETURN(std::vector<LogSignature> parsed, ParseSignatures(list));
        for (const LogSignature& sig : parsed) site_classes.push_back(sig.fault_class);
      }
    }
    ANXIN_TRY(MergePlaybooks(*section, pd, site_classes, books));
  }
  if (!f.playbook.empty()) {
    auto root = ConfigNode::LoadFile(f.playbook);
    if (!root) return std::unexpected(root.error().With("--playbook"));
    ANXIN_TRY(root->CheckKeys({"playbooks", "faults"}));
    ANXIN_TRY(MergePlaybooks(*root, pd, site_classes, books));
  }
  so.playbooks = std::move(books);
  return Ok();
}

// The job id, the state directory, and the SDK sockets.
Status LoadPaths(const RunFlags& f, const Section& section, SupervisorOptions& so) {
  for (const char* v : {"ANXIN_JOB_ID", "SLURM_JOB_ID"}) {
    if (const char* id = std::getenv(v); id != nullptr && so.job_id.empty()) so.job_id = id;
  }
  ANXIN_ASSIGN_OR_RETURN(StateDirChoice state, StateDir(f.state_dir, section));
  so.state_dir = std::move(state.dir);
  so.sdk_socket = f.sdk_socket;
  if (so.sdk_socket.empty()) {
    so.sdk_socket = so.state_dir + "/sdk-" + std::to_string(getpid()) + ".sock";
    if (so.sdk_socket.size() >= 100) so.sdk_socket.clear();  // too long for a socket address
  }
  if (const char* agent = std::getenv("ANXIN_AGENT_SOCKET")) so.sdk_forward = agent;
  return Ok();
}

Status CreateDirectories(const SupervisorOptions& so) {
  std::error_code ec;
  std::filesystem::create_directories(so.state_dir, ec);
  if (ec) return Unavailable("--state-dir " + so.state_dir + ": " + ec.message());
  if (!so.log_dir.empty()) {
    std::filesystem::create_directories(so.log_dir, ec);
    if (ec) return Unavailable("--log-dir " + so.log_dir + ": " + ec.message());
  }
  return Ok();
}

// etcd's TLS files and user, from the first source that names each
// (LoadClusterRequest's comment).
Status LoadEtcdSecurity(const RunFlags& f, const Section& section, ClusterRequest& r) {
  struct Field {
    const char* conf;     // --rdzv-conf key and run.etcd key
    const char* env;      // ANXIN_ETCD_...
    const char* etcdctl;  // ETCDCTL_..., or nullptr
    const std::string* flag;
    std::string* out;
  };
  std::string password;
  const std::vector<Field> fields = {
      {"cacert", "ANXIN_ETCD_CACERT", "ETCDCTL_CACERT", &f.etcd_cacert, &r.etcd_ca_file},
      {"cert", "ANXIN_ETCD_CERT", "ETCDCTL_CERT", &f.etcd_cert, &r.etcd_cert_file},
      {"key", "ANXIN_ETCD_KEY", "ETCDCTL_KEY", &f.etcd_key, &r.etcd_key_file},
      {"server_name", "ANXIN_ETCD_SERVER_NAME", nullptr, &f.etcd_server_name, &r.etcd_server_name},
      {"user", "ANXIN_ETCD_USER", "ETCDCTL_USER", &f.etcd_user, &r.etcd_user},
      {"password", "ANXIN_ETCD_PASSWORD", "ETCDCTL_PASSWORD", nullptr, &password},
  };
  std::vector<std::pair<std::string, std::string>> conf;
  for (std::string_view part : Split(f.rdzv_conf, ',')) {
    const std::string_view item = Trim(part);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key(Trim(item.substr(0, eq)));
    if (eq == std::string_view::npos ||
        std::none_of(fields.begin(), fields.end(), [&](const Field& x) { return key == x.conf; })) {
      return InvalidArgument(
          "--rdzv-conf: expected KEY=VALUE[,KEY=VALUE...] with KEY one of "
          "cacert, cert, key, server_name, user, password; got '" +
          (key == "password" ? std::string("password=...") : std::string(item)) + "'");
    }
    conf.emplace_back(key, std::string(Trim(item.substr(eq + 1))));
  }
  std::optional<ConfigNode> etcd;
  if (section && section->Has("etcd")) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode e, section->Child("etcd"));
    ANXIN_TRY(e.CheckKeys({"cacert", "cert", "key", "server_name", "user", "password_file"}));
    etcd = e;
  }
  for (const Field& x : fields) {
    if (x.flag != nullptr && !x.flag->empty()) {
      *x.out = *x.flag;
      continue;
    }
    auto given =
        std::find_if(conf.begin(), conf.end(), [&](const auto& kv) { return kv.first == x.conf; });
    if (given != conf.end()) {
      *x.out = given->second;
      continue;
    }
    if (etcd && std::string_view(x.conf) != "password") {
      ANXIN_ASSIGN_OR_RETURN(*x.out, etcd->Get<std::string>(x.conf, ""));
      if (!x.out->empty()) continue;
    }
    if (etcd && std::string_view(x.conf) == "password") {
      ANXIN_ASSIGN_OR_RETURN(const std::string file, etcd->Get<std::string>("password_file", ""));
      if (!file.empty()) {
        auto text = ReadFile(file);
        if (!text) {
          return InvalidArgument("run.etcd.password_file " + file + ": " + text.error().message());
        }
        *x.out = std::string(Trim(*text));
        continue;
      }
    }
    for (const char* v : {x.env, x.etcdctl}) {
      if (v == nullptr) continue;
      if (const char* e = std::getenv(v); e != nullptr && *e != '\0') {
        *x.out = e;
        break;
      }
    }
  }
  // NAME:PASSWORD, as etcdctl --user takes it.
  if (const size_t colon = r.etcd_user.find(':'); colon != std::string::npos) {
    password = r.etcd_user.substr(colon + 1);
    r.etcd_user.resize(colon);
  }
  if (r.etcd_user.empty() && !password.empty()) {
    return InvalidArgument(
        "etcd: a password without a user: give --etcd-user NAME (or user= in --rdzv-conf)");
  }
  r.etcd_password = std::move(password);
  return Ok();
}

}  // namespace

Result<std::pair<int, int>> ParseNnodes(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("--nnodes: expected N or MIN:MAX with 1 <= MIN <= MAX, got '" +
                           std::string(text) + "'");
  };
  const size_t colon = text.find(':');
  auto lo = ParseInt(text.substr(0, colon));
  auto hi = colon == std::string_view::npos ? lo : ParseInt(text.substr(colon + 1));
  if (!lo || !hi || *lo < 1 || *hi < *lo || *hi > 100000) return bad();
  return std::pair<int, int>(static_cast<int>(*lo), static_cast<int>(*hi));
}

Result<std::optional<ClusterRequest>> LoadClusterRequest(const RunFlags& flags,
                                                         const SupervisorOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(const auto nnodes, ParseNnodes(flags.nnodes));
  if (nnodes.second <= 1 && flags.rdzv_endpoint.empty()) return std::nullopt;
  if (flags.rdzv_endpoint.empty()) {
    return InvalidArgument("--nnodes " + flags.nnodes +
                           ": a job over several nodes needs --rdzv-endpoint host:port (etcd) "
                           "and --rdzv-id JOB");
  }
  ClusterRequest r;
  r.endpoints = flags.rdzv_endpoint;
  r.job = flags.rdzv_id.empty() ? options.job_id : flags.rdzv_id;
  r.min_nodes = nnodes.first;
  r.max_nodes = nnodes.second;
  r.node_rank = flags.node_rank;
  r.address = flags.master_addr_given ? flags.master_addr : "";
  r.max_restarts = options.max_restarts;
  r.storm_limit = options.storm_limit;
  if (!flags.rdzv_timeout.empty()) {
    ANXIN_ASSIGN_OR_RETURN(const double t,
                           Duration(flags.rdzv_timeout, "--rdzv-timeout", std::nullopt, "", 30));
    if (t <= 0) return InvalidArgument("--rdzv-timeout: must be above 0");
    r.barrier_timeout_seconds = t;
  }
  ANXIN_TRY(LoadEtcdSecurity(flags, options.run_section, r));
  return r;
}

Result<StateDirChoice> ResolveStateDir(const std::string& flag, const GlobalConfig& config) {
  ANXIN_ASSIGN_OR_RETURN(Section section, RunSection(config));
  return StateDir(flag, section);
}

Result<SupervisorOptions> LoadSupervisorOptions(const RunFlags& flags, const GlobalConfig& config) {
  ANXIN_TRY(CheckFlags(flags));
  ANXIN_ASSIGN_OR_RETURN(const Section section, RunSection(config));
  SupervisorOptions so;
  so.run_section = section;
  ANXIN_TRY(LoadLaunch(flags, so));
  ANXIN_TRY(LoadLimits(flags, section, so));
  ANXIN_TRY(LoadEscalation(flags, section, so));
  ANXIN_TRY(LoadPlaybooks(flags, section, so));
  ANXIN_TRY(LoadPaths(flags, section, so));
  return so;
}

Result<int> RunJob(const RunFlags& flags, const GlobalConfig& config,
                   const CoordinatorFactory& make_coordinator) {
  // Every signal stops the job the same way: the supervisor stops the ranks
  // within the grace period and returns 128 + the signal. First, so that
  // every thread started from here on leaves the signals to it.
  StopOnSignals stop(SecondSignal::kRecorded);
  ANXIN_ASSIGN_OR_RETURN(SupervisorOptions so, LoadSupervisorOptions(flags, config));
  ANXIN_ASSIGN_OR_RETURN(const std::optional<ClusterRequest> cluster,
                         LoadClusterRequest(flags, so));
  if (cluster && !make_coordinator) {
    return InvalidArgument("--nnodes " + flags.nnodes +
                           ": this program has no multi-node coordinator; use --nnodes 1");
  }
  ANXIN_TRY(CreateDirectories(so));
  ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<device::DeviceBackend> backend,
                         device::CreateConfiguredBackend(flags.backend, flags.scenario, config));
  ANXIN_ASSIGN_OR_RETURN(std::vector<device::DeviceInfo> devices, backend->Enumerate());
  std::vector<host::NumaNode> nodes;
  if (so.launch.numa_bind) {
    if (auto n = host::ReadNumaNodes(host::HostRoot{})) nodes = std::move(*n);
  }
  std::unique_ptr<Coordinator> coordinator;
  if (cluster) {
    ANXIN_ASSIGN_OR_RETURN(coordinator, make_coordinator(*cluster));
  }
  Supervisor supervisor(std::move(so), backend.get(), std::move(devices), std::move(nodes),
                        std::move(coordinator));
  std::stop_callback on_stop(stop.token(), [&] { supervisor.RequestStop(stop.signal()); });
  return supervisor.Run();
}

}  // namespace anxin::run
