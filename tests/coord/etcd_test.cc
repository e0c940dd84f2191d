// The etcd client and the multi-node coordination protocol against a real
// 3-member etcd cluster on loopback: the supervisors of the "nodes" are
// EtcdCoordinator objects on threads of this test, each with its own lease
// and watcher, talking to the store the way `anxin run` does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "../support/etcd_cluster.h"
#include "anxin/base/clock.h"
#include "anxin/base/http.h"
#include "anxin/base/testing.h"
#include "anxin/coord/etcd_client.h"
#include "anxin/coord/etcd_coordinator.h"

namespace anxin::coord {
namespace {

using ::anxin::testing::EtcdCluster;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

run::CheckpointScan Scan(std::vector<int64_t> valid, std::vector<int64_t> corrupt = {}) {
  run::CheckpointScan s;
  std::vector<std::pair<int64_t, bool>> all;
  for (int64_t v : valid) all.emplace_back(v, true);
  for (int64_t v : corrupt) all.emplace_back(v, false);
  std::sort(all.begin(), all.end(), [](auto a, auto b) { return a.first > b.first; });
  for (auto [step, ok] : all) {
    run::Checkpoint c;
    c.step = step;
    c.name = "iter_" + std::to_string(step);
    c.path = "/ckpt/" + c.name;
    c.valid = ok;
    c.reason = ok ? "" : "sha256 differs";
    s.checkpoints.push_back(c);
  }
  return s;
}

// One node: a coordinator and the faults it reported.
struct Node {
  std::unique_ptr<EtcdCoordinator> c;
  std::mutex mu;
  std::vector<run::Fault> faults;
  run::RestartState state;

  // The coordinator's watcher reports into faults: it goes first.
  ~Node() { c.reset(); }
  size_t Faults() {
    std::lock_guard lock(mu);
    return faults.size();
  }
  run::Fault Fault(size_t i) {
    std::lock_guard lock(mu);
    return faults.at(i);
  }
};

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.Start()); }

  ClusterOptions Options(int rank, int min_nodes, int max_nodes) {
    ClusterOptions o;
    o.endpoints = etcd_.Endpoints();
    o.job = job_;
    o.min_nodes = min_nodes;
    o.max_nodes = max_nodes;
    o.node_rank = rank;
    o.address = "127.0.0.1";
    o.lease_ttl_seconds = 2;
    o.barrier_timeout_seconds = 1.5;
    o.join_timeout_seconds = 20;
    o.poll_seconds = 0.02;
    o.store_timeout_seconds = 30;
    o.max_restarts = 10;
    return o;
  }

  std::unique_ptr<Node> MakeNode(ClusterOptions o) {
    auto n = std::make_unique<Node>();
    auto c = EtcdCoordinator::Create(std::move(o));
    EXPECT_THAT(c, IsOk());
    if (!c) return nullptr;
    n->c = std::move(*c);
    Node* raw = n.get();
    EXPECT_THAT(n->c->Start([raw](run::Fault f) {
      std::lock_guard lock(raw->mu);
      raw->faults.push_back(std::move(f));
    }),
                IsOk());
    return n;
  }

  // Every node's AgreeCheckpoint at once, as the nodes reach their barrier;
  // the step each resumes from (-1: from scratch).
  std::vector<int64_t> Agree(const std::vector<Node*>& nodes,
                             const std::vector<run::CheckpointScan>& scans) {
    std::vector<std::future<int64_t>> f;
    for (size_t i = 0; i < nodes.size(); ++i) {
      f.push_back(std::async(std::launch::async, [&, i] {
        const run::Checkpoint* c = nodes[i]->c->AgreeCheckpoint(scans[i]);
        return c == nullptr ? int64_t{-1} : c->step;
      }));
    }
    std::vector<int64_t> out;
    for (auto& x : f) out.push_back(x.get());
    return out;
  }

  run::Fault LocalFault(std::string cls) {
    run::Fault f;
    f.detector = "exit";
    f.fault_class = std::move(cls);
    f.summary = "rank 1 exited 1";
    f.seen = RealClock().Now();
    f.wall = f.seen;
    return f;
  }

  TempDir dir_{"anxin-etcd"};
  EtcdCluster etcd_{dir_, 3};
  std::string job_ = "job-" + std::to_string(::getpid());
};

