// `anxin run` nodes (separate processes) on a real 3-member etcd cluster,
// each node reaching every member through a fault-injecting TCP relay of its
// own (tests/support/tcp_relay.h): a node cut off from etcd, a cut that heals
// in time, the etcd leader isolated, a supervisor stopped past its lease.
// The job is a light one (python3, no torch) whose ranks print a timestamped
// line per step with their generation, so every case checks the fencing
// rule from the ranks' own clocks: no rank of a node outside the current
// generation steps after the other nodes have relaunched without it.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>

#include "../support/etcd_cluster.h"
#include "../support/run_node.h"
#include "../support/tcp_relay.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/run/journal.h"

namespace anxin::run {
namespace {

using ::anxin::testing::EtcdCluster;
using ::anxin::testing::FixturePath;
using ::anxin::testing::RunNode;
using ::anxin::testing::TcpRelay;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// The job: "start gen G t=T", then STEPS x "step N gen G t=T", DT apart;
// then END: exit0, hang, or exit3 (a second later: a failing teardown).
constexpr const char* kJob = R"(import os, sys, time
steps, dt, end = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
gen = os.environ.get("ANXIN_RUN_ATTEMPT", "-1")
print(f"start gen {gen} t={time.time():.6f}", flush=True)
for s in range(1, steps + 1):
    time.sleep(dt)
    print(f"step {s} gen {gen} t={time.time():.6f}", flush=True)
if end == "hang":
    time.sleep(3600)
if end == "exit3":
    time.sleep(1)
sys.exit(3 if end == "exit3" else 0)
)";

struct StepLine {
  bool start = false;
  int step = 0;
  int gen = -1;
  double t = 0;
};

std::vector<StepLine> StepLines(const std::string& out) {
  std::vector<StepLine> lines;
  std::regex re(R"(\[rank 0\] (start|step (\d+)) gen (-?\d+) t=([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    StepLine l;
    l.start = (*it)[1] == "start";
    l.step = l.start ? 0 : std::stoi((*it)[2]);
    l.gen = std::stoi((*it)[3]);
    l.t = std::stod((*it)[4]);
    lines.push_back(l);
  }
  return lines;
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One node's `anxin run`, its output kept, and its rank's step lines.
class Node : public RunNode {
 public:
  using RunNode::RunNode;
  std::vector<StepLine> Steps() { return StepLines(Output()); }
  // A step line of generation >= gen exists.
  bool Stepped(int gen) {
    for (const StepLine& l : Steps()) {
      if (!l.start && l.gen >= gen) return true;
    }
    return false;
  }
};

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start());
    job_path_ = dir_.Write("steps.py", kJob);
  }

  // Node `node`'s relays to the etcd members, made on first use.
  std::vector<std::unique_ptr<TcpRelay>>& Relays(int node) {
    auto& r = relays_[node];
    if (r.empty()) {
      for (size_t m = 0; m < etcd_.size(); ++m) {
        const std::string ep = etcd_.Endpoint(m);
        r.push_back(
            std::make_unique<TcpRelay>("127.0.0.1", std::stoi(ep.substr(ep.rfind(':') + 1))));
        EXPECT_TRUE(r.back()->Start());
      }
    }
    return r;
  }
  void Cut(int node) {
    for (auto& r : Relays(node)) r->Stall();
  }
  void Heal(int node) {
    for (auto& r : Relays(node)) r->Pass();
  }

  std::string State(int node) const { return dir_ / ("state-" + std::to_string(node)); }

  // `anxin run` of node `node`, one rank of the light job, through its relays.
  std::vector<std::string> Args(int node, const std::string& nnodes, int steps, double dt,
                                const std::string& end = "exit0",
                                std::vector<std::string> run_flags = {}) {
    std::string endpoints;
    for (auto& r : Relays(node)) endpoints += (endpoints.empty() ? "" : ",") + r->Endpoint();
    std::vector<std::string> a = {"run",
                                  "--nnodes",
                                  nnodes,
                                  "--node-rank",
                                  std::to_string(node),
                                  "--rdzv-endpoint",
                                  endpoints,
                                  "--rdzv-id",
                                  job_,
                                  "--master-addr",
                                  "127.0.0.1",
                                  "--nproc-per-node",
                                  "1",
                                  "--state-dir",
                                  State(node),
                                  "--stop-grace",
                                  "1s",
                                  "--rdzv-timeout",
                                  rdzv_timeout_,
                                  "--scenario",
                                  FixturePath("run/fast-reset.yaml")};
    a.insert(a.end(), run_flags.begin(), run_flags.end());
    for (const std::string& x :
         {std::string("--"), std::string("/usr/bin/python3"), std::string("-u"), job_path_,
          std::to_string(steps), std::to_string(dt), end}) {
      a.push_back(x);
    }
    return a;
  }

  std::vector<Incident> Incidents(int node) {
    auto in = ReadIncidents(State(node));
    return in ? *in : std::vector<Incident>{};
  }

  int StoreGeneration() { return ::anxin::testing::StoredGeneration(etcd_.Endpoints(), job_); }

  // The fencing rule, from the ranks' own timestamps: the first time a rank
  // of `others` started in a generation after `old_gen`, and every step of
  // generation <= old_gen that `node` printed came before it.
  void ExpectNoStaleStep(Node& node, const std::vector<Node*>& others, int old_gen) {
    double relaunched = 0;
    for (Node* o : others) {
      for (const StepLine& l : o->Steps()) {
        if (l.start && l.gen > old_gen && (relaunched == 0 || l.t < relaunched)) relaunched = l.t;
      }
    }
    ASSERT_GT(relaunched, 0) << "the other nodes never relaunched after generation " << old_gen;
    double last_stale = 0;
    for (const StepLine& l : node.Steps()) {
      if (!l.start && l.gen <= old_gen) last_stale = std::max(last_stale, l.t);
    }
    ASSERT_GT(last_stale, 0) << "the node never stepped in generation " << old_gen;
    EXPECT_LT(last_stale, relaunched)
        << "a rank of generation " << old_gen << " stepped " << last_stale - relaunched
        << " s after the others relaunched:\n"
        << node.Output();
    std::printf(
        "generation %d: the cut-off node's last step came %.2f s before the others "
        "relaunched\n",
        old_gen, relaunched - last_stale);
  }

  TempDir dir_{"anxin-partition"};
  EtcdCluster etcd_{dir_, 3};
  std::map<int, std::vector<std::unique_ptr<TcpRelay>>> relays_;
  std::string job_ = "part-" + std::to_string(::getpid());
  std::string job_path_;
  std::string rdzv_timeout_ = "4s";
};

