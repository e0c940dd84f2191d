// `anxin lab` (lab.h): bringing the simulated cluster up, watching the loop
// for every fault, and taking it all down again.
#include "anxin/lab/lab.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/http.h"
#include "anxin/base/stop_token.h"
#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/lab/faults.h"
#include "anxin/lab/page.h"
#include "anxin/lab/procs.h"
#include "anxin/lab/report.h"
#include "anxin/notify/delivery.h"
#include "anxin/run/journal.h"

namespace anxin::lab {
namespace {

namespace fs = std::filesystem;

// The lab's Prometheus scrapes and evaluates this often (the shipped file
// says 10 s; a lab wants its alerts within seconds of the rules' `for:`).
constexpr int kScrapeSeconds = 2;
constexpr int kEvaluationSeconds = 2;
constexpr const char* kJobId = "lab";
constexpr const char* kBotToken = "lab-bot";

double NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A program looked up in PATH; "" when absent.
std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (std::string_view dir : Split(path, ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(std::string(dir)) / name;
    if (::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p.string();
  }
  return "";
}

// The repository's files the lab uses (examples/, deploy/): ANXIN_SOURCE_DIR,
// else beside the build tree the binary runs from (build/test/anxin), else the
// install prefix (bin/anxin -> share/anxin).
std::string FindSourceRoot() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("ANXIN_SOURCE_DIR"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "../..");
    candidates.push_back(exe.parent_path() / "../share/anxin");
  }
  for (const fs::path& c : candidates) {
    if (fs::exists(c / "examples/run/train.py", ec) &&
        fs::exists(c / "deploy/prometheus/prometheus.yml", ec)) {
      return fs::weakly_canonical(c, ec).string();
    }
  }
  return "";
}

Status WriteText(const std::string& path, std::string_view text, mode_t mode = 0644) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  return WriteFileAtomic(path, text, mode);
}

// Appends a child's output lines to its log file.
class LogFile {
 public:
  explicit LogFile(const std::string& path) : f_(std::fopen(path.c_str(), "ae")) {}
  ~LogFile() {
    if (f_ != nullptr) std::fclose(f_);
  }
  void Line(const OutputLine& l) {
    std::lock_guard lock(mu_);
    if (f_ == nullptr) return;
    std::fwrite(l.text.data(), 1, l.text.size(), f_);
    std::fputc('\n', f_);
    std::fflush(f_);
  }

 private:
  std::mutex mu_;
  FILE* f_;
};

struct Child {
  std::string name;
  std::unique_ptr<Subprocess> proc;
  std::shared_ptr<LogFile> log;
  int port = 0;
};

struct NodeState {
  int index = 0;
  std::string name;
  std::string dir;
  Child agent, supervisor;
  std::atomic<bool> up{true};
  std::mutex mu;  // guards what the supervisor's output lines update
  int64_t step = -1;
  double step_time = -1;
  int generation = -1;
  NodeSteps steps;
};

// The scenario of one node's sim backend, as a process started `offset`
// seconds after the lab's time 0 sees it: 8 Ascend 910C, and this node's
// device faults from the plan at their times.
std::string NodeScenario(const FaultPlan& plan, int node, double offset) {
  std::string events;
  auto at = [&](double t) { return fmt::format("{:.3f}s", std::max(0.0, t - offset)); };
  constexpr double kBaselineC = 52;
  constexpr double kHbmBytes = 64.0 * (1ull << 30);
  constexpr double kBaselineHbm = 40.0 * (1ull << 30);
  for (const LabFault& f : plan.faults) {
    if (f.node != node) continue;
    const double end = f.at_seconds + f.for_seconds;
    switch (f.kind) {
      case FaultKind::kTemperature:
        events +=
            fmt::format("  - {{at: {}, device: {}, kind: temperature_ramp, to: {}, over: 2s}}\n",
                        at(f.at_seconds), f.npu, f.to);
        events +=
            fmt::format("  - {{at: {}, device: {}, kind: temperature_ramp, to: {}, over: 2s}}\n",
                        at(end), f.npu, kBaselineC);
        break;
      case FaultKind::kHbm: {
        const int64_t bytes = static_cast<int64_t>(f.to * kHbmBytes - kBaselineHbm);
        events += fmt::format("  - {{at: {}, device: {}, kind: hbm_step, bytes: {}}}\n",
                              at(f.at_seconds), f.npu, bytes);
        events += fmt::format("  - {{at: {}, device: {}, kind: hbm_step, bytes: {}}}\n", at(end),
                              f.npu, -bytes);
        break;
      }
      case FaultKind::kLinkDown:
        events += fmt::format(
            "  - {{at: {}, device: {}, kind: link_down, port: {}, duration: {:.3f}s}}\n",
            at(f.at_seconds), f.npu, f.port, f.for_seconds);
        break;
      default:
        break;
    }
  }
  return fmt::format(
      "# Written by anxin lab: {} of the simulated cluster, its device faults from {}\n"
      "name: lab-{}\n"
      "description: 8 x Ascend910C of the lab's {}\n"
      "seed: {}\n"
      "devices:\n"
      "  count: 8\n"
      "  model: Ascend910C\n"
      "  numa_nodes: 2\n"
      "  ports: 1\n"
      "  baseline: {{temperature: {}, power: 310, utilisation: 88, hbm_used: 40GiB}}\n"
      "  noise: {{temperature: 0.5, power: 6, utilisation: 2, hbm_used: 64MiB, period: 1s}}\n"
      "  reset: {{duration: 0.5s}}\n"
      "events:\n{}",
      NodeName(node), plan.source, NodeName(node), NodeName(node), 100 + node, kBaselineC,
      events.empty() ? "  []\n" : events);
}

// deploy/prometheus/prometheus.yml as shipped, with the lab's intervals and
// its Alertmanager.
Result<std::string> LabPrometheusConfig(const std::string& shipped, int alertmanager_port) {
  std::string text = shipped;
  auto replace = [&](std::string_view from, const std::string& to) -> Status {
    const size_t at = text.find(from);
    if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) {
      return FailedPrecondition(fmt::format(
          "deploy/prometheus/prometheus.yml no longer holds '{}' once: update anxin lab with it",
          from));
    }
    text.replace(at, from.size(), to);
    return Ok();
  };
  ANXIN_TRY(replace("scrape_interval: 10s", fmt::format("scrape_interval: {}s", kScrapeSeconds)));
  ANXIN_TRY(replace("evaluation_interval: 10s",
                    fmt::format("evaluation_interval: {}s", kEvaluationSeconds)));
  ANXIN_TRY(replace("refresh_interval: 1m", "refresh_interval: 5s"));
  return fmt::format(
      "# Written by anxin lab from deploy/prometheus/prometheus.yml: the same job and rules,\n"
      "# scraped and evaluated every {} s / {} s instead of 10 s, and this lab's Alertmanager.\n"
      "{}\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: "
      "[\"127.0.0.1:{}\"]\n",
      kScrapeSeconds, kEvaluationSeconds, text, alertmanager_port);
}