TEST_F(EtcdTest, ClientReadsWritesSwapsAndLeasesAndFailsOver) {
  auto c = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(c->Put("/t/a", "1"), IsOk());
  ASSERT_THAT(c->Put("/t/b", std::string("\0\xff", 2)), IsOk());
  auto r = c->GetPrefix("/t/");
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[1].value, std::string("\0\xff", 2));
  EXPECT_EQ(c->PutIfAbsent("/t/a", "2"), false);
  EXPECT_EQ(c->PutIfAbsent("/t/c", "3"), true);
  const int64_t rev = r->kvs[0].mod_revision;
  EXPECT_EQ(c->PutIfModRevision("/t/a", "4", rev), true);
  EXPECT_EQ(c->PutIfModRevision("/t/a", "5", rev), false);  // stale: someone wrote since
  EXPECT_EQ(c->Get("/t/a")->kvs.at(0).value, "4");

  auto lease = c->GrantLease(1);
  ASSERT_THAT(lease, IsOk());
  ASSERT_THAT(c->Put("/t/alive", "x", *lease), IsOk());
  EXPECT_THAT(c->KeepAlive(*lease), IsOk());
  EXPECT_TRUE(WaitFor([&] { return c->Get("/t/alive")->kvs.empty(); }, 10s))
      << "a key under a lease nobody renews must go";
  EXPECT_THAT(c->KeepAlive(*lease), HasCode(ErrorCode::kNotFound));

  // A member down: the others answer.
  etcd_.Kill(0);
  EXPECT_THAT(c->Put("/t/d", "after"), IsOk());
  EXPECT_EQ(c->Get("/t/d")->kvs.at(0).value, "after");

  auto nobody = EtcdClient::Create("127.0.0.1:1");
  ASSERT_THAT(nobody, IsOk());
  EXPECT_THAT(nobody->Get("/t/a"), HasCode(ErrorCode::kUnavailable, HasSubstr("127.0.0.1:1")));
}

TEST_F(EtcdTest, FirstBarrierPlacesTheNodesAndAgreesOnTheNewestCommonStep) {
  auto a = MakeNode(Options(0, 3, 3));
  auto b = MakeNode(Options(1, 3, 3));
  auto c = MakeNode(Options(2, 3, 3));
  ASSERT_TRUE(a && b && c);
  auto steps = Agree({c.get(), a.get(), b.get()},
                     {Scan({10, 20, 30}), Scan({10, 20, 30}), Scan({10, 20}, {30})});
  EXPECT_THAT(steps, ::testing::Each(20)) << "30 is corrupt on one node";
  for (Node* n : {a.get(), b.get(), c.get()}) {
    auto p = n->c->Agreed();
    ASSERT_TRUE(p.has_value());
    EXPECT_FALSE(p->stop);
    EXPECT_EQ(p->generation, 0);
    EXPECT_EQ(p->nnodes, 3);
    EXPECT_EQ(p->master_addr, "127.0.0.1");
    EXPECT_EQ(p->master_port, a->c->Agreed()->master_port);
    EXPECT_GT(p->master_port, 0);
  }
  EXPECT_EQ(a->c->Agreed()->node_rank, 0);
  EXPECT_EQ(b->c->Agreed()->node_rank, 1);
  EXPECT_EQ(c->c->Agreed()->node_rank, 2);
  auto v = b->c->View();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->agreed_step, 20);
  ASSERT_EQ(v->nodes.size(), 3u);
  EXPECT_EQ(v->nodes[1].node, "node-1");
  EXPECT_EQ(v->nodes[1].newest_verified, 20);
  EXPECT_EQ(v->nodes[2].newest_verified, 30);
}