TEST_F(PartitionTest, AMinorityNodeCutOffFencesItselfAndRejoinsWhenHealed) {
  Node n0(Args(0, "2:3", 160, 0.05));
  Node n1(Args(1, "2:3", 160, 0.05));
  Node n2(Args(2, "2:3", 160, 0.05));
  ASSERT_TRUE(n0.Start() && n1.Start() && n2.Start());
  ASSERT_TRUE(WaitFor([&] { return n2.Saw("step 10 gen 0"); }, 40s)) << n2.Output();
  Cut(2);
  // Node 2 fences itself before its lease expires; the others count it lost,
  // wait out the barrier and go on as a world of two.
  ASSERT_TRUE(WaitFor([&] { return n2.Saw("fenced:"); }, 15s)) << n2.Output();
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("node rank 0 of 2") && n0.Stepped(1); }, 30s))
      << n0.Output();
  Heal(2);
  // Node 2 comes back through a new generation that takes it in.
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("node rank 0 of 3"); }, 30s)) << n2.Output();
  EXPECT_TRUE(n0.Wait().ok()) << n0.Output();
  EXPECT_TRUE(n1.Wait().ok()) << n1.Output();
  EXPECT_TRUE(n2.Wait().ok()) << n2.Output();
  EXPECT_THAT(n2.Output(), HasSubstr("lease at etcd"));
  EXPECT_THAT(n2.Output(), HasSubstr("opened generation 2: node node-2 rejoins the job"));
  EXPECT_THAT(n2.Output(), Not(HasSubstr("etcd answers again; watching generation 0")));
  ExpectNoStaleStep(n2, {&n0, &n1}, 0);
  EXPECT_EQ(StoreGeneration(), 2);
  auto in = Incidents(2);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "lease_lost");
  EXPECT_EQ(in[0].outcome, "recovered");
  ASSERT_FALSE(in[0].steps.empty());
  EXPECT_EQ(in[0].steps[0].name, "stop_ranks");
  EXPECT_THAT(in[0].steps[0].detail, HasSubstr("fenced: SIGKILL"));
  // The frozen ranks are killed at once, not after a wait on the store.
  EXPECT_LT(std::chrono::duration<double>(in[0].steps[0].start - in[0].fault.wall).count(), 1.0);
  // Node 2's last world was the whole job again.
  ASSERT_TRUE(in[0].cluster.has_value());
  EXPECT_EQ(in[0].cluster->nnodes, 3);
  EXPECT_EQ(in[0].cluster->generation, 2);
}