std::string AlertmanagerConfig(int notify_port) {
  return fmt::format(
      "# Written by anxin lab: every alert to the lab's anxin notify, resolved ones too.\n"
      "route:\n"
      "  receiver: anxin\n"
      "  group_by: [alertname, node, device, port, rank, fault_class]\n"
      "  group_wait: 0s\n"
      "  group_interval: 2s\n"
      "  repeat_interval: 4h\n"
      "receivers:\n"
      "  - name: anxin\n"
      "    webhook_configs:\n"
      "      - url: http://127.0.0.1:{}/webhook\n"
      "        send_resolved: true\n",
      notify_port);
}

std::string NotifyConfig(const std::string& dir, int prometheus_port, int page_port) {
  return fmt::format(
      "# Written by anxin lab: cards to the Feishu-compatible bot the lab serves.\n"
      "notify:\n"
      "  receivers:\n"
      "    - name: lab-feishu\n"
      "      type: feishu\n"
      "      url_file: {0}/notify/bot.url\n"
      "      secret_file: {0}/notify/bot.secret\n"
      "  default_receivers: [lab-feishu]\n"
      "  time_zone: UTC\n"
      "  prometheus_url: http://127.0.0.1:{1}\n"
      "  dashboard_url: http://127.0.0.1:{2}/\n",
      dir, prometheus_port, page_port);
}

// The recovery playbooks of the lab's supervisors: the shipped default, with
// a message to notify from the node that saw the fault, and the example's
// `link` playbook (no reset; relaunch once the links are up again).
std::string LabPlaybooks(int notify_port) {
  const std::string notify = fmt::format(
      "    - step: notify\n"
      "      url: http://127.0.0.1:{}/webhook\n"
      "      timeout: 5s\n"
      "      retries: 2\n"
      "      only_for: [process_exit, hang, no_progress, collective_timeout, collective_error,\n"
      "                 peer_failure, network, device_error, device_lost, link_down,\n"
      "                 ecc_uncorrectable, out_of_memory]\n",
      notify_port);
  return "# Written by anxin lab (docs/lab.md).\nplaybooks:\n  default:\n"
         "    - {step: stop_ranks, grace: 1s}\n" +
         notify +
         "    - {step: clear_device_memory}\n"
         "    - step: reset_device\n"
         "      only_for: [hang, collective_timeout, collective_error, peer_failure, network,\n"
         "                 device_error, device_lost, ecc_uncorrectable]\n"
         "    - {step: wait_links_up, timeout: 10m}\n"
         "    - {step: select_checkpoint}\n"
         "    - {step: relaunch}\n"
         "    - {step: verify_progress, timeout: 5m}\n"
         "  link:\n"
         "    - {step: stop_ranks, grace: 1s}\n" +
         notify +
         "    - {step: wait_links_up, timeout: 10m}\n"
         "    - {step: select_checkpoint}\n"
         "    - {step: relaunch}\n"
         "    - {step: verify_progress, timeout: 5m}\n"
         "faults:\n"
         "  link_down: link\n";
}

std::string RandomSecret() {
  std::random_device rd;
  std::string s;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) s += hex[rd() % 16];
  return s;
}

bool HttpOk(int port, const std::string& path, bool post = false) {
  HttpClient c("127.0.0.1", port,
               {.connect_timeout = std::chrono::milliseconds(300),
                .timeout = std::chrono::milliseconds(1500)});
  auto r = post ? c.Post(path, "{}") : c.Get(path);
  return r && r->ok();
}

int ReadPortFile(const std::string& path) {
  auto text = ReadFile(path, 64);
  if (!text || text->empty() || text->back() != '\n') return 0;
  return static_cast<int>(ParseInt(Trim(*text)).value_or(0));
}

class Lab {
 public:
  Lab(const LabFlags& flags, bool json, FaultPlan plan, std::string root, std::string dir)
      : flags_(flags),
        json_(json),
        plan_(std::move(plan)),
        root_(std::move(root)),
        dir_(std::move(dir)) {}
  ~Lab() { StopAll(); }

  Result<int> Run(StopOnSignals& signals);

 private:
  Result<int> RunUntilStopped(StopOnSignals& signals);
  void Say(const std::string& line) {
    if (!json_) std::fprintf(stderr, "anxin lab: %s\n", line.c_str());
    spdlog::debug("lab: {}", line);
  }
  Result<Child> Start(const std::string& name, std::vector<std::string> argv,
                      std::vector<std::string> env = {},
                      std::function<void(const OutputLine&)> on_line = {});
  Status Record();
  Status StartEtcd();
  Status StartNotify();
  Status StartAlertmanager();
  Status StartAgent(NodeState& n, double offset);
  Status StartSupervisor(NodeState& n, double offset);
  Status StartPrometheus();
  Status WaitUntil(const std::function<bool()>& ready, double seconds, const std::string& what,
                   const Child* child);
  bool Due(size_t i, double now);
  void Inject(size_t i);
  void Restore(size_t i);
  void Observe();
  nlohmann::json StatusJson();
  void StopAll();
  HttpResponse Sink(const HttpRequest& req);

  LabFlags flags_;
  bool json_;
  FaultPlan plan_;
  std::string root_, dir_;
  std::string anxin_, python_, etcd_bin_, prometheus_bin_, alertmanager_bin_;
  std::string secret_;
  std::stop_token stop_;
  std::unique_ptr<HttpServer> server_;
  std::vector<Child> etcd_;
  std::vector<int> etcd_peer_ports_;
  Child notify_, alertmanager_, prometheus_;
  std::vector<std::unique_ptr<NodeState>> nodes_;
  double t0_ = 0;
  std::vector<double> injected_at_;  // per fault; -1 until injected
  std::vector<double> restore_at_;   // lost_node: when it comes back; -1 when never/done

  std::mutex mu_;  // guards what the HTTP handlers read
  std::vector<CardAlert> cards_;
  std::vector<FaultRow> rows_;
  std::vector<PromAlert> alerts_;
  int bad_signatures_ = 0;
  std::vector<std::string> node_lost_names_;
};

