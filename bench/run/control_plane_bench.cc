// The control plane of multi-node `anxin run` at scale: N node
// coordinators (coord::EtcdCoordinator, the code each `anxin run`
// supervisor runs) in this one process, each with its own lease, watch and
// HTTP connections, against the etcd cluster at ENDPOINTS. It measures
//   - the first barrier: every node joins and the plan is read by all;
//   - idle: etcd calls per node per second while the job runs, split into
//     lease renewals and everything else, from the members' own /metrics;
//   - one fault on one node: time until every node has the next
//     generation's plan (its relaunch may start), and the etcd calls and
//     bytes that generation cost;
//   - this process's CPU time and memory per node while idle.
// MODE watch is anxin's; MODE poll is the peer: the same coordinators
// reading the job's keys every 50 ms instead of watching (how supervisors
// worked before). Every node must agree on the same generation and step;
// anything else is an error (exit 1), never a figure.
//
//   control_plane_bench ENDPOINTS NODES MODE IDLE_SECONDS [TTL (5 s)]
//   -> one JSON object on stdout
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/strings.h"
#include "anxin/coord/etcd_client.h"
#include "anxin/coord/etcd_coordinator.h"

namespace {

using anxin::coord::ClusterOptions;
using anxin::coord::EtcdClient;
using anxin::coord::EtcdCoordinator;
using anxin::coord::EtcdServerCounts;
using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU seconds of the processes in ANXIN_BENCH_CPU_PIDS (comma-separated:
// the etcd members the driver started), from /proc/PID/stat; 0 without.
double OthersCpuSeconds() {
  const char* pids = std::getenv("ANXIN_BENCH_CPU_PIDS");
  if (pids == nullptr) return 0;
  double total = 0;
  for (std::string_view pid : anxin::Split(pids, ',')) {
    std::ifstream in("/proc/" + std::string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    // After "pid (comm)": state is field 3; utime and stime are 14 and 15.
    const std::string rest = stat.substr(close + 2);
    const std::vector<std::string_view> f = anxin::Split(rest, ' ');
    if (f.size() < 13) continue;
    const auto utime = anxin::ParseInt(f[11]);
    const auto stime = anxin::ParseInt(f[12]);
    if (!utime || !stime) continue;
    total += static_cast<double>(*utime + *stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return total;
}

double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

struct Node {
  std::unique_ptr<EtcdCoordinator> c;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<anxin::run::Fault> faults;
  SteadyClock::time_point fault_arrived{};
  anxin::run::RestartState state;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "control_plane_bench: %s\n", what.c_str());
  std::exit(1);
}

nlohmann::json CountsJson(const EtcdServerCounts& d, int nodes, double seconds) {
  nlohmann::json by_method = nlohmann::json::object();
  for (const auto& [m, n] : d.started) {
    if (n > 0) by_method[m] = n;
  }
  const auto renew = d.started.contains("LeaseKeepAlive") ? d.started.at("LeaseKeepAlive") : 0.0;
  nlohmann::json j = {{"calls", d.Total()},         {"renewals", renew},
                      {"other", d.Total() - renew}, {"received_bytes", d.received_bytes},
                      {"sent_bytes", d.sent_bytes}, {"by_method", by_method}};
  if (seconds > 0) {
    j["per_node_per_s"] = d.Total() / nodes / seconds;
    j["other_per_node_per_s"] = (d.Total() - renew) / nodes / seconds;
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr,
                 "usage: control_plane_bench ENDPOINTS NODES watch|poll IDLE_SECONDS [TTL]\n");
    return 2;
  }
  const std::string endpoints = argv[1];
  const int n = std::atoi(argv[2]);
  const std::string mode = argv[3];
  const double idle = std::atof(argv[4]);
  const int ttl = argc == 6 ? std::atoi(argv[5]) : 5;  // anxin run's lease TTL
  if (n < 2 || (mode != "watch" && mode != "poll") || idle <= 0 || ttl < 2) {
    std::fprintf(stderr,
                 "control_plane_bench: NODES >= 2, MODE watch or poll, IDLE_SECONDS > 0, "
                 "TTL >= 2\n");
    return 2;
  }
  // The coordinators' log lines go to stderr, warnings only: stdout is the result.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench"));
  spdlog::set_level(spdlog::level::warn);
  auto counter = EtcdClient::Create(endpoints);
  if (!counter) Fail(counter.error().message());
  const std::string job = "cp-" + std::to_string(::getpid()) + "-" + mode + "-" + std::to_string(n);
  const double rss0 = RssMiB();

  // The nodes, created and started one after another as supervisors join.
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < n; ++i) {
    ClusterOptions o;
    o.endpoints = endpoints;
    o.job = job;
    o.min_nodes = n;
    o.max_nodes = n;
    o.node_rank = i;
    o.address = "127.0.0.1";
    o.lease_ttl_seconds = ttl;
    o.join_timeout_seconds = 600;
    o.barrier_timeout_seconds = 60;
    o.watch = mode == "watch";
    if (!o.watch) o.poll_seconds = 0.05;
    o.max_restarts = 10;
    auto node = std::make_unique<Node>();
    auto c = EtcdCoordinator::Create(std::move(o));
    if (!c) Fail("node " + std::to_string(i) + ": " + c.error().message());
    node->c = std::move(*c);
    Node* raw = node.get();
    auto st = node->c->Start([raw](anxin::run::Fault f) {
      std::lock_guard lock(raw->mu);
      if (raw->faults.empty()) raw->fault_arrived = SteadyClock::now();
      raw->faults.push_back(std::move(f));
      raw->cv.notify_all();
    });
    if (!st) Fail("node " + std::to_string(i) + ": " + st.error().message());
    nodes.push_back(std::move(node));
  }

  // Each node's thread: the barrier, then (phase 2) the fault and the next
  // barrier, the way a supervisor goes through them.
  std::vector<double> agreed_at(n, -1);   // seconds from the fault
  std::vector<double> learned_at(n, -1);  // the fault reached the node
  std::vector<double> entered_at(n, -1);  // its barrier began (OnFault returned)
  std::vector<int> generation(n, -1);
  std::vector<int64_t> step(n, -2);
  std::atomic<int> joined{0};
  std::mutex phase_mu;
  std::condition_variable phase_cv;
  bool fault_now = false;
  SteadyClock::time_point fault_time;
  double fault_wall = 0;  // the same, as the wall time the plan's closed_time uses
  const auto start = SteadyClock::now();
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  anxin::run::CheckpointScan scan;
  anxin::run::Checkpoint ck;
  ck.step = 100;
  ck.name = "iter_100";
  ck.path = "/ckpt/iter_100";
  ck.valid = true;
  scan.checkpoints.push_back(ck);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      Node& node = *nodes[i];
      (void)node.c->AgreeCheckpoint(scan);
      if (!node.c->Agreed() || node.c->Agreed()->generation != 0) failed = true;
      ++joined;
      phase_cv.notify_all();
      {
        std::unique_lock lock(phase_mu);
        phase_cv.wait(lock, [&] { return fault_now; });
      }
      anxin::run::Fault f;
      if (i == 0) {
        f.detector = "exit";
        f.fault_class = "process_exit";
        f.summary = "rank 0 exited 1";
        f.seen = anxin::RealClock().Now();
        f.wall = f.seen;
      } else {
        std::unique_lock lock(node.mu);
        if (!node.cv.wait_for(lock, std::chrono::seconds(120),
                              [&] { return !node.faults.empty(); })) {
          failed = true;
          return;
        }
        f = node.faults.front();
        learned_at[i] = Seconds(node.fault_arrived - fault_time);
      }
      if (i == 0) learned_at[i] = 0;
      const auto d = node.c->OnFault(f, node.state);
      entered_at[i] = Seconds(SteadyClock::now() - fault_time);
      if (d.verdict != anxin::run::Coordinator::Verdict::kRestart) failed = true;
      const anxin::run::Checkpoint* agreed = node.c->AgreeCheckpoint(scan);
      agreed_at[i] = Seconds(SteadyClock::now() - fault_time);
      generation[i] = node.c->Agreed() ? node.c->Agreed()->generation : -1;
      step[i] = agreed == nullptr ? -1 : agreed->step;
    });
  }
  {
    std::unique_lock lock(phase_mu);
    phase_cv.wait(lock, [&] { return joined == n || failed; });
  }
  if (failed) Fail("a node did not agree on generation 0");
  const double first_barrier = Seconds(SteadyClock::now() - start);
  std::fprintf(stderr, "%d nodes (%s): first barrier %.2f s; idle %.0f s...\n", n, mode.c_str(),
               first_barrier, idle);

  // Idle: let the watches settle, then count.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto c0 = counter->ServerCounts();
  if (!c0) Fail(c0.error().message());
  const double cpu0 = CpuSeconds();
  const auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle));
  auto c1 = counter->ServerCounts();
  if (!c1) Fail(c1.error().message());
  const double idle_wall = Seconds(SteadyClock::now() - t0);
  const double idle_cpu = CpuSeconds() - cpu0;
  const double rss = RssMiB();

  // The fault.
  {
    std::lock_guard lock(phase_mu);
    fault_now = true;
    fault_time = SteadyClock::now();
    fault_wall =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  const double fault_cpu0 = CpuSeconds();
  const double fault_others0 = OthersCpuSeconds();
  phase_cv.notify_all();
  for (auto& t : threads) t.join();
  const double fault_cpu = CpuSeconds() - fault_cpu0;
  const double fault_others = OthersCpuSeconds() - fault_others0;
  auto c2 = counter->ServerCounts();
  if (!c2) Fail(c2.error().message());
  if (failed) Fail("a node did not restart after the fault");
  for (int i = 0; i < n; ++i) {
    if (generation[i] != 1 || step[i] != 100) {
      Fail("node " + std::to_string(i) + " agreed on generation " + std::to_string(generation[i]) +
           " step " + std::to_string(step[i]) + ", not generation 1 step 100");
    }
  }
  std::vector<double> sorted = agreed_at;
  std::sort(sorted.begin(), sorted.end());
  auto last = [](std::vector<double> v) { return *std::max_element(v.begin(), v.end()); };
  // When the lead wrote the plan: the rest is its way to every node.
  auto plan = counter->Get("/anxin/run/" + job + "/gen/1/plan");
  if (!plan || plan->kvs.empty()) Fail("no plan for generation 1");
  const double closed =
      nlohmann::json::parse(plan->kvs[0].value).value("closed_time", 0.0) - fault_wall;
  for (auto& node : nodes) node->c->Finish(0);
  nlohmann::json out = {
      {"nodes", n},
      {"mode", mode},
      {"lease_ttl_s", ttl},
      {"first_barrier_s", first_barrier},
      {"idle_s", idle_wall},
      {"idle", CountsJson(c1->Since(*c0), n, idle_wall)},
      {"fault_to_all_relaunched_s", sorted.back()},
      {"fault_to_median_relaunched_s", sorted[sorted.size() / 2]},
      // Where the time went: the last node to learn of the fault (the
      // generation's change reached its watch), to enter the barrier.
      {"fault_to_all_learned_s", last(learned_at)},
      {"fault_to_all_in_barrier_s", last(entered_at)},
      {"fault_to_plan_written_s", closed},
      // CPU spent from the fault until every node agreed: these coordinators'
      // and the etcd members' (against 2 x the wall time on 2 cores).
      {"fault_cpu_s", fault_cpu},
      {"fault_etcd_cpu_s", fault_others},
      {"generation", CountsJson(c2->Since(*c1), n, 0)},
      {"cpu_ms_per_node_per_s", idle_cpu * 1000.0 / n / idle_wall},
      {"rss_mib_per_node", (rss - rss0) / n},
  };
  out["generation"]["calls_per_node"] = out["generation"]["calls"].get<double>() / n;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
