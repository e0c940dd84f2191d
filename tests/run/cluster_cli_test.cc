// `anxin run` over several "nodes": separate `anxin run` processes on this
// machine, each with its own state and checkpoint directory, meeting in a
// real 3-member etcd cluster on loopback, running the sample gloo trainer as
// one world that spans them. Skipped where python3-torch is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "../support/etcd_cluster.h"
#include "../support/run_node.h"
#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/run/journal.h"

namespace anxin::run {
namespace {

using ::anxin::testing::EtcdCluster;
using ::anxin::testing::FixturePath;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::RunNode;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

bool HaveTorch() {
  static const bool have = [] {
    auto out =
        RunCommand({"/usr/bin/python3", "-c", "import torch, torch.distributed"}, {.timeout = 60s});
    return out && out->ok();
  }();
  return have;
}

class ClusterCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
    ASSERT_TRUE(etcd_.Start());
  }

  std::string State(int node) const { return dir_ / ("state-" + std::to_string(node)); }
  std::string Ckpt(int node) const { return dir_ / ("ckpt-" + std::to_string(node)); }

  // `anxin run` of node `node` of an nnodes job, one rank each.
  std::vector<std::string> Args(int node, const std::string& nnodes,
                                std::vector<std::string> job_flags,
                                std::vector<std::string> run_flags = {}) {
    dir_.Mkdir("ckpt-" + std::to_string(node));
    std::vector<std::string> a = {"run",
                                  "--nnodes",
                                  nnodes,
                                  "--node-rank",
                                  std::to_string(node),
                                  "--rdzv-endpoint",
                                  etcd_.Endpoints(),
                                  "--rdzv-id",
                                  job_,
                                  "--master-addr",
                                  "127.0.0.1",
                                  "--nproc-per-node",
                                  "1",
                                  "--state-dir",
                                  State(node),
                                  "--checkpoint-dir",
                                  Ckpt(node),
                                  "--stop-grace",
                                  "1s",
                                  "--rdzv-timeout",
                                  "4s",
                                  "--scenario",
                                  FixturePath("run/fast-reset.yaml")};
    a.insert(a.end(), run_flags.begin(), run_flags.end());
    for (const std::string x : {"--", "/usr/bin/python3", "-u"}) a.push_back(x);
    a.push_back(SourcePath("examples/run/train.py"));
    const std::vector<std::string> job = {"--ckpt-dir", Ckpt(node), "--resume",     "{checkpoint}",
                                          "--steps",    "24",       "--ckpt-every", "5"};
    a.insert(a.end(), job.begin(), job.end());
    a.insert(a.end(), job_flags.begin(), job_flags.end());
    return a;
  }

  std::vector<Incident> Incidents(int node) {
    auto in = ReadIncidents(State(node));
    EXPECT_TRUE(in.has_value());
    return in ? *in : std::vector<Incident>{};
  }

  int StoreGeneration() { return ::anxin::testing::StoredGeneration(etcd_.Endpoints(), job_); }

  // The steps node `node`'s local rank 0 printed.
  static std::vector<int> Steps(const std::string& out) {
    std::vector<int> steps;
    std::regex re(R"(\[rank 0\] step (\d+) loss)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
         ++it) {
      steps.push_back(std::stoi((*it)[1]));
    }
    return steps;
  }

  TempDir dir_{"anxin-cluster"};
  EtcdCluster etcd_{dir_, 3};
  std::string job_ = "train-" + std::to_string(::getpid());
  std::string rdzv_timeout_ = "4s";
};