Result<Child> Lab::Start(const std::string& name, std::vector<std::string> argv,
                         std::vector<std::string> env,
                         std::function<void(const OutputLine&)> on_line) {
  Child c;
  c.name = name;
  c.log = std::make_shared<LogFile>(dir_ + "/logs/" + name + ".log");
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.env = std::move(env);
  auto log = c.log;
  o.on_stdout = [log, on_line](const OutputLine& l) {
    log->Line(l);
    if (on_line) on_line(l);
  };
  o.on_stderr = o.on_stdout;
  o.stop_grace = std::chrono::seconds(3);
  ANXIN_ASSIGN_OR_RETURN(c.proc, Subprocess::Start(std::move(o)));
  return c;
}

// DIR/processes.json: every child's pid and start time, rewritten at each
// start, so `lab down` finds them whatever happened to `lab up`.
Status Lab::Record() {
  nlohmann::json list = nlohmann::json::array();
  auto add = [&](const Child& c) {
    if (!c.proc) return;
    list.push_back({{"name", c.name},
                    {"pid", c.proc->pid()},
                    {"start", ProcessStartTicks(c.proc->pid())},
                    {"port", c.port}});
  };
  for (const Child& c : etcd_) add(c);
  add(notify_);
  add(alertmanager_);
  add(prometheus_);
  for (const auto& n : nodes_) {
    add(n->agent);
    add(n->supervisor);
  }
  nlohmann::json doc = {{"lab",
                         {{"pid", ::getpid()},
                          {"start", ProcessStartTicks(::getpid())},
                          {"port", server_ ? server_->port() : 0}}},
                        {"dir", dir_},
                        {"children", list}};
  return WriteText(dir_ + "/processes.json", doc.dump(1) + "\n");
}

Status Lab::WaitUntil(const std::function<bool()>& ready, double seconds, const std::string& what,
                      const Child* child) {
  const auto deadline = std::chrono::steady_clock::now() + FromSeconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stop_.stop_requested()) return Cancelled("stopped while waiting for " + what);
    if (ready()) return Ok();
    if (child != nullptr && child->proc && !child->proc->Running()) {
      auto st = child->proc->Wait();
      return Unavailable(fmt::format("{} {} before it was ready: see {}/logs/{}.log", what,
                                     st ? st->Describe() : "ended", dir_, child->name));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return DeadlineExceeded(
      fmt::format("{} was not ready within {:.0f} s: see {}/logs/", what, seconds, dir_));
}

Status Lab::StartEtcd() {
  std::vector<int> client;
  std::string cluster;
  for (int i = 0; i < 3; ++i) {
    ANXIN_ASSIGN_OR_RETURN(int c, FreeLoopbackPort());
    ANXIN_ASSIGN_OR_RETURN(int p, FreeLoopbackPort());
    client.push_back(c);
    etcd_peer_ports_.push_back(p);
    cluster += fmt::format("{}etcd-{}=http://127.0.0.1:{}", i ? "," : "", i, p);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string c = fmt::format("http://127.0.0.1:{}", client[i]);
    const std::string p = fmt::format("http://127.0.0.1:{}", etcd_peer_ports_[i]);
    ANXIN_ASSIGN_OR_RETURN(
        Child child, Start(fmt::format("etcd-{}", i), {etcd_bin_,
                                                       "--name",
                                                       fmt::format("etcd-{}", i),
                                                       "--data-dir",
                                                       fmt::format("{}/etcd/etcd-{}", dir_, i),
                                                       "--listen-client-urls",
                                                       c,
                                                       "--advertise-client-urls",
                                                       c,
                                                       "--listen-peer-urls",
                                                       p,
                                                       "--initial-advertise-peer-urls",
                                                       p,
                                                       "--initial-cluster",
                                                       cluster,
                                                       "--initial-cluster-token",
                                                       "anxin-lab",
                                                       "--initial-cluster-state",
                                                       "new",
                                                       "--heartbeat-interval",
                                                       "100",
                                                       "--election-timeout",
                                                       "1000",
                                                       "--log-level",
                                                       "warn"}));
    child.port = client[i];
    etcd_.push_back(std::move(child));
  }
  ANXIN_TRY(Record());
  for (const Child& c : etcd_) {
    ANXIN_TRY(
        WaitUntil([&] { return HttpOk(c.port, "/v3/maintenance/status", true); }, 60, c.name, &c));
  }
  return Ok();
}

Status Lab::StartNotify() {
  const std::string nd = dir_ + "/notify";
  ANXIN_TRY(WriteText(
      nd + "/bot.url",
      fmt::format("http://127.0.0.1:{}/open-apis/bot/v2/hook/{}\n", server_->port(), kBotToken),
      0600));
  ANXIN_TRY(WriteText(nd + "/bot.secret", secret_ + "\n", 0600));
  ANXIN_ASSIGN_OR_RETURN(int prom_port, FreeLoopbackPort());
  prometheus_.port = prom_port;
  ANXIN_TRY(WriteText(nd + "/anxin.yaml", NotifyConfig(dir_, prom_port, server_->port())));
  ANXIN_ASSIGN_OR_RETURN(
      notify_, Start("notify", {anxin_, "--config", nd + "/anxin.yaml", "notify", "--spool",
                                nd + "/spool", "--port", "0", "--port-file", nd + "/port"}));
  ANXIN_TRY(Record());
  ANXIN_TRY(WaitUntil([&] { return (notify_.port = ReadPortFile(nd + "/port")) > 0; }, 60,
                      "anxin notify", &notify_));
  return Record();
}

Status Lab::StartAlertmanager() {
  const std::string ad = dir_ + "/alertmanager";
  ANXIN_TRY(WriteText(ad + "/alertmanager.yml", AlertmanagerConfig(notify_.port)));
  ANXIN_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
  ANXIN_ASSIGN_OR_RETURN(
      alertmanager_,
      Start("alertmanager", {alertmanager_bin_, "--config.file=" + ad + "/alertmanager.yml",
                             "--storage.path=" + ad + "/data",
                             fmt::format("--web.listen-address=127.0.0.1:{}", port),
                             "--cluster.listen-address=", "--log.level=warn"}));
  alertmanager_.port = port;
  ANXIN_TRY(Record());
  return WaitUntil([&] { return HttpOk(port, "/-/ready"); }, 60, "Alertmanager", &alertmanager_);
}

Status Lab::StartAgent(NodeState& n, double offset) {
  ANXIN_TRY(WriteText(n.dir + "/agent-scenario.yaml", NodeScenario(plan_, n.index, offset)));
  std::error_code ec;
  fs::remove(n.dir + "/agent.port", ec);
  ANXIN_ASSIGN_OR_RETURN(
      n.agent, Start(n.name + "-agent",
                     {anxin_, "agent", "--port", "0", "--port-file", n.dir + "/agent.port",
                      "--node", n.name, "--scenario", n.dir + "/agent-scenario.yaml", "--socket",
                      n.dir + "/agent.sock", "--doctor-interval", "0", "--interval", "1s"}));
  return Ok();
}