TEST_F(EtcdTest, TwoNodesFaultingAtOnceOpenOneGenerationAndTheThirdFollows) {
  auto a = MakeNode(Options(0, 3, 3));
  auto b = MakeNode(Options(1, 3, 3));
  auto c = MakeNode(Options(2, 3, 3));
  ASSERT_TRUE(a && b && c);
  Agree({a.get(), b.get(), c.get()}, {Scan({5}), Scan({5}), Scan({5})});

  auto fa = std::async(std::launch::async,
                       [&] { return a->c->OnFault(LocalFault("rank_exit"), a->state); });
  auto fb =
      std::async(std::launch::async, [&] { return b->c->OnFault(LocalFault("hang"), b->state); });
  const auto da = fa.get();
  const auto db = fb.get();
  EXPECT_EQ(da.verdict, run::Coordinator::Verdict::kRestart);
  EXPECT_EQ(da.generation, 1);
  EXPECT_EQ(db.generation, 1) << "two detections, one generation";
  ASSERT_TRUE(WaitFor([&] { return c->Faults() >= 1; }, 5s)) << "the third node must hear of it";
  const run::Fault remote = c->Fault(0);
  EXPECT_EQ(remote.detector, "cluster");
  EXPECT_EQ(remote.fault_class, "cluster_restart");
  EXPECT_EQ(c->c->OnFault(remote, c->state).generation, 1);

  auto steps = Agree({a.get(), b.get(), c.get()}, {Scan({5, 10}), Scan({5, 10}), Scan({5, 10})});
  EXPECT_THAT(steps, ::testing::Each(10));
  for (Node* n : {a.get(), b.get(), c.get()}) EXPECT_EQ(n->c->Agreed()->generation, 1);
  EXPECT_EQ(a->Faults(), 0u) << "a node that opened or joined a generation is not told again";
  auto gen = EtcdClient::Create(etcd_.Endpoints())->Get("/anxin/run/" + job_ + "/generation");
  ASSERT_THAT(gen, IsOk());
  EXPECT_THAT(gen->kvs.at(0).value, HasSubstr("\"generation\":1"));
}

TEST_F(EtcdTest, ALostNodeIsAFaultForEveryoneAndTheElasticJobShrinksThenStops) {
  auto a = MakeNode(Options(0, 2, 3));
  auto b = MakeNode(Options(1, 2, 3));
  auto c = MakeNode(Options(2, 2, 3));
  ASSERT_TRUE(a && b && c);
  Agree({a.get(), b.get(), c.get()}, {Scan({}), Scan({}), Scan({})});
  c.reset();  // its lease goes with it
  ASSERT_TRUE(WaitFor([&] { return a->Faults() >= 1 && b->Faults() >= 1; }, 10s));
  EXPECT_EQ(a->Fault(0).fault_class, "node_lost");
  EXPECT_THAT(a->Fault(0).summary, HasSubstr("node-2"));
  EXPECT_EQ(b->Fault(0).fault_class, "node_lost");
  EXPECT_EQ(a->c->OnFault(a->Fault(0), a->state).generation, 1);
  EXPECT_EQ(b->c->OnFault(b->Fault(0), b->state).generation, 1);
  Agree({a.get(), b.get()}, {Scan({}), Scan({})});
  auto p = b->c->Agreed();
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->stop);
  EXPECT_EQ(p->generation, 1);
  EXPECT_EQ(p->nnodes, 2) << "shrunk to the nodes that came back";
  EXPECT_EQ(p->node_rank, 1);

  b.reset();
  ASSERT_TRUE(WaitFor([&] { return a->Faults() >= 2; }, 10s));
  EXPECT_EQ(a->Fault(1).fault_class, "node_lost");
  EXPECT_EQ(a->c->OnFault(a->Fault(1), a->state).generation, 2);
  Agree({a.get()}, {Scan({})});
  p = a->c->Agreed();
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->stop) << "one node is below --nnodes 2:3";
  EXPECT_THAT(p->why, HasSubstr("at least 2"));
}

TEST_F(EtcdTest, TheLeadLostIsFoundByTheNodeThatTakesTheLeadAfterIt) {
  auto etcd = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(etcd, IsOk());
  const std::string lead_key = "/anxin/run/" + job_ + "/lead";
  auto lead = [&]() -> std::string {
    auto r = etcd->Get(lead_key);
    if (!r || r->kvs.empty()) return "";
    return nlohmann::json::parse(r->kvs[0].value).value("node", "");
  };
  auto a = MakeNode(Options(0, 2, 3));
  auto b = MakeNode(Options(1, 2, 3));
  auto c = MakeNode(Options(2, 2, 3));
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(lead(), "node-0") << "the first node to start takes the lead";
  Agree({a.get(), b.get(), c.get()}, {Scan({10}), Scan({10}), Scan({10})});
  a.reset();  // the lead: its lease and the lead key go with it
  ASSERT_TRUE(WaitFor([&] { return b->Faults() >= 1 && c->Faults() >= 1; }, 10s));
  EXPECT_EQ(b->Fault(0).fault_class, "node_lost");
  EXPECT_THAT(b->Fault(0).summary, HasSubstr("node-0"));
  EXPECT_EQ(c->Fault(0).fault_class, "node_lost");
  const std::string next = lead();
  EXPECT_TRUE(next == "node-1" || next == "node-2") << next;
  EXPECT_EQ(b->c->OnFault(b->Fault(0), b->state).generation, 1);
  EXPECT_EQ(c->c->OnFault(c->Fault(0), c->state).generation, 1);
  EXPECT_EQ(Agree({b.get(), c.get()}, {Scan({10}), Scan({10})}), (std::vector<int64_t>{10, 10}))
      << "the new lead closes the barrier: the job shrinks to 2";
  ASSERT_TRUE(b->c->Agreed().has_value());
  EXPECT_EQ(b->c->Agreed()->nnodes, 2);
}