TEST_F(ClusterCliTest, ARankCrashOnOneNodeRestartsBothFromTheSameCheckpoint) {
  RunNode n0(Args(0, "2", {"--crash-at", "13", "--fault-rank", "1"}));
  RunNode n1(Args(1, "2", {"--crash-at", "13", "--fault-rank", "1"}));
  ASSERT_TRUE(n0.Start() && n1.Start());
  const ExitStatus s0 = n0.Wait();
  const ExitStatus s1 = n1.Wait();
  ASSERT_TRUE(s0.ok()) << n0.Output();
  ASSERT_TRUE(s1.ok()) << n1.Output();
  EXPECT_EQ(StoreGeneration(), 1) << "one fault, one generation";
  for (int node : {0, 1}) {
    auto in = Incidents(node);
    ASSERT_EQ(in.size(), 1u) << "node " << node;
    EXPECT_EQ(in[0].outcome, "recovered");
    EXPECT_THAT(in[0].checkpoint, HasSubstr("iter_0000010"));
    ASSERT_TRUE(in[0].cluster.has_value());
    EXPECT_EQ(in[0].cluster->generation, 1);
    EXPECT_EQ(in[0].cluster->agreed_step, 10);
    EXPECT_EQ(in[0].cluster->nnodes, 2);
    ASSERT_EQ(in[0].cluster->nodes.size(), 2u);
    EXPECT_GE(in[0].cluster->nodes[1].ready_seconds, 0);
  }
  EXPECT_EQ(Incidents(1)[0].fault.fault_class, "process_exit");
  // Node 0's rank survived: it rejoined generation 1 in its process; node
  // 1's died and was started anew.
  EXPECT_EQ(Incidents(0)[0].recovery_path, "in-process");
  EXPECT_EQ(Incidents(1)[0].recovery_path, "relaunch");
  // `anxin incidents` shows the cluster view under node 0's incident.
  auto table = RunAnxin({"incidents", "--state-dir", State(0)});
  ASSERT_EQ(table.exit_code, 0) << table.stderr_text;
  EXPECT_THAT(table.stdout_text, HasSubstr("cluster_restart"));
  EXPECT_THAT(table.stdout_text,
              HasSubstr("  cluster: generation 1 opened by node-1 (process_exit), 2 node(s), "
                        "agreed step 10\n"));
  EXPECT_THAT(table.stdout_text, HasSubstr("newest intact step 10"));
  // Both ranks went on after step 10, to the end.
  for (RunNode* n : {&n0, &n1}) {
    auto steps = Steps(n->Output());
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back(), 24);
    EXPECT_TRUE(std::find(steps.begin(), steps.end(), 11) != steps.end());
  }
}

// "step N loss X" of a node's local rank 0, every time it was printed.
std::multimap<int, std::string> LossesOf(const std::string& out) {
  std::multimap<int, std::string> m;
  std::regex re(R"(\[rank 0\] step (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    m.emplace(std::stoi((*it)[1]), (*it)[2]);
  }
  return m;
}

TEST_F(ClusterCliTest, AWarmSpareTakesACrashedRanksPlaceWhileTheOtherNodeRestartsInProcess) {
  const std::vector<std::string> spare = {"--warm-spares", "1"};
  RunNode n0(Args(0, "2", {"--crash-at", "13", "--fault-rank", "1"}, spare));
  RunNode n1(Args(1, "2", {"--crash-at", "13", "--fault-rank", "1"}, spare));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(n0.Wait().ok()) << n0.Output();
  ASSERT_TRUE(n1.Wait().ok()) << n1.Output();
  EXPECT_EQ(StoreGeneration(), 1);
  auto in0 = Incidents(0);
  auto in1 = Incidents(1);
  ASSERT_EQ(in0.size(), 1u);
  ASSERT_EQ(in1.size(), 1u);
  EXPECT_EQ(in0[0].recovery_path, "in-process");
  EXPECT_EQ(in1[0].recovery_path, "spare");
  EXPECT_EQ(in1[0].outcome, "recovered");
  ASSERT_TRUE(in1[0].cluster.has_value());
  EXPECT_EQ(in1[0].cluster->agreed_step, 10);
  // Steps 11 and 12 ran twice, before the crash and after the resume: the
  // same losses both times, and the job went on to the end.
  const auto losses = LossesOf(n0.Output());
  for (int step : {11, 12}) {
    auto [lo, hi] = losses.equal_range(step);
    ASSERT_EQ(std::distance(lo, hi), 2) << "step " << step << "\n" << n0.Output();
    EXPECT_EQ(lo->second, std::next(lo)->second) << "step " << step;
  }
  EXPECT_EQ(losses.rbegin()->first, 24);
  std::printf("two nodes: node 1 recovered in %.3f s with a spare, node 0 in %.3f s in-process\n",
              in1[0].time_to_recovery_seconds, in0[0].time_to_recovery_seconds);
}