Status Lab::StartSupervisor(NodeState& n, double offset) {
  ANXIN_TRY(WriteText(n.dir + "/run-scenario.yaml", NodeScenario(plan_, n.index, offset)));
  std::string endpoints;
  for (const Child& e : etcd_)
    endpoints += fmt::format("{}127.0.0.1:{}", endpoints.empty() ? "" : ",", e.port);
  int lost = 0;
  // The barrier of a recovery waits for the node whose link is down (its
  // playbook holds the relaunch until the link is up): longer than any outage.
  double barrier = 30;
  for (const LabFault& f : plan_.faults) {
    lost += f.kind == FaultKind::kLostNode;
    if (f.kind == FaultKind::kLinkDown) barrier = std::max(barrier, f.for_seconds + 30);
  }
  const int n_nodes = static_cast<int>(nodes_.size());
  const std::string nnodes = lost == 0 ? std::to_string(n_nodes)
                                       : fmt::format("{}:{}", std::max(1, n_nodes - lost), n_nodes);
  NodeState* node = &n;
  static const std::regex step_re(R"(^\[rank \d+\] step (\d+) )");
  static const std::regex gen_re(R"(generation (\d+): node rank)");
  auto on_line = [node](const OutputLine& l) {
    std::smatch m;
    if (std::regex_search(l.text, m, step_re)) {
      const double t = std::chrono::duration<double>(l.time.time_since_epoch()).count();
      std::lock_guard lock(node->mu);
      node->step = std::stoll(m[1]);
      node->step_time = t;
      if (node->steps.times.size() < 200000) node->steps.times.push_back(t);
    } else if (std::regex_search(l.text, m, gen_re)) {
      std::lock_guard lock(node->mu);
      node->generation = std::stoi(m[1]);
    }
  };
  const std::string inject = n.dir + "/inject";
  ANXIN_ASSIGN_OR_RETURN(n.supervisor, Start(n.name + "-run",
                                             {anxin_,
                                              "run",
                                              "--nnodes",
                                              nnodes,
                                              "--node-rank",
                                              std::to_string(n.index),
                                              "--rdzv-endpoint",
                                              endpoints,
                                              "--rdzv-id",
                                              kJobId,
                                              "--rdzv-timeout",
                                              fmt::format("{:.0f}s", barrier),
                                              "--master-addr",
                                              "127.0.0.1",
                                              "--nproc-per-node",
                                              std::to_string(flags_.ranks_per_node),
                                              "--backend",
                                              "sim",
                                              "--scenario",
                                              n.dir + "/run-scenario.yaml",
                                              "--state-dir",
                                              n.dir + "/state",
                                              "--checkpoint-dir",
                                              n.dir + "/ckpt",
                                              "--log-dir",
                                              n.dir + "/ranks",
                                              "--playbook",
                                              dir_ + "/playbooks.yaml",
                                              "--hang-timeout",
                                              "5s",
                                              "--stop-grace",
                                              "1s",
                                              "--link-timeout",
                                              "10m",
                                              "--verify-timeout",
                                              "5m",
                                              "--max-restarts",
                                              "100",
                                              "--storm-limit",
                                              "10",
                                              "--numa-bind",
                                              "off",
                                              "--",
                                              python_,
                                              "-u",
                                              root_ + "/examples/run/train.py",
                                              "--ckpt-dir",
                                              n.dir + "/ckpt",
                                              "--resume",
                                              "{checkpoint}",
                                              "--steps",
                                              "100000000",
                                              "--ckpt-every",
                                              "10",
                                              "--step-time",
                                              "0.2",
                                              "--fault-file",
                                              inject},
                                             {"ANXIN_AGENT_SOCKET=" + n.dir + "/agent.sock",
                                              std::string("ANXIN_JOB_ID=") + kJobId},
                                             on_line));
  return Ok();
}

Status Lab::StartPrometheus() {
  const std::string pd = dir_ + "/prometheus";
  ANXIN_ASSIGN_OR_RETURN(std::string shipped,
                         ReadFile(root_ + "/deploy/prometheus/prometheus.yml", 1 << 20));
  ANXIN_ASSIGN_OR_RETURN(std::string rules,
                         ReadFile(root_ + "/deploy/prometheus/rules/anxin.rules.yml", 1 << 20));
  ANXIN_ASSIGN_OR_RETURN(std::string config, LabPrometheusConfig(shipped, alertmanager_.port));
  ANXIN_TRY(WriteText(pd + "/prometheus.yml", config));
  ANXIN_TRY(WriteText(pd + "/rules/anxin.rules.yml", rules));
  std::string targets = "# Written by anxin lab: one target per node, labelled with its name.\n";
  for (const auto& n : nodes_) {
    targets += fmt::format("- targets: [\"127.0.0.1:{}\"]\n  labels:\n    node: {}\n",
                           n->agent.port, n->name);
  }
  ANXIN_TRY(WriteText(pd + "/targets/lab.yml", targets));
  const int port = prometheus_.port;  // chosen when notify's configuration was written
  ANXIN_ASSIGN_OR_RETURN(
      prometheus_, Start("prometheus", {prometheus_bin_, "--config.file=" + pd + "/prometheus.yml",
                                        "--storage.tsdb.path=" + pd + "/data",
                                        fmt::format("--web.listen-address=127.0.0.1:{}", port),
                                        "--log.level=warn"}));
  prometheus_.port = port;
  ANXIN_TRY(Record());
  return WaitUntil([&] { return HttpOk(prometheus_.port, "/-/ready"); }, 90, "Prometheus",
                   &prometheus_);
}

HttpResponse Lab::Sink(const HttpRequest& req) {
  const double now = NowUnix();
  auto j = nlohmann::json::parse(req.body, nullptr, false);
  if (req.path_groups.empty() || req.path_groups[0] != kBotToken || j.is_discarded()) {
    return HttpResponse::Json(200, R"({"code":9499,"msg":"bad request"})");
  }
  // As the real bot: the signature over the timestamp and the secret, and a
  // timestamp within an hour.
  const std::string ts = j.value("timestamp", "");
  const auto t = ParseInt(ts);
  if (!t || std::llabs(*t - static_cast<int64_t>(now)) > 3600 ||
      j.value("sign", "") != notify::FeishuSign(*t, secret_)) {
    std::lock_guard lock(mu_);
    ++bad_signatures_;
    return HttpResponse::Json(200, R"({"code":19021,"msg":"sign match fail"})");
  }
  auto alerts = ParseCard(req.body, now);
  if (!alerts) return HttpResponse::Json(200, R"({"code":9499,"msg":"bad request"})");
  {
    std::lock_guard lock(mu_);
    for (auto& a : *alerts) cards_.push_back(std::move(a));
  }
  (void)WriteText(dir_ + "/sink/" + fmt::format("{:.3f}", now) + ".json", req.body);
  return HttpResponse::Json(200, R"({"code":0,"msg":"success","data":{}})");
}