TEST_F(EtcdTest, AGenerationCostsEtcdAFewCallsPerNodeAndNoNodeReadsEveryRecord) {
  constexpr int kNodes = 12;
  auto counts = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(counts, IsOk());
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<Node*> raw;
  std::vector<run::CheckpointScan> scans;
  for (int i = 0; i < kNodes; ++i) {
    ClusterOptions o = Options(i, kNodes, kNodes);
    o.plan_inline_members = 4;  // the member list stays out of the watched copy
    nodes.push_back(MakeNode(o));
    ASSERT_TRUE(nodes.back());
    raw.push_back(nodes.back().get());
    scans.push_back(Scan({20, 10}));
  }
  Agree(raw, scans);
  std::this_thread::sleep_for(1s);  // the watches stand
  auto before = counts->ServerCounts();
  ASSERT_THAT(before, IsOk());
  // Node 0's rank fails; the others learn it from their watch.
  ASSERT_EQ(raw[0]->c->OnFault(LocalFault("process_exit"), raw[0]->state).generation, 1);
  for (int i = 1; i < kNodes; ++i) {
    ASSERT_TRUE(WaitFor([&] { return raw[i]->Faults() >= 1; }, 10s)) << i;
    ASSERT_EQ(raw[i]->c->OnFault(raw[i]->Fault(0), raw[i]->state).generation, 1);
  }
  const auto steps = Agree(raw, scans);
  auto after = counts->ServerCounts();
  ASSERT_THAT(after, IsOk());
  for (int64_t s : steps) EXPECT_EQ(s, 20);
  // Each node found its rank in gen/1/rank/NODE: one world, every rank once.
  std::set<int> ranks;
  int full_views = 0;
  for (Node* n : raw) {
    auto p = n->c->Agreed();
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->generation, 1);
    EXPECT_EQ(p->nnodes, kNodes);
    ranks.insert(p->node_rank);
    auto view = n->c->View();
    ASSERT_TRUE(view.has_value());
    // The closer adopts the plan it wrote (every node's times); the others
    // the watched copy: the 8 slowest nodes, and itself if not among them.
    if (view->nodes.size() == static_cast<size_t>(kNodes)) {
      ++full_views;
    } else {
      EXPECT_GE(view->nodes.size(), 8u);
      EXPECT_LE(view->nodes.size(), 9u);
    }
    bool mine = false;
    for (const auto& t : view->nodes) {
      EXPECT_GE(t.node_rank, 0) << t.node;
      if (t.node == n->c->node_id()) mine = t.node_rank == p->node_rank;
    }
    EXPECT_TRUE(mine) << n->c->node_id() << " is in its own view with its rank";
  }
  EXPECT_EQ(full_views, 1) << "only the closer";
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), kNodes - 1);
  const EtcdServerCounts d = after->Since(*before);
  auto calls = [&](const char* m) { return d.started.contains(m) ? d.started.at(m) : 0.0; };
  EXPECT_EQ(calls("Put"), kNodes) << "one ready key per node";
  // The ranks: one transaction of 12 puts, read by each node once (Range).
  // The lead counts the ready keys while they arrive and reads them once;
  // nobody else reads anything: the plan and the generation came by watch.
  EXPECT_LE(calls("Range"), 60 + kNodes)
      << "a few dozen counts by the lead and one rank per node, not reads by every node";
  EXPECT_LE(calls("Txn"), 3) << "the generation's swap, the ranks and the plan";
}