TEST_F(ClusterCliTest, AHangOnOneNodeIsOneGenerationForBoth) {
  RunNode n0(Args(0, "2", {"--hang-at", "8"}, {"--hang-timeout", "5s"}));
  RunNode n1(Args(1, "2", {"--hang-at", "8"}, {"--hang-timeout", "5s"}));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(n0.Wait().ok()) << n0.Output();
  ASSERT_TRUE(n1.Wait().ok()) << n1.Output();
  EXPECT_EQ(StoreGeneration(), 1) << "nodes detecting at once open one generation";
  for (int node : {0, 1}) {
    auto in = Incidents(node);
    ASSERT_EQ(in.size(), 1u) << "node " << node;
    ASSERT_TRUE(in[0].cluster.has_value());
    EXPECT_EQ(in[0].cluster->generation, 1);
    EXPECT_EQ(in[0].cluster->agreed_step, 5);
    // Every rank was alive: both nodes restarted theirs in-process.
    EXPECT_EQ(in[0].recovery_path, "in-process") << "node " << node;
  }
}

TEST_F(ClusterCliTest, ACorruptNewestCheckpointOnOneNodeMakesAllResumeFromTheOlderStep) {
  // Rank 0 (node 0) corrupts its node's iter_0000010 just before rank 1
  // (node 1) crashes at step 13: node 1 still holds 10 intact, node 0 not.
  RunNode n0(Args(0, "2", {"--crash-at", "13", "--fault-rank", "1", "--corrupt-newest"}));
  RunNode n1(Args(1, "2", {"--crash-at", "13", "--fault-rank", "1", "--corrupt-newest"}));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(n0.Wait().ok()) << n0.Output();
  ASSERT_TRUE(n1.Wait().ok()) << n1.Output();
  for (int node : {0, 1}) {
    auto in = Incidents(node);
    ASSERT_EQ(in.size(), 1u);
    ASSERT_TRUE(in[0].cluster.has_value());
    EXPECT_EQ(in[0].cluster->agreed_step, 5);
    EXPECT_THAT(in[0].checkpoint, HasSubstr("iter_0000005")) << "node " << node;
    EXPECT_EQ(in[0].cluster->nodes[0].newest_verified, 5);
    EXPECT_EQ(in[0].cluster->nodes[1].newest_verified, 10);
  }
}

TEST_F(ClusterCliTest, AKilledSupervisorRejoinsAndTheJobFinishes) {
  rdzv_timeout_ = "30s";  // node 0 waits for node 1 to come back
  RunNode n0(Args(0, "2", {"--steps", "40"}));
  auto n1 = std::make_unique<RunNode>(Args(1, "2", {"--steps", "40"}));
  ASSERT_TRUE(n0.Start() && n1->Start());
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("step 7 loss"); }, 60s)) << n0.Output();
  n1->Kill9();
  RunNode again(Args(1, "2", {"--steps", "40"}));  // same state dir: it resumes
  ASSERT_TRUE(again.Start());
  ASSERT_TRUE(n0.Wait().ok()) << n0.Output();
  ASSERT_TRUE(again.Wait().ok()) << again.Output();
  EXPECT_THAT(again.Output(), HasSubstr("resuming the job"));
  auto in = Incidents(0);
  ASSERT_GE(in.size(), 1u);
  ASSERT_TRUE(in.back().cluster.has_value());
  EXPECT_EQ(in.back().cluster->nnodes, 2) << "the restarted node is back in the world";
  EXPECT_EQ(in.back().outcome, "recovered");
}