// A rank's fault waits until the rank steps (the job may still be forming
// its world, or recovering from the fault before): a fault the job cannot
// take yet would never fire.
bool Lab::Due(size_t i, double now) {
  const LabFault& f = plan_.faults[i];
  if (f.kind != FaultKind::kHcclError && f.kind != FaultKind::kHang &&
      f.kind != FaultKind::kCrash) {
    return true;
  }
  NodeState& n = *nodes_[f.node];
  std::lock_guard lock(n.mu);
  return n.step_time > 0 && now - n.step_time < 2;
}

void Lab::Inject(size_t i) {
  const LabFault& f = plan_.faults[i];
  NodeState& n = *nodes_[f.node];
  injected_at_[i] = NowUnix();
  switch (f.kind) {
    case FaultKind::kTemperature:
    case FaultKind::kHbm:
    case FaultKind::kLinkDown:
      // In the node's scenario since it started; the time is the plan's.
      injected_at_[i] = t0_ + f.at_seconds;
      break;
    case FaultKind::kHcclError:
    case FaultKind::kHang:
    case FaultKind::kCrash: {
      const char* word = f.kind == FaultKind::kHcclError ? "hccl_error"
                         : f.kind == FaultKind::kHang    ? "hang"
                                                         : "crash";
      std::error_code ec;
      fs::remove(n.dir + "/inject.taken", ec);
      if (auto st = WriteText(n.dir + "/inject", fmt::format("{} {}\n", word, f.rank)); !st) {
        Say("cannot inject " + DescribeFault(f) + ": " + st.error().ToString());
      }
      break;
    }
    case FaultKind::kLostNode:
      n.up = false;
      if (n.supervisor.proc) (void)n.supervisor.proc->Signal(SIGKILL);
      if (n.agent.proc) (void)n.agent.proc->Signal(SIGKILL);
      if (f.for_seconds > 0) restore_at_[i] = NowUnix() + f.for_seconds;
      break;
  }
  Say(fmt::format("fault {} injected: {}", i + 1, DescribeFault(f)));
}

void Lab::Restore(size_t i) {
  const LabFault& f = plan_.faults[i];
  NodeState& n = *nodes_[f.node];
  restore_at_[i] = -1;
  if (n.supervisor.proc) (void)n.supervisor.proc->Wait();
  if (n.agent.proc) (void)n.agent.proc->Wait();
  const double offset = NowUnix() - t0_;
  auto a = StartAgent(n, offset);
  if (a) {
    (void)WaitUntil([&] { return (n.agent.port = ReadPortFile(n.dir + "/agent.port")) > 0; }, 30,
                    n.name + "'s agent", &n.agent);
  }
  auto s = a ? StartSupervisor(n, offset) : a;
  if (!s) {
    Say("cannot bring " + n.name + " back: " + s.error().ToString());
    return;
  }
  // The agent comes back on a new port: tell Prometheus (file_sd rereads it).
  std::string targets = "# Written by anxin lab: one target per node, labelled with its name.\n";
  for (const auto& m : nodes_) {
    targets += fmt::format("- targets: [\"127.0.0.1:{}\"]\n  labels:\n    node: {}\n",
                           m->agent.port, m->name);
  }
  (void)WriteText(dir_ + "/prometheus/targets/lab.yml", targets);
  n.up = true;
  (void)Record();
  Say(fmt::format("{} is back (fault {})", n.name, i + 1));
}

void Lab::Observe() {
  Observations obs;
  obs.now = NowUnix();
  HttpClient c("127.0.0.1", prometheus_.port, {.timeout = std::chrono::milliseconds(3000)});
  if (auto r = c.Get("/api/v1/alerts"); r && r->ok()) {
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.contains("data") && j["data"].contains("alerts")) {
      for (const auto& a : j["data"]["alerts"]) {
        const auto& l = a.value("labels", nlohmann::json::object());
        obs.alerts.push_back({l.value("alertname", ""), l.value("node", ""), l.value("device", ""),
                              a.value("state", "")});
      }
    }
  }
  for (const auto& n : nodes_) {
    auto incidents = run::ReadIncidents(n->dir + "/state");
    obs.incidents.push_back(incidents ? std::move(*incidents) : std::vector<run::Incident>{});
    std::lock_guard lock(n->mu);
    obs.steps.push_back(n->steps);
    obs.node_up.push_back(n->up.load());
  }
  std::lock_guard lock(mu_);
  obs.cards = cards_;
  for (size_t k = 0; k < rows_.size(); ++k) {
    rows_[k].injected = injected_at_[rows_[k].fault];
  }
  UpdateRows(obs, rows_);
  alerts_ = obs.alerts;
}

nlohmann::json Lab::StatusJson() {
  nlohmann::json nodes = nlohmann::json::array();
  int generation = 0;
  const double now = NowUnix();
  for (const auto& n : nodes_) {
    std::lock_guard lock(n->mu);
    const bool stepping = n->step_time > 0 && now - n->step_time < 5;
    generation = std::max(generation, n->generation);
    nodes.push_back({{"name", n->name},
                     {"agent_port", n->agent.port},
                     {"agent_pid", n->agent.proc ? n->agent.proc->pid() : 0},
                     {"supervisor_pid", n->supervisor.proc ? n->supervisor.proc->pid() : 0},
                     {"state", !n->up     ? "lost"
                               : stepping ? "stepping"
                                          : "waiting"},
                     {"generation", n->generation},
                     {"step", n->step},
                     {"step_time", n->step_time}});
  }
  nlohmann::json alerts = nlohmann::json::array();
  int injected = 0;
  for (double t : injected_at_) injected += t >= 0;
  std::lock_guard lock(mu_);
  for (const PromAlert& a : alerts_) {
    alerts.push_back(
        {{"alertname", a.alertname}, {"node", a.node}, {"device", a.device}, {"state", a.state}});
  }
  std::string endpoints;
  for (const Child& e : etcd_)
    endpoints += fmt::format("{}127.0.0.1:{}", endpoints.empty() ? "" : ",", e.port);
  return {{"dir", dir_},
          {"pid", ::getpid()},
          {"time", now},
          {"started", t0_},
          {"faults_file", plan_.source},
          {"faults_injected", injected},
          {"faults_total", plan_.faults.size()},
          {"generation", generation},
          {"nodes", nodes},
          {"alerts", alerts},
          {"cards", cards_.size()},
          {"bad_signatures", bad_signatures_},
          {"etcd", endpoints},
          {"links",
           {{"status page", fmt::format("http://127.0.0.1:{}/", server_->port())},
            {"Prometheus", fmt::format("http://127.0.0.1:{}/alerts", prometheus_.port)},
            {"Alertmanager", fmt::format("http://127.0.0.1:{}/", alertmanager_.port)},
            {"anxin notify", fmt::format("http://127.0.0.1:{}/metrics", notify_.port)},
            {"sink", fmt::format("http://127.0.0.1:{}/api/cards", server_->port())}}}};
}