TEST_F(PartitionTest, ACutThatHealsBeforeTheFenceTimeRestartsNothing) {
  Node n0(Args(0, "2", 100, 0.05));
  Node n1(Args(1, "2", 100, 0.05));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(WaitFor([&] { return n1.Saw("step 10 gen 0"); }, 40s)) << n1.Output();
  const double cut = WallNow();
  Cut(1);
  std::this_thread::sleep_for(1500ms);
  Heal(1);
  const double healed = WallNow();
  EXPECT_TRUE(n0.Wait().ok()) << n0.Output();
  EXPECT_TRUE(n1.Wait().ok()) << n1.Output();
  EXPECT_THAT(n1.Output(), Not(HasSubstr("fenced")));
  EXPECT_EQ(StoreGeneration(), 0);
  EXPECT_TRUE(Incidents(0).empty());
  EXPECT_TRUE(Incidents(1).empty());
  // Node 1's rank stepped on through the cut, in generation 0, to the end.
  int during = 0;
  for (const StepLine& l : n1.Steps()) {
    EXPECT_EQ(l.gen, 0);
    during += !l.start && l.t > cut && l.t < healed;
  }
  EXPECT_GT(during, 10);
  EXPECT_EQ(n1.Steps().back().step, 100);
}

// The pid of etcd member i of this test's cluster (its data directory is
// this test's).
pid_t EtcdMemberPid(const TempDir& dir, size_t i) {
  const std::string needle = dir.path() + "/etcd-m" + std::to_string(i);
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string cmd =
        ::anxin::testing::ReadTextFile("/proc/" + std::string(e->d_name) + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find("--data-dir " + needle + " ") != std::string::npos) found = pid;
  }
  if (d) ::closedir(d);
  return found;
}

TEST_F(PartitionTest, TheEtcdLeaderIsolatedTheJobGoesOn) {
  Node n0(Args(0, "2", 160, 0.05));
  Node n1(Args(1, "2", 160, 0.05));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("step 10 gen 0") && n1.Saw("step 10 gen 0"); }, 40s));
  const int leader = etcd_.Leader();
  ASSERT_GE(leader, 0);
  // Every node's route to the leader goes dark, and the leader itself stops
  // answering its peers (frozen): the other two elect a new leader.
  for (int node : {0, 1}) Relays(node)[static_cast<size_t>(leader)]->Stall();
  const pid_t pid = EtcdMemberPid(dir_, static_cast<size_t>(leader));
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const double cut = WallNow();
  std::this_thread::sleep_for(7s);  // longer than the lease TTL (5 s)
  const double healed = WallNow();
  ::kill(pid, SIGCONT);
  for (int node : {0, 1}) Relays(node)[static_cast<size_t>(leader)]->Pass();
  EXPECT_TRUE(n0.Wait().ok()) << n0.Output();
  EXPECT_TRUE(n1.Wait().ok()) << n1.Output();
  // While the leader was away nothing restarted: every step of the cut is
  // generation 0, and there were plenty of them.
  double first_new = 0;  // the first start of a later generation, if any
  for (Node* n : {&n0, &n1}) {
    int during = 0;
    for (const StepLine& l : n->Steps()) {
      if (l.t < healed) {
        EXPECT_EQ(l.gen, 0) << n->Output();
      }
      during += !l.start && l.gen == 0 && l.t > cut && l.t < healed;
      if (l.start && l.gen > 0 && (first_new == 0 || l.t < first_new)) first_new = l.t;
    }
    EXPECT_GT(during, 50) << "the ranks stepped on while the leader was away";
  }
  if (first_new == 0) {
    EXPECT_EQ(StoreGeneration(), 0);
    EXPECT_TRUE(Incidents(0).empty());
    EXPECT_TRUE(Incidents(1).empty());
    return;
  }
  // etcd before the fix of etcd-io/etcd#15247 (Debian 12 ships 3.4.23): a
  // leader that wakes from a stall may revoke, before it learns it was
  // deposed, the leases the new leader kept renewed. The nodes then see their
  // leases gone, fence and rejoin; the rule still holds: no generation-0 step
  // after the first start of the next generation.
  std::printf(
      "the woken etcd leader revoked the nodes' leases: the job went on in a new "
      "generation\n");
  for (Node* n : {&n0, &n1}) {
    for (const StepLine& l : n->Steps()) {
      if (!l.start && l.gen == 0) {
        EXPECT_LT(l.t, first_new) << n->Output();
      }
    }
  }
  EXPECT_GE(StoreGeneration(), 1);
}