TEST_F(ClusterCliTest, ANodeThatNeverComesBackShrinksTheJobThenBelowMinStopsIt) {
  // The escalation playbook pages a webhook when the job stops below MIN.
  std::mutex mu;
  std::vector<std::string> pages;
  HttpServer hook;
  hook.Post("/hook", [&](const HttpRequest& req) {
    std::lock_guard lock(mu);
    pages.push_back(req.body);
    return HttpResponse::Text(200, "ok\n");
  });
  ASSERT_TRUE(hook.Start());
  dir_.Write("page.yaml",
             "playbooks:\n  page:\n    - {step: stop_ranks}\n    - {step: notify, url: \"http://" +
                 hook.address() + "/hook\", timeout: 5s}\nfaults:\n  escalation: page\n");
  const std::vector<std::string> page = {"--playbook", dir_ / "page.yaml"};
  const std::vector<std::string> job = {"--steps", "100", "--step-time", "0.1"};
  RunNode n0(Args(0, "2:3", job, page));
  RunNode n1(Args(1, "2:3", job, page));
  RunNode n2(Args(2, "2:3", job, page));
  ASSERT_TRUE(n0.Start() && n1.Start() && n2.Start());
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("step 6 loss"); }, 60s)) << n0.Output();
  n2.Kill9();
  // Nodes 0 and 1 relaunch as a world of two.
  ASSERT_TRUE(WaitFor([&] { return n0.Saw("node rank 0 of 2"); }, 40s)) << n0.Output();
  ASSERT_TRUE(WaitFor(
      [&] { return Incidents(0).size() == 1 && Incidents(0)[0].outcome == "recovered"; }, 40s))
      << n0.Output();
  auto in = Incidents(0);
  ASSERT_TRUE(in[0].cluster.has_value());
  EXPECT_EQ(in[0].cluster->nnodes, 2);
  n1.Kill9();
  const ExitStatus s0 = n0.Wait();
  EXPECT_EQ(s0.exit_code, 1) << n0.Output();
  EXPECT_THAT(n0.Output(), HasSubstr("the job needs at least 2"));
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(pages.size(), 1u) << "one page from the node that stopped";
    EXPECT_THAT(pages[0], HasSubstr("the job needs at least 2"));
    EXPECT_THAT(pages[0], HasSubstr("\"alertname\":\"AnxinRun"));
  }
  in = Incidents(0);
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[1].outcome, "gave_up");
  ASSERT_FALSE(in[1].steps.empty());
  EXPECT_EQ(in[1].steps.back().name, "notify");
  EXPECT_EQ(in[1].steps.back().result, "ok") << in[1].steps.back().detail;
}

TEST_F(ClusterCliTest, TheEtcdLeaderKilledMidRecoveryDoesNotStopIt) {
  RunNode n0(Args(0, "2", {"--crash-at", "13", "--fault-rank", "1"}));
  RunNode n1(Args(1, "2", {"--crash-at", "13", "--fault-rank", "1"}));
  ASSERT_TRUE(n0.Start() && n1.Start());
  ASSERT_TRUE(WaitFor([&] { return n1.Saw("crashing at step 13"); }, 60s)) << n1.Output();
  const int leader = etcd_.Leader();
  ASSERT_GE(leader, 0);
  etcd_.Kill(static_cast<size_t>(leader));
  ASSERT_TRUE(n0.Wait().ok()) << n0.Output();
  ASSERT_TRUE(n1.Wait().ok()) << n1.Output();
  auto in = Incidents(0);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "recovered");
  ASSERT_TRUE(in[0].cluster.has_value());
  EXPECT_EQ(in[0].cluster->generation, 1);
}

TEST_F(ClusterCliTest, AStoreThatIsNotThereIsExit3NamingIt) {
  auto out = RunAnxin({"run", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "j",
                       "--", "/bin/true"},
                      {.timeout = 30s});
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("127.0.0.1:1"));
  auto bad = RunAnxin({"run", "--nnodes", "2", "--", "/bin/true"}, {.timeout = 30s});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("--rdzv-endpoint"));
}

}  // namespace
}  // namespace anxin::run