void Lab::StopAll() {
  // The supervisors first (they stop their ranks), then the rest.
  for (auto& n : nodes_) {
    if (n->supervisor.proc) (void)n->supervisor.proc->Signal(SIGTERM);
  }
  for (auto& n : nodes_) {
    if (n->supervisor.proc) (void)n->supervisor.proc->Stop(std::chrono::seconds(8));
    n->supervisor.proc.reset();
  }
  for (auto& n : nodes_) {
    if (n->agent.proc) (void)n->agent.proc->Signal(SIGTERM);
  }
  for (Child* c : {&prometheus_, &alertmanager_, &notify_}) {
    if (c->proc) (void)c->proc->Signal(SIGTERM);
  }
  for (Child& e : etcd_) {
    if (e.proc) (void)e.proc->Signal(SIGTERM);
  }
  for (auto& n : nodes_) {
    if (n->agent.proc) (void)n->agent.proc->Stop(std::chrono::seconds(5));
    n->agent.proc.reset();
  }
  for (Child* c : {&prometheus_, &alertmanager_, &notify_}) {
    if (c->proc) (void)c->proc->Stop(std::chrono::seconds(5));
    c->proc.reset();
  }
  for (Child& e : etcd_) {
    if (e.proc) (void)e.proc->Stop(std::chrono::seconds(5));
    e.proc.reset();
  }
  if (server_) server_->Stop();
}

Result<int> Lab::Run(StopOnSignals& signals) {
  stop_ = signals.token();
  auto rc = RunUntilStopped(signals);
  // A stop (lab down, Ctrl-C) while the lab was still starting is not an error.
  if (!rc && signals.stop_requested()) {
    StopAll();
    return 128 + signals.signal();
  }
  return rc;
}