TEST_F(EtcdTest, ANodeThatComesBackOpensTheNextGenerationAndRejoins) {
  auto a = MakeNode(Options(0, 2, 2));
  auto b = MakeNode(Options(1, 2, 2));
  ASSERT_TRUE(a && b);
  Agree({a.get(), b.get()}, {Scan({}), Scan({})});
  b.reset();
  auto b2 = MakeNode(Options(1, 2, 2));  // a supervisor started again on that node
  ASSERT_TRUE(b2);
  auto back = std::async(std::launch::async, [&] { return b2->c->AgreeCheckpoint(Scan({})); });
  ASSERT_TRUE(WaitFor([&] { return a->Faults() >= 1; }, 10s));
  EXPECT_EQ(a->c->OnFault(a->Fault(0), a->state).generation, 1);
  (void)a->c->AgreeCheckpoint(Scan({}));
  back.get();
  EXPECT_EQ(a->c->Agreed()->generation, 1);
  EXPECT_EQ(b2->c->Agreed()->generation, 1);
  EXPECT_EQ(b2->c->Agreed()->nnodes, 2);
  EXPECT_EQ(b2->c->Agreed()->node_rank, 1);
}

TEST_F(EtcdTest, TheLeaderKilledMidRecoveryDoesNotStopIt) {
  auto a = MakeNode(Options(0, 2, 2));
  auto b = MakeNode(Options(1, 2, 2));
  ASSERT_TRUE(a && b);
  Agree({a.get(), b.get()}, {Scan({3}), Scan({3})});
  EXPECT_EQ(a->c->OnFault(LocalFault("rank_exit"), a->state).generation, 1);
  const int leader = etcd_.Leader();
  ASSERT_GE(leader, 0);
  etcd_.Kill(static_cast<size_t>(leader));
  ASSERT_TRUE(WaitFor([&] { return b->Faults() >= 1; }, 10s));
  EXPECT_EQ(b->c->OnFault(b->Fault(0), b->state).generation, 1);
  auto steps = Agree({a.get(), b.get()}, {Scan({3, 6}), Scan({3, 6})});
  EXPECT_THAT(steps, ::testing::Each(6));
  EXPECT_EQ(a->c->Agreed()->generation, 1);
  EXPECT_FALSE(a->c->Agreed()->stop);
}

TEST_F(EtcdTest, LosingQuorumPausesDecisionsUntilItIsBack) {
  auto a = MakeNode(Options(0, 2, 2));
  auto b = MakeNode(Options(1, 2, 2));
  ASSERT_TRUE(a && b);
  Agree({a.get(), b.get()}, {Scan({}), Scan({})});
  etcd_.Kill(1);
  etcd_.Kill(2);
  auto fault = std::async(std::launch::async,
                          [&] { return a->c->OnFault(LocalFault("rank_exit"), a->state); });
  EXPECT_EQ(fault.wait_for(3s), std::future_status::timeout)
      << "no decision may be taken without a quorum";
  ASSERT_TRUE(etcd_.Restart(1));
  ASSERT_TRUE(etcd_.Restart(2));
  ASSERT_EQ(fault.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(fault.get().generation, 1);
  ASSERT_TRUE(WaitFor([&] { return b->Faults() >= 1; }, 10s));
  EXPECT_EQ(b->c->OnFault(b->Fault(0), b->state).generation, 1);
  Agree({a.get(), b.get()}, {Scan({}), Scan({})});
  EXPECT_EQ(a->c->Agreed()->generation, 1);
  EXPECT_EQ(b->c->Agreed()->generation, 1);
  auto v = a->c->View();
  ASSERT_TRUE(v.has_value());
  EXPECT_GE(v->store_pauses, 1) << "the pause is counted";
}

TEST_F(EtcdTest, AWatchDeliversEveryChangeInOrderAndResumesOnAnotherMember) {
  auto c = EtcdClient::Create(etcd_.Endpoints());
  auto w = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(w, IsOk());
  const std::string p = "/w/" + job_ + "/";
  ASSERT_THAT(c->Put(p + "a", "1"), IsOk());
  auto r = c->GetPrefix(p);
  ASSERT_THAT(r, IsOk());
  std::mutex mu;
  std::vector<std::string> seen;
  int64_t next = r->revision + 1;
  int opened = 0;
  std::thread watcher([&] {
    for (int tries = 0; tries < 50; ++tries) {
      Status s = w->WatchPrefix(p, next, [&](const EtcdWatchBatch& b) {
        std::lock_guard lock(mu);
        if (b.events.empty()) ++opened;
        for (const EtcdEvent& e : b.events) {
          seen.push_back((e.deleted ? "-" : "+") + e.kv.key.substr(p.size()) + "=" + e.kv.value);
          next = std::max(next, e.kv.mod_revision + 1);
        }
        return seen.empty() || seen.back() != "+stop=";
      });
      if (!s) return;  // kCancelled once "stop" came; anything else fails below
    }
  });
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return opened >= 1;
      },
      10s));
  ASSERT_THAT(c->Put(p + "b", "2"), IsOk());
  auto lease = c->GrantLease(5);
  ASSERT_THAT(lease, IsOk());
  ASSERT_THAT(c->Put(p + "c", "3", *lease), IsOk());
  ASSERT_THAT(c->RevokeLease(*lease), IsOk());  // its key goes: a delete event
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return seen.size() >= 3;
      },
      10s));
  // The member the watch stands on dies; a write lands meanwhile.
  etcd_.Kill(0);
  ASSERT_THAT(c->Put(p + "d", "4"), IsOk());
  ASSERT_THAT(c->Put(p + "stop", ""), IsOk());
  watcher.join();
  std::lock_guard lock(mu);
  EXPECT_THAT(seen, ::testing::ElementsAre("+b=2", "+c=3", "-c=", "+d=4", "+stop="));
  EXPECT_GE(opened, 2) << "the watch was opened again on another member";
}