TEST_F(PartitionTest, ASupervisorStoppedPastItsLeaseFindsItsRanksFencedAndRejoins) {
  Node n0(Args(0, "2:3", 160, 0.05));
  Node n1(Args(1, "2:3", 160, 0.05));
  Node n2(Args(2, "2:3", 160, 0.05));
  ASSERT_TRUE(n0.Start() && n1.Start() && n2.Start());
  ASSERT_TRUE(WaitFor([&] { return n2.Saw("step 10 gen 0"); }, 40s)) << n2.Output();
  n2.Signal(SIGSTOP);  // its ranks run on; only its fence guard can stop them
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("node rank 0 of 2") && n0.Stepped(1); }, 30s))
      << n0.Output();
  n2.Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("node rank 0 of 3"); }, 30s)) << n2.Output();
  EXPECT_TRUE(n0.Wait().ok()) << n0.Output();
  EXPECT_TRUE(n1.Wait().ok()) << n1.Output();
  EXPECT_TRUE(n2.Wait().ok()) << n2.Output();
  EXPECT_THAT(n2.Output(), HasSubstr("this process was stalled"));
  const std::string out = n2.Output();
  if (size_t at = out.find("(this process was stalled"); at != std::string::npos) {
    std::printf("node 2: %s\n", out.substr(at, out.find('\n', at) - at).c_str());
  }
  ExpectNoStaleStep(n2, {&n0, &n1}, 0);
  auto in = Incidents(2);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "lease_lost");
  EXPECT_EQ(in[0].outcome, "recovered");
}

// Two nodes finish; the third faults after its own last step. It ends at
// once (status 0: the job is done) saying so, instead of waiting out a
// barrier nobody else will reach and restarting from scratch.
class PeersDoneTest : public PartitionTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(PeersDoneTest, ANodeThatFaultsAfterItsPeersFinishedEndsAtOnce) {
  rdzv_timeout_ = "30s";
  Node n0(Args(0, "3", 20, 0.05));
  Node n1(Args(1, "3", 20, 0.05));
  Node n2(Args(2, "3", 20, 0.05, GetParam(), {"--hang-timeout", "2s"}));
  ASSERT_TRUE(n0.Start() && n1.Start() && n2.Start());
  EXPECT_TRUE(n0.Wait().ok()) << n0.Output();
  EXPECT_TRUE(n1.Wait().ok()) << n1.Output();
  const auto peers_done = std::chrono::steady_clock::now();
  const ExitStatus s2 = n2.Wait(25s);
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - peers_done).count();
  EXPECT_TRUE(s2.ok()) << s2.Describe() << "\n" << n2.Output();
  EXPECT_LT(after, 10) << "no 30 s barrier wait";
  EXPECT_THAT(n2.Output(),
              HasSubstr("the job finished on the other nodes (node-0, node-1 finished generation "
                        "0); this node's ranks reached step 20, then: "));
  EXPECT_THAT(n2.Output(),
              HasSubstr(GetParam() == "hang" ? "rank 0 still running" : "rank 0 exited 3"));
  EXPECT_THAT(n2.Output(), Not(HasSubstr("reached the barrier")));
  EXPECT_THAT(n2.Output(), Not(HasSubstr("starting from scratch")));
  EXPECT_EQ(StoreGeneration(), 0) << "no generation was opened";
  auto in = Incidents(2);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "peers_finished");
  EXPECT_EQ(in[0].fault.fault_class, GetParam() == "hang" ? "hang" : "process_exit");
  std::printf("node 2 (%s after its last step) ended %.2f s after its peers finished\n",
              GetParam().c_str(), after);
}

INSTANTIATE_TEST_SUITE_P(HangOrExit, PeersDoneTest, ::testing::Values("hang", "exit3"));

}  // namespace
}  // namespace anxin::run