Result<int> Lab::RunUntilStopped(StopOnSignals& signals) {
  anxin_ = fs::read_symlink("/proc/self/exe").string();
  struct Need {
    const char* program;
    const char* package;
    std::string* into;
  };
  for (const Need& need :
       {Need{"etcd", "etcd-server", &etcd_bin_}, Need{"prometheus", "prometheus", &prometheus_bin_},
        Need{"prometheus-alertmanager", "prometheus-alertmanager", &alertmanager_bin_},
        Need{"python3", "python3-torch", &python_}}) {
    // Debian's python3 is the one python3-torch installs into.
    *need.into = std::string(need.program) == "python3" && ::access("/usr/bin/python3", X_OK) == 0
                     ? "/usr/bin/python3"
                     : FindProgram(need.program);
    if (need.into->empty()) {
      return FailedPrecondition(fmt::format(
          "{} not found in PATH: anxin lab runs the real one; install Debian's {} package "
          "(apt-get install {}, or scripts/install-deps)",
          need.program, need.package, need.package));
    }
  }
  if (auto torch = RunCommand({python_, "-c", "import torch.distributed"},
                              {.timeout = std::chrono::seconds(120)});
      !torch || !torch->ok()) {
    return FailedPrecondition(fmt::format(
        "{} cannot import torch.distributed: the sample trainer needs PyTorch; install Debian's "
        "python3-torch package (apt-get install python3-torch, or scripts/install-deps)",
        python_));
  }
  secret_ = RandomSecret();
  const auto until = [&]() -> Result<double> {
    if (!flags_.exit_when_done) return 0.0;
    auto s = ParseSeconds(flags_.timeout);
    if (!s) return InvalidArgument("--timeout: " + s.error().message());
    return *s;
  }();
  if (!until) return std::unexpected(until.error());

  // The page and the sink first: a busy port fails before anything starts.
  server_ = std::make_unique<HttpServer>(HttpServerOptions{.port = flags_.port, .threads = 4});
  server_->Post(R"(/open-apis/bot/v2/hook/([^/]+))",
                [this](const HttpRequest& r) { return Sink(r); });
  server_->Get("/api/status",
               [this](const HttpRequest&) { return HttpResponse::Json(200, StatusJson().dump()); });
  server_->Get("/api/report", [this](const HttpRequest&) {
    std::lock_guard lock(mu_);
    return HttpResponse::Json(200, ReportToJson(rows_, cards_).dump());
  });
  server_->Get("/api/cards", [this](const HttpRequest&) {
    std::lock_guard lock(mu_);
    return HttpResponse::Json(200, ReportToJson(rows_, cards_)["cards"].dump());
  });
  server_->Get("/", [this](const HttpRequest&) {
    nlohmann::json status = StatusJson();
    nlohmann::json report;
    {
      std::lock_guard lock(mu_);
      report = ReportToJson(rows_, cards_);
    }
    HttpResponse r = HttpResponse::Text(200, RenderLabPage(status, report));
    r.content_type = "text/html; charset=utf-8";
    return r;
  });
  if (auto st = server_->Start(); !st) {
    return Unavailable(
        fmt::format("--port {}: cannot serve the status page there ({}): pick "
                    "another port, or 0 for any free one",
                    flags_.port, st.error().message()));
  }
  ANXIN_TRY(Record());
  Say(fmt::format("{} node(s) in {}; status page http://127.0.0.1:{}/", flags_.nodes, dir_,
                  server_->port()));

  rows_ = PlanRows(plan_, flags_.ranks_per_node);
  injected_at_.assign(plan_.faults.size(), -1);
  restore_at_.assign(plan_.faults.size(), -1);
  ANXIN_TRY(StartEtcd());
  Say(fmt::format("etcd: 3 members on 127.0.0.1:{},{},{}", etcd_[0].port, etcd_[1].port,
                  etcd_[2].port));
  ANXIN_TRY(StartNotify());
  ANXIN_TRY(StartAlertmanager());
  ANXIN_TRY(WriteText(dir_ + "/playbooks.yaml", LabPlaybooks(notify_.port)));

  t0_ = NowUnix();
  for (int i = 0; i < flags_.nodes; ++i) {
    auto n = std::make_unique<NodeState>();
    n->index = i;
    n->name = NodeName(i);
    n->dir = fmt::format("{}/n/{}", dir_, i);
    std::error_code ec;
    fs::create_directories(n->dir + "/ckpt", ec);
    nodes_.push_back(std::move(n));
  }
  for (auto& n : nodes_) ANXIN_TRY(StartAgent(*n, NowUnix() - t0_));
  ANXIN_TRY(Record());
  for (auto& n : nodes_) {
    NodeState* p = n.get();
    ANXIN_TRY(WaitUntil([&] { return (p->agent.port = ReadPortFile(p->dir + "/agent.port")) > 0; },
                        60, p->name + "'s agent", &p->agent));
  }
  ANXIN_TRY(StartPrometheus());
  for (auto& n : nodes_) ANXIN_TRY(StartSupervisor(*n, NowUnix() - t0_));
  ANXIN_TRY(Record());
  Say(
      fmt::format("{} agents, {} supervisors (the sample trainer, {} gloo rank(s) per node), "
                  "Prometheus :{}, Alertmanager :{}, notify :{}; {} fault(s) from {}",
                  nodes_.size(), nodes_.size(), flags_.ranks_per_node, prometheus_.port,
                  alertmanager_.port, notify_.port, plan_.faults.size(), plan_.source));

  const auto started = std::chrono::steady_clock::now();
  double done_since = -1;
  double last_observe = 0, last_write = 0;
  bool all_stepping_said = false;
  int status = 0;
  while (!signals.stop_requested()) {
    const double now = NowUnix();
    for (size_t i = 0; i < plan_.faults.size(); ++i) {
      if (injected_at_[i] < 0 && now >= t0_ + plan_.faults[i].at_seconds && Due(i, now)) Inject(i);
      if (restore_at_[i] >= 0 && now >= restore_at_[i]) Restore(i);
    }
    for (const Child* c :
         {&notify_, &alertmanager_, &prometheus_, &etcd_[0], &etcd_[1], &etcd_[2]}) {
      if (c->proc && !c->proc->Running()) {
        Say(fmt::format("{} ended on its own: see {}/logs/{}.log; stopping the lab", c->name, dir_,
                        c->name));
        status = 1;
      }
    }
    for (const auto& n : nodes_) {
      if (n->up && n->supervisor.proc && !n->supervisor.proc->Running()) {
        auto st = n->supervisor.proc->Wait();
        Say(fmt::format("{}'s supervisor {}: see {}/logs/{}-run.log", n->name,
                        st ? st->Describe() : "ended", dir_, n->name));
        n->up = false;
      }
    }
    if (status != 0) break;
    if (now - last_observe >= 1) {
      last_observe = now;
      Observe();
      if (!all_stepping_said) {
        bool all = true;
        for (const auto& n : nodes_) {
          std::lock_guard lock(n->mu);
          all = all && n->step >= 0;
        }
        if (all) {
          all_stepping_said = true;
          Say(fmt::format("every node is stepping, {:.1f} s after the nodes started", now - t0_));
        }
      }
    }
    if (now - last_write >= 1) {
      last_write = now;
      nlohmann::json report;
      bool complete = false;
      {
        std::lock_guard lock(mu_);
        report = ReportToJson(rows_, cards_);
        complete = report["complete"].get<bool>();
      }
      (void)WriteText(dir_ + "/report.json", report.dump(1) + "\n");
      (void)WriteText(dir_ + "/status.json", StatusJson().dump(1) + "\n");
      if (flags_.exit_when_done) {
        bool all_injected =
            std::all_of(injected_at_.begin(), injected_at_.end(), [](double t) { return t >= 0; });
        if (complete && all_injected) {
          if (done_since < 0) done_since = now;
          // A little longer, so that a duplicated card would still show.
          if (now - done_since >= 3) break;
        }
        if (std::chrono::steady_clock::now() - started > FromSeconds(*until)) {
          Say(fmt::format("the table is not complete after {}: stopping", flags_.timeout));
          status = 1;
          break;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  Observe();
  nlohmann::json report;
  {
    std::lock_guard lock(mu_);
    report = ReportToJson(rows_, cards_);
  }
  (void)WriteText(dir_ + "/report.json", report.dump(1) + "\n");
  (void)WriteText(dir_ + "/status.json", StatusJson().dump(1) + "\n");
  Say("stopping every process it started");
  StopAll();
  (void)WriteText(
      dir_ + "/processes.json",
      nlohmann::json({{"dir", dir_}, {"children", nlohmann::json::array()}}).dump(1) + "\n");
  if (json_) {
    std::printf("%s\n", report.dump(1).c_str());
  } else {
    std::lock_guard lock(mu_);
    std::printf("%s", FormatReport(rows_, cards_).c_str());
  }
  if (status == 0 && flags_.exit_when_done && !report["complete"].get<bool>()) status = 1;
  return status;
}

Result<std::string> AbsoluteDir(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("--dir: give a directory");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return InvalidArgument("--dir " + dir + ": " + ec.message());
  return fs::weakly_canonical(p, ec).string();
}

Result<int> Up(const LabFlags& flags, bool json) {
  if (flags.nodes < 1 || flags.nodes > kMaxNodes) {
    return InvalidArgument(fmt::format(
        "--nodes {}: a lab has 1 to {} nodes (each runs an agent, a supervisor and a trainer)",
        flags.nodes, kMaxNodes));
  }
  if (flags.ranks_per_node < 1 || flags.ranks_per_node > 8) {
    return InvalidArgument(
        fmt::format("--ranks-per-node {}: 1 to 8 (one per NPU)", flags.ranks_per_node));
  }
  const std::string root = FindSourceRoot();
  if (root.empty()) {
    return NotFound(
        "cannot find examples/run/train.py and deploy/prometheus/: set ANXIN_SOURCE_DIR to the "
        "anxin source tree");
  }
  const std::string faults =
      flags.faults.empty() ? root + "/examples/lab/faults.yaml" : flags.faults;
  ANXIN_ASSIGN_OR_RETURN(
      FaultPlan plan,
      LoadFaultPlan(faults, {.nodes = flags.nodes, .ranks_per_node = flags.ranks_per_node}));
  ANXIN_ASSIGN_OR_RETURN(std::string dir, AbsoluteDir(flags.dir));
  // One lab per directory; what a previous one left is cleared (its own files only).
  if (auto running = RunningLab(dir)) {
    return FailedPrecondition(fmt::format(
        "a lab already runs in {} (pid {}): `anxin lab down --dir {}` first", dir, *running, dir));
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return InvalidArgument("--dir " + dir + ": not a directory");
    const bool empty = fs::is_empty(dir, ec);
    if (!empty && !fs::exists(fs::path(dir) / "processes.json", ec)) {
      return InvalidArgument("--dir " + dir +
                             ": holds files that are not a lab's: give an empty or new directory");
    }
    if (!empty) {
      ANXIN_TRY(StopLab(dir, nullptr));
      for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
    }
  }
  fs::create_directories(dir + "/logs", ec);
  if (ec) return InvalidArgument("--dir " + dir + ": " + ec.message());

  StopOnSignals signals;
  Lab lab(flags, json, std::move(plan), root, dir);
  return lab.Run(signals);
}

Result<nlohmann::json> ReadJsonFile(const std::string& path, const std::string& what) {
  auto text = ReadFile(path, 64 << 20);
  if (!text) {
    if (text.error().code() == ErrorCode::kNotFound) {
      return NotFound(what + ": no lab in " + fs::path(path).parent_path().string() +
                      " (start one with `anxin lab up`)");
    }
    return std::unexpected(text.error());
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return DataLoss(path + ": not JSON");
  return j;
}

Result<int> Status(const LabFlags& flags, bool json) {
  ANXIN_ASSIGN_OR_RETURN(std::string dir, AbsoluteDir(flags.dir));
  auto read = ReadJsonFile(dir + "/status.json", "status");
  std::error_code ec;
  // A lab stopped (or killed) before its first status write still has its process list.
  if (!read && read.error().code() == ErrorCode::kNotFound &&
      fs::exists(fs::path(dir) / "processes.json", ec)) {
    read = nlohmann::json::object();
  }
  if (!read) return std::unexpected(read.error());
  nlohmann::json status = std::move(*read);
  const auto running = RunningLab(dir);
  status["running"] = running.has_value();
  if (json) {
    std::printf("%s\n", status.dump(1).c_str());
    return running ? 0 : 1;
  }
  std::printf("lab in %s: %s\n", dir.c_str(),
              running ? fmt::format("running (pid {})", *running).c_str() : "not running");
  std::printf("faults injected: %d of %d (%s); cards delivered: %d; job generation %d\n",
              status.value("faults_injected", 0), status.value("faults_total", 0),
              status.value("faults_file", "").c_str(), status.value("cards", 0),
              status.value("generation", 0));
  std::printf("%-10s %-9s %6s %10s %10s %6s\n", "NODE", "STATE", "GEN", "STEP", "AGENT", "");
  for (const auto& n : status.value("nodes", nlohmann::json::array())) {
    std::printf("%-10s %-9s %6d %10lld %10s\n", n.value("name", "").c_str(),
                running ? n.value("state", "").c_str() : "stopped", n.value("generation", -1),
                static_cast<long long>(n.value("step", int64_t{-1})),
                fmt::format(":{}", n.value("agent_port", 0)).c_str());
  }
  const auto alerts = status.value("alerts", nlohmann::json::array());
  std::printf("alerts in Prometheus: %zu\n", alerts.size());
  for (const auto& a : alerts) {
    const std::string device = a.value("device", "");
    std::printf("  %-8s %s %s%s%s\n", a.value("state", "").c_str(),
                a.value("alertname", "").c_str(), a.value("node", "").c_str(),
                device.empty() ? "" : " NPU ", device.c_str());
  }
  if (running) {
    const nlohmann::json links = status.value("links", nlohmann::json::object());
    for (const auto& [name, url] : links.items()) {
      std::printf("%-14s %s\n", name.c_str(), url.get<std::string>().c_str());
    }
  }
  return running ? 0 : 1;
}

Result<int> Report(const LabFlags& flags, bool json) {
  ANXIN_ASSIGN_OR_RETURN(std::string dir, AbsoluteDir(flags.dir));
  ANXIN_ASSIGN_OR_RETURN(nlohmann::json report, ReadJsonFile(dir + "/report.json", "report"));
  ANXIN_ASSIGN_OR_RETURN(std::vector<FaultRow> rows, RowsFromJson(report));
  ANXIN_ASSIGN_OR_RETURN(std::vector<CardAlert> cards, CardsFromJson(report));
  if (json) {
    std::printf("%s\n", ReportToJson(rows, cards).dump(1).c_str());
  } else {
    std::printf("%s", FormatReport(rows, cards).c_str());
    std::printf("(JSON: %s/report.json)\n", dir.c_str());
  }
  return report.value("complete", false) ? 0 : 1;
}

Result<int> Down(const LabFlags& flags, bool json) {
  ANXIN_ASSIGN_OR_RETURN(std::string dir, AbsoluteDir(flags.dir));
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "processes.json", ec)) {
    return NotFound("no lab in " + dir + " (nothing to stop)");
  }
  DownSummary summary;
  ANXIN_TRY(StopLab(dir, &summary));
  if (json) {
    std::printf("%s\n", nlohmann::json({{"dir", dir},
                                        {"stopped", summary.stopped},
                                        {"left", summary.left},
                                        {"ports_in_use", summary.ports_in_use}})
                            .dump()
                            .c_str());
  } else {
    std::printf("lab in %s: stopped %d process(es); %d left; %zu port(s) still in use\n",
                dir.c_str(), summary.stopped, summary.left, summary.ports_in_use.size());
  }
  return summary.left == 0 && summary.ports_in_use.empty() ? 0 : 1;
}

}  // namespace

Result<int> RunLab(const LabFlags& flags, bool json) {
  if (flags.action == "up") return Up(flags, json);
  if (flags.action == "status") return Status(flags, json);
  if (flags.action == "report") return Report(flags, json);
  if (flags.action == "down") return Down(flags, json);
  return InvalidArgument("unknown action '" + flags.action + "' (known: up, status, report, down)");
}

Result<int> RunClusterDemo(int nodes, bool json) {
  char tmpl[] = "/tmp/anxin-lab-demo-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return std::unexpected(ErrnoError(errno, "mkdtemp"));
  LabFlags flags;
  flags.action = "up";
  flags.nodes = nodes;
  flags.dir = tmpl;
  flags.port = 0;
  flags.exit_when_done = true;
  auto rc = Up(flags, json);
  std::error_code ec;
  if (rc) fs::remove_all(tmpl, ec);
  return rc;
}

}  // namespace anxin::lab