TEST_F(EtcdTest, AWatchFromACompactedRevisionIsAbortedSoTheCallerReadsAfresh) {
  auto c = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(c, IsOk());
  const std::string p = "/compact/" + job_ + "/";
  auto first = c->Put(p + "a", "1");
  ASSERT_THAT(first, IsOk());
  auto last = c->Put(p + "a", "2");
  ASSERT_THAT(last, IsOk());
  HttpClient raw("127.0.0.1", std::stoi(etcd_.Endpoint(0).substr(10)));
  auto compacted = raw.Post("/v3/kv/compaction",
                            "{\"revision\":\"" + std::to_string(*last) + "\",\"physical\":true}");
  ASSERT_TRUE(compacted && compacted->status == 200) << (compacted ? compacted->body : "");
  Status s = c->WatchPrefix(p, *first, [](const EtcdWatchBatch&) { return true; });
  EXPECT_THAT(s, HasCode(ErrorCode::kAborted, HasSubstr("compacted")));
}

TEST_F(EtcdTest, AnIdleJobCostsEtcdOnlyItsLeaseRenewalsWhilePollingCostsMany) {
  auto counts = EtcdClient::Create(etcd_.Endpoints());
  ASSERT_THAT(counts, IsOk());
  auto idle_calls = [&](bool watch) {
    const std::string job = job_ + (watch ? "-watch" : "-poll");
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<Node*> raw;
    for (int i = 0; i < 3; ++i) {
      ClusterOptions o = Options(i, 3, 3);
      o.job = job;
      o.watch = watch;
      nodes.push_back(MakeNode(o));
      if (!nodes.back()) return -1.0;
      raw.push_back(nodes.back().get());
    }
    Agree(raw, {Scan({}), Scan({}), Scan({})});
    std::this_thread::sleep_for(1s);  // the watches stand
    auto before = counts->ServerCounts();
    std::this_thread::sleep_for(3s);
    auto after = counts->ServerCounts();
    if (!before || !after) return -1.0;
    const EtcdServerCounts d = after->Since(*before);
    const double renewals =
        d.started.contains("LeaseKeepAlive") ? d.started.at("LeaseKeepAlive") : 0;
    EXPECT_GT(renewals, 0) << "the leases are renewed";
    for (Node* n : raw) EXPECT_EQ(n->Faults(), 0u);
    return d.Total() - renewals;
  };
  const double watching = idle_calls(true);
  const double polling = idle_calls(false);
  EXPECT_EQ(watching, 0) << "three watching nodes, idle for 3 s: no call but renewals";
  EXPECT_GT(polling, 3 * 3 * 10) << "polling every 20 ms reads the keys many times a second";
}

}  // namespace
}  // namespace anxin::coord
