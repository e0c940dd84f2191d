#include "anxin/netsim/netsim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "anxin/base/testing.h"
#include "anxin/netsim/collective.h"
#include "anxin/netsim/host_qos.h"
#include "anxin/netsim/report.h"
#include "anxin/netsim/scenario.h"
#include "anxin/netsim/sim.h"
#include "anxin/netsim/topology.h"

namespace anxin::netsim {
namespace {

const std::string kFixtures = std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/netsim/";

Scenario Star(int hosts) {
  Scenario s = DefaultScenario();
  s.topology.kind = TopologyKind::kStar;
  s.topology.hosts = hosts;
  s.topology.switch_ports = 4096;
  return s;
}

SimResult Sim(const Scenario& s) {
  auto r = Simulate(s);
  EXPECT_TRUE(r.has_value()) << r.error().ToString();
  return r ? *r : SimResult{};
}

TEST(NetsimScenario, ReadsTheFixtureAndRunsItCloseToTheModel) {
  auto s = LoadScenario(kFixtures + "ring8.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  EXPECT_EQ(s->topology.hosts, 8);
  EXPECT_EQ(s->PriorityOfDscp(26), 3);
  EXPECT_TRUE(s->queues[3].pfc);
  SimResult r = Sim(*s);
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveResult& c = r.collectives[0];
  EXPECT_NEAR(c.time_us, c.model_us, c.model_us * 0.02);
  EXPECT_GT(c.busbw, 0);
  EXPECT_EQ(r.unfinished_flows, 0u);
  EXPECT_GT(r.events, 1000u);
}

TEST(NetsimScenario, BadInputNamesFileLineAndColumn) {
  auto unknown = ParseScenario("topology:\n  kind: star\n  hostz: 4\n", "x.yaml");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message().find("x.yaml:3:3"), std::string::npos)
      << unknown.error().message();
  EXPECT_NE(unknown.error().message().find("hostz"), std::string::npos);

  auto zero = ParseScenario("topology:\n  link_gbps: 0\n", "z.yaml");
  ASSERT_FALSE(zero.has_value());
  EXPECT_NE(zero.error().message().find("z.yaml:2:"), std::string::npos) << zero.error().message();
  EXPECT_NE(zero.error().message().find("above 0"), std::string::npos);

  auto order = ParseScenario(
      "switch:\n  queues:\n    - priority: 3\n      pfc: {xoff: 100KiB, xon: 200KiB}\n"
      "traffic:\n  flows: [{src: 0, dst: 1}]\n",
      "o.yaml");
  ASSERT_FALSE(order.has_value());
  EXPECT_NE(order.error().message().find("o.yaml:4:"), std::string::npos)
      << order.error().message();
  EXPECT_NE(order.error().message().find("xon"), std::string::npos);

  auto ports = ParseScenario(
      "topology:\n  kind: leaf_spine\n  hosts: 64\n  hosts_per_leaf: 48\n  spines: 24\n"
      "  switch_ports: 64\ntraffic:\n  flows: [{src: 0, dst: 1}]\n",
      "p.yaml");
  ASSERT_FALSE(ports.has_value());
  EXPECT_NE(ports.error().message().find("p.yaml:2:"), std::string::npos)
      << ports.error().message();
  EXPECT_NE(ports.error().message().find("switch_ports"), std::string::npos);

  auto ecn = ParseScenario(
      "switch:\n  queues:\n    - priority: 3\n      ecn: {kmin: 400KiB, kmax: 100KiB}\n"
      "traffic:\n  flows: [{src: 0, dst: 1}]\n",
      "e.yaml");
  ASSERT_FALSE(ecn.has_value());
  EXPECT_NE(ecn.error().message().find("kmin"), std::string::npos);

  auto host =
      ParseScenario("topology: {hosts: 4}\ntraffic:\n  flows: [{src: 0, dst: 9}]\n", "h.yaml");
  ASSERT_FALSE(host.has_value());
  EXPECT_NE(host.error().message().find("host 9"), std::string::npos);

  auto hd = ParseScenario(
      "topology: {kind: star, hosts: 6}\ntraffic:\n  collectives: [{algo: hd}]\n", "d.yaml");
  ASSERT_TRUE(hd.has_value()) << hd.error().ToString();
  auto run = Simulate(*hd);
  ASSERT_FALSE(run.has_value());
  EXPECT_NE(run.error().message().find("power-of-two"), std::string::npos);
}

TEST(NetsimTopology, BuildsEveryKindWithShortestPathEcmp) {
  TopologySpec t;
  t.kind = TopologyKind::kLeafSpine;
  t.hosts = 32;
  t.hosts_per_leaf = 8;
  t.spines = 4;
  auto ls = BuildFabric(t);
  ASSERT_TRUE(ls.has_value());
  EXPECT_EQ(ls->switches, 4 + 4);
  EXPECT_EQ(ls->Hops(0, 1), 2);
  EXPECT_EQ(ls->Hops(0, 31), 4);
  // A leaf has one uplink per spine towards a host under another leaf.
  EXPECT_EQ(ls->NextHops(static_cast<uint32_t>(ls->hosts), 31).size(), 4u);

  t.kind = TopologyKind::kFatTree;
  t.k = 4;
  t.hosts = 16;
  auto ft = BuildFabric(t);
  ASSERT_TRUE(ft.has_value());
  EXPECT_EQ(ft->switches, 8 + 8 + 4);
  EXPECT_EQ(ft->Hops(0, 15), 6);
  EXPECT_EQ(ft->Hops(0, 2), 4);

  t.kind = TopologyKind::kRail;
  t.hosts = 16;
  t.rails = 2;
  t.hosts_per_leaf = 4;
  t.spines = 2;
  auto rail = BuildFabric(t);
  ASSERT_TRUE(rail.has_value());
  EXPECT_EQ(rail->Hops(0, 2), 2);  // same rail, same leaf
  EXPECT_EQ(rail->Hops(0, 1), 4);  // other rail: through a spine
}

// NCCL's tree chunk (enqueue's Simple-protocol rule) and its flow control: a
// sender waits for the credit of the chunk kNcclSteps back, and a receiver
// returns one for each chunk a later chunk will need the slot of.
TEST(NetsimCollective, TreeChunksAndFlowControlAreNcclsDefaults) {
  EXPECT_EQ(NcclTreeChunk(uint64_t{1} << 30, 1024), 512u << 10);  // many chunks: a full slot
  EXPECT_EQ(NcclTreeChunk(uint64_t{4} << 20, 8), 128u << 10);
  EXPECT_EQ(NcclTreeChunk(uint64_t{4} << 20, 1024), 64u << 10);
  EXPECT_EQ(NcclTreeChunk(uint64_t{64} << 10, 1024), 32u << 10);
  CollectiveSpec spec;
  spec.algo = CollAlgo::kTree;
  spec.bytes = uint64_t{4} << 20;  // 2 MiB per tree in 128 KiB chunks: 16
  auto plan = MakePlan(spec, 8);
  ASSERT_TRUE(plan.has_value()) << plan.error().ToString();
  ASSERT_EQ((*plan)->Steps(4, 0), 16);
  // Rank 2 of tree 0 (parent 4, children 1 and 3), going up with chunk 9:
  // the chunks of both children, and the credit for chunk 1 from its parent.
  Step step;
  (*plan)->GetStep(2, 0, 9, step);
  ASSERT_EQ(step.waits.size(), 3u);
  EXPECT_EQ(step.waits[0].peer, 1);
  EXPECT_EQ(step.waits[0].count, 10u);
  EXPECT_EQ(step.waits[2].channel, 4);
  EXPECT_EQ(step.waits[2].peer, 4);
  EXPECT_EQ(step.waits[2].count, 2u);
  // It sends chunk 9 up and frees the children's slots of chunk 9 (for 17,
  // which does not exist: no credit).
  ASSERT_EQ(step.sends.size(), 1u);
  EXPECT_EQ(step.sends[0].peer, 4);
  (*plan)->GetStep(2, 0, 3, step);
  ASSERT_EQ(step.sends.size(), 3u);  // chunk 3 up; credits to 1 and 3 for chunks 11
  EXPECT_TRUE(step.sends[1].credit);
  EXPECT_EQ(step.sends[1].channel, 4);
  EXPECT_EQ(step.sends[1].bytes, kCreditBytes);
  // In a run, a sender is never more than 8 chunks ahead: the tree finishes,
  // and the credits are among its messages.
  Scenario s = Star(8);
  s.collectives.push_back(spec);
  SimResult r = Sim(s);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.unfinished_flows, 0u);
  EXPECT_GT(r.collectives[0].flows, 4u * 16 * 2);
}

TEST(NetsimCollective, DoubleBinaryTreeIsNcclsAndComplementary) {
  for (int n : {2, 5, 8, 13, 64}) {
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        TreeLinks l = DoubleBinaryTree(n, r, t);
        if (l.parent < 0) ++roots;
        for (int c : l.child) {
          if (c >= 0) {
            EXPECT_EQ(DoubleBinaryTree(n, c, t).parent, r) << n << " " << t;
          }
        }
      }
      EXPECT_EQ(roots, 1);
    }
  }
  // NCCL's btree of 8 ranks: 0 -> 4, 4 -> 2 and 6, 2 -> 1 and 3.
  EXPECT_EQ(DoubleBinaryTree(8, 0, 0).child[1], 4);
  EXPECT_EQ(DoubleBinaryTree(8, 2, 0).parent, 4);
  EXPECT_EQ(DoubleBinaryTree(8, 1, 0).parent, 2);
}

// The tree's model is its schedule evaluated message by message: here by
// hand on 4 ranks, where tree 0 is 0 <- 2 <- {1, 3} and tree 1 is
// 3 <- 1 <- {2, 0}, so that every rank is a leaf in one tree.
TEST(NetsimCollective, TreeModelIsTheScheduleMessageByMessage) {
  CollectiveSpec spec;
  spec.algo = CollAlgo::kTree;
  // 64 KiB: one 32 KiB chunk per tree on the default links (200 Gbps, 1 us,
  // MTU 4096, 62 B of headers). The leaves send at once, so rank 2 receives
  // two chunks over one link (2S); it sends the sum up alone (S), the root
  // sends it back down alone (S), and rank 2 sends it to both children over
  // one NIC (2S). Four messages in a row, each 2 delays and one packet's
  // store and forward.
  spec.bytes = 64 << 10;
  LinkModel m;
  const double s = (32768 + 8 * 62) * 8 / 200e9;
  const double p = (4096 + 62) * 8 / 200e9;
  const double d = 1e-6;
  EXPECT_NEAR(AlphaBetaSeconds(spec, 4, m), 6 * s + 4 * (2 * d + p), 1e-12);

  // Two one-packet chunks per tree (S = p = 1 us) and 10 us links. Each leaf
  // sends its chunks back to back; both children's reach rank 2 over one
  // link, so chunk 1 is through at 4S (+2d + p). Up to the root and down
  // again alone (2 x (S + 2d + p)); rank 2 has sent chunk 0 to both
  // children in the 2S before chunk 1 comes down, and sends chunk 1 to both
  // in 2S (+2d + p).
  spec.bytes = 4 * 4096;
  spec.chunk_bytes = 4096;
  m.gbps = 4096 * 8 / 1e-6 / 1e9;
  m.delay_ps = 10'000'000;
  m.header_bytes = 0;
  const double one = 1e-6, ten = 10e-6;
  EXPECT_NEAR(AlphaBetaSeconds(spec, 4, m),
              (4 * one + 2 * ten + one) + 2 * (one + 2 * ten + one) + (2 * one + 2 * ten + one),
              1e-12);
  EXPECT_NEAR(AlphaBetaSeconds(spec, 4, m), 92e-6, 1e-12);  // 8S + 8d + 4p
}

// Uncongested: one switch, no other traffic, and nothing paused (the data
// priority without PFC, in a buffer no incast fills). Every collective
// finishes within 2% of the alpha-beta model: ring, halving-doubling, and
// the double binary tree, whose model follows its schedule message by
// message (the parent's link shared by two children, the NIC by up to four
// streams).
TEST(NetsimValidation, UncongestedCollectivesMatchTheAlphaBetaModel) {
  for (int n : {8, 32}) {
    for (CollAlgo algo : {CollAlgo::kRing, CollAlgo::kTree, CollAlgo::kHalvingDoubling}) {
      for (uint64_t bytes : {uint64_t{64} << 10, uint64_t{4} << 20}) {
        Scenario s = Star(n);
        s.queues[3].pfc = false;
        s.buffer_bytes = uint64_t{1} << 30;
        CollectiveSpec c;
        c.algo = algo;
        c.bytes = bytes;
        s.collectives.push_back(c);
        SimResult r = Sim(s);
        ASSERT_EQ(r.collectives.size(), 1u);
        const auto& got = r.collectives[0];
        const std::string what = std::to_string(n) + " ranks, " + std::string(AlgoName(algo)) +
                                 ", " + std::to_string(bytes);
        EXPECT_EQ(r.drops, 0u) << what;
        EXPECT_NEAR(got.time_us, got.model_us, got.model_us * 0.02) << what;
      }
    }
  }
}

// On a lossless priority the tree is not uncongested: each leaf sends the 8
// chunks its window allows at once, two leaves to one parent, and the
// parent's switch port pauses them (PFC), and with them the other tree's
// chunks they carry. That costs the run time the alpha-beta model, which
// has no PFC, does not count.
TEST(NetsimValidation, TreeLeavesPausedByPfcRunOverTheModel) {
  Scenario s = Star(8);
  CollectiveSpec c;
  c.algo = CollAlgo::kTree;
  c.bytes = uint64_t{4} << 20;
  s.collectives.push_back(c);
  SimResult r = Sim(s);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_GT(r.queues[3].pauses_sent, 0u);
  EXPECT_GT(r.collectives[0].time_us, r.collectives[0].model_us * 1.02);
  EXPECT_LT(r.collectives[0].time_us, r.collectives[0].model_us * 1.10);
}

TEST(NetsimValidation, SameSeedSameResult) {
  auto s = LoadScenario(kFixtures + "dscp_shared.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  SimResult a = Sim(*s), b = Sim(*s);
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.collectives[0].time_us, b.collectives[0].time_us);
  EXPECT_EQ(a.control.p99_us, b.control.p99_us);
}

// The whole report (JSON without the engine's timings and its memory
// estimate), hashed: an engine change that keeps the results must keep every
// byte of it. The digests were taken before the event queue was rewritten.
uint64_t ReportDigest(const SimResult& r) {
  nlohmann::json j = ToJson(r);
  for (const char* k : {"wall_s", "cpu_s", "events_per_s", "peak_memory_bytes"}) {
    j["engine"].erase(k);
  }
  // Where the checkout is must not change the digest: the scenario's path
  // appears as itself and in each comm run's command line.
  j.erase("scenario");
  for (nlohmann::json& run : j["comm_runs"]) run.erase("command");
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : j.dump()) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Drops on a lossy priority (resends after rto), trains of 2 MTUs, a tree,
// an AlltoAll, repeats and serial collectives: the paths the fixtures miss.
constexpr const char* kLossy = R"(seed: 11
topology: {kind: leaf_spine, hosts: 16, hosts_per_leaf: 4, spines: 2, link_gbps: 100}
nic: {train_packets: 2}
switch:
  buffer: 128KiB
  rto: 20us
  queues:
    - {priority: 3, pfc: {xoff: 64KiB, xon: 32KiB}, ecn: true}
    - {priority: 6, strict: true}
dcqcn: {enabled: true}
traffic:
  serial: true
  collectives:
    - {op: all_reduce, algo: tree, bytes: 512KiB, chunk: 64KiB, dscp: 26, repeat: 2}
    - {op: alltoall, algo: pairwise, bytes: 256KiB, dscp: 26, handshake: 64}
  control: [{bytes: 1KiB, interval: 3us, dscp: 48}]
  incast: {senders: 6, dst: 0, bytes: 256KiB, dscp: 0}
)";

TEST(NetsimValidation, ReportsAreBitIdenticalAcrossEngineChanges) {
  struct Case {
    std::string name;
    uint64_t events;
    uint64_t digest;
  };
  const std::vector<Case> cases = {
      {"ring8.yaml", 17921, 0xb83daa264a9837ffull},
      {"incast.yaml", 63774, 0xb5042272175ab4d8ull},
      {"dscp_shared.yaml", 456734, 0x91c1d2ed529f123bull},
      {"dscp_own.yaml", 456707, 0x14948643a9aea86cull},
      {"lossy", 32602, 0xef7c6e55f0769d25ull},
  };
  for (const Case& c : cases) {
    auto s =
        c.name == "lossy" ? ParseScenario(kLossy, "lossy.yaml") : LoadScenario(kFixtures + c.name);
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    SimResult r = Sim(*s);
    EXPECT_EQ(r.events, c.events) << c.name;
    EXPECT_EQ(ReportDigest(r), c.digest)
        << c.name << ": " << r.events << " events, digest 0x" << std::hex << ReportDigest(r);
    if (c.name == "lossy") {
      EXPECT_GT(r.drops, 0u);
      EXPECT_EQ(r.unfinished_flows, 0u);
    }
  }
}

// The field report's finding in small: control messages that share the
// data's queue wait behind it; on their own strict priority they do not.
TEST(NetsimValidation, ControlOnItsOwnPriorityCutsItsTailLatency) {
  auto shared = LoadScenario(kFixtures + "dscp_shared.yaml");
  auto own = LoadScenario(kFixtures + "dscp_own.yaml");
  ASSERT_TRUE(shared.has_value()) << shared.error().ToString();
  ASSERT_TRUE(own.has_value()) << own.error().ToString();
  SimResult a = Sim(*shared), b = Sim(*own);
  ASSERT_GT(a.control.count, 20u);
  ASSERT_GT(b.control.count, 20u);
  EXPECT_GT(a.control.p99_us, 3 * b.control.p99_us)
      << "shared " << a.control.p99_us << " own " << b.control.p99_us;
  ASSERT_FALSE(a.collectives.empty());
  EXPECT_GE(b.collectives[0].busbw, a.collectives[0].busbw * 0.98);
}

// Incast: PFC pauses propagate; DCQCN, reacting to ECN, pauses less.
TEST(NetsimValidation, IncastPausesAndDcqcnReducesThem) {
  auto s = LoadScenario(kFixtures + "incast.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  Scenario off = *s;
  off.dcqcn.enabled = false;
  Scenario on = *s;
  on.dcqcn.enabled = true;
  SimResult a = Sim(off), b = Sim(on);
  const int p = s->PriorityOfDscp(26);
  EXPECT_GT(a.queues[static_cast<size_t>(p)].pauses_sent, 0u);
  EXPECT_GT(a.queues[static_cast<size_t>(p)].paused_us, 0);
  EXPECT_EQ(a.lossless_drops, 0u);
  EXPECT_GT(b.cnps, 0u);
  EXPECT_LT(b.queues[static_cast<size_t>(p)].pauses_sent,
            a.queues[static_cast<size_t>(p)].pauses_sent);
  // Every flow finished and no byte was lost.
  for (const auto& f : b.flows) EXPECT_GT(f.fct_us, 0);
  EXPECT_EQ(b.unfinished_flows, 0u);
}

TEST(NetsimLimits, EventAndMemoryBudgetsStopWithAClearMessage) {
  Scenario s = Star(8);
  s.collectives.push_back(CollectiveSpec{});
  s.collectives[0].bytes = 64 << 20;
  s.limits.max_events = 100000;
  auto r = Simulate(s);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message().find("limits.max_events"), std::string::npos);

  s.limits.max_events = 1ull << 40;
  s.limits.max_memory = 1 << 10;
  auto m = Simulate(s);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message().find("limits.max_memory"), std::string::npos);
}

TEST(NetsimReport, PrintsBenchCommColumnsJsonAndSvg) {
  auto s = LoadScenario(kFixtures + "ring8.yaml");
  ASSERT_TRUE(s.has_value());
  SimResult r = Sim(*s);
  const std::string text = FormatReport(r);
  EXPECT_NE(text.find("busbw"), std::string::npos);
  EXPECT_NE(text.find("out-of-place"), std::string::npos);
  EXPECT_NE(text.find("M events/s"), std::string::npos);
  const auto runs = ToCommRuns(r);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].rows[0].bytes, 1u << 20);
  // busbw = algbw * 2(n-1)/n for all_reduce.
  EXPECT_NEAR(runs[0].rows[0].out_of_place->busbw, r.collectives[0].algbw * 2 * 7 / 8, 1e-9);
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["collectives"][0]["ranks"], 8);
  EXPECT_NE(TimelineSvg(r).find("<svg"), std::string::npos);
}

TEST(NetsimCli, CompareRunsBothFiles) {
  SimNetOptions o;
  o.scenarios = {kFixtures + "dscp_shared.yaml", kFixtures + "dscp_own.yaml"};
  o.compare = true;
  auto out = RunSimNet(o);
  ASSERT_TRUE(out.has_value()) << out.error().ToString();
  EXPECT_NE(out->text.find("control p99"), std::string::npos);
  o.compare = false;
  EXPECT_FALSE(RunSimNet(o).has_value());
}

// A report in the shape `anxin doctor --json` writes (docs/doctor.md, "JSON
// output"): eight NPU ports with PFC on 4 and DSCP 33 -> 4, 48 -> 5, and two
// NICs with PFC on 3 (mlnx_qos lists 24-31 -> 3, the others take DSCP >> 3).
nlohmann::json HostReport() {
  nlohmann::json ports = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    nlohmann::json map = nlohmann::json::object();
    for (int d = 24; d < 32; ++d) map[std::to_string(d)] = 3;
    ports.push_back({{"kind", "nic"},
                     {"name", "eth" + std::to_string(i)},
                     {"pci", "0000:18:00." + std::to_string(i)},
                     {"trust", "dscp"},
                     {"pfc", {3}},
                     {"dscp_to_priority", map},
                     {"unlisted_dscp", "dscp>>3"},
                     {"cnp_dscp", 48},
                     {"error", ""}});
  }
  for (int i = 0; i < 8; ++i) {
    ports.push_back({{"kind", "npu"},
                     {"name", "npu" + std::to_string(i)},
                     {"pci", nullptr},
                     {"trust", nullptr},
                     {"pfc", {4}},
                     {"dscp_to_priority", {{"33", 4}, {"48", 5}}},
                     {"unlisted_dscp", "unknown"},
                     {"cnp_dscp", nullptr},
                     {"error", ""}});
  }
  nlohmann::json traffic = nlohmann::json::array({{{"library", "hccl"},
                                                   {"in_use", true},
                                                   {"variable", "HCCL_RDMA_TC"},
                                                   {"source", "HCCL_RDMA_TC=132"},
                                                   {"dscp", 33},
                                                   {"error", ""}},
                                                  {{"library", "nccl"},
                                                   {"in_use", true},
                                                   {"variable", "NCCL_IB_TC"},
                                                   {"source", "NCCL_IB_TC=106"},
                                                   {"dscp", 26},
                                                   {"error", ""}}});
  return {{"host", "node7"},
          {"root", "/"},
          {"worst", "ok"},
          {"findings", nlohmann::json::array()},
          {"qos", {{"version", 1}, {"traffic", traffic}, {"ports", ports}}}};
}

std::string Message(const Result<HostQos>& r) { return r ? "" : r.error().message(); }

TEST(NetsimHostQos, TakesOneKindOfPortAndTheJobsDscp) {
  const std::string report = HostReport().dump();
  auto npu = ParseHostQos(report, "npu");
  ASSERT_TRUE(npu.has_value()) << npu.error().ToString();
  EXPECT_EQ(npu->host, "node7");
  EXPECT_EQ(npu->kinds, "npu");
  EXPECT_EQ(npu->ports.size(), 8u);
  EXPECT_EQ(FormatPfc(npu->pfc), "4");
  EXPECT_EQ(npu->dscp_to_priority, (std::map<int, int>{{33, 4}, {48, 5}}));
  EXPECT_EQ(npu->job_dscp, 33);  // HCCL on the NPU ports
  EXPECT_EQ(npu->job_dscp_source, "HCCL_RDMA_TC=132");
  EXPECT_EQ(FormatDscpMap(npu->dscp_to_priority), "4 <- 33; 5 <- 48");

  auto nic = ParseHostQos(report, "nic");
  ASSERT_TRUE(nic.has_value()) << nic.error().ToString();
  EXPECT_EQ(FormatPfc(nic->pfc), "3");
  EXPECT_EQ(nic->job_dscp, 26);  // NCCL on the NICs
  EXPECT_EQ(FormatDscpMap(nic->dscp_to_priority), "3 <- 24-31");

  // Both kinds at once: their PFC priorities differ, so the reader asks which.
  EXPECT_THAT(Message(ParseHostQos(report, "auto")),
              ::testing::AllOf(::testing::HasSubstr("ports eth0 and npu0 disagree (PFC on 3 vs 4)"),
                               ::testing::HasSubstr("ports: npu")));
}

TEST(NetsimHostQos, BadReportsSayWhatIsWrong) {
  using ::testing::HasSubstr;
  EXPECT_THAT(Message(ParseHostQos("not json", "auto")), HasSubstr("not JSON"));
  nlohmann::json old = HostReport();
  old.erase("qos");
  EXPECT_THAT(Message(ParseHostQos(old.dump(), "auto")), HasSubstr("without a qos section"));
  EXPECT_THAT(Message(ParseHostQos(R"({"hosts": []})", "auto")), HasSubstr("--hosts"));
  nlohmann::json newer = HostReport();
  newer["qos"]["version"] = 2;
  EXPECT_THAT(Message(ParseHostQos(newer.dump(), "npu")), HasSubstr("qos.version 2"));

  // Two NPU ports configured differently: both named, and the difference.
  nlohmann::json drift = HostReport();
  drift["qos"]["ports"][5]["dscp_to_priority"]["48"] = 4;
  EXPECT_THAT(Message(ParseHostQos(drift.dump(), "npu")),
              HasSubstr("ports npu0 and npu3 disagree (DSCP 48 -> priority 5 vs 4)"));

  // A NIC that trusts PCP ignores its DSCP map.
  nlohmann::json pcp = HostReport();
  pcp["qos"]["ports"][1]["trust"] = "pcp";
  EXPECT_THAT(Message(ParseHostQos(pcp.dump(), "nic")), HasSubstr("eth1 trusts pcp"));

  // Unreadable ports are left out and named; none readable is an error.
  nlohmann::json partial = HostReport();
  partial["qos"]["ports"][0]["error"] = "mlnx_qos -i eth0: timed out";
  partial["qos"]["ports"][0]["pfc"] = nullptr;
  auto one = ParseHostQos(partial.dump(), "nic");
  ASSERT_TRUE(one.has_value()) << one.error().ToString();
  EXPECT_EQ(one->ports, std::vector<std::string>{"eth1"});
  EXPECT_EQ(one->skipped, std::vector<std::string>{"eth0: mlnx_qos -i eth0: timed out"});
  partial["qos"]["ports"][1]["pfc"] = nullptr;
  EXPECT_THAT(Message(ParseHostQos(partial.dump(), "nic")),
              HasSubstr("no nic port with a readable PFC table and DSCP map (eth0: mlnx_qos"));
  nlohmann::json no_npu = HostReport();
  no_npu["qos"]["ports"] = nlohmann::json::array({no_npu["qos"]["ports"][0]});
  EXPECT_THAT(Message(ParseHostQos(no_npu.dump(), "npu")), HasSubstr("the report has no npu port"));
}

// The scenario half: the path is relative to the scenario file, the host's
// map and PFC priorities replace the defaults, `dscp: job` is the job's DSCP,
// and the scenario's own keys win (and are listed).
TEST(NetsimHostQos, ScenarioTakesTheHostsSettingsAndItsOwnKeysWin) {
  std::string asked;
  const std::string report = HostReport().dump();
  auto read = [&](const std::string& path) -> Result<std::string> {
    asked = path;
    return report;
  };
  const std::string traffic =
      "traffic:\n  collectives: [{op: all_reduce, bytes: 1MiB, dscp: job}]\n";
  auto s =
      ParseScenario("switch:\n  qos_from: {file: ../reports/host.json, ports: npu}\n" + traffic,
                    "/site/scenarios/what_if.yaml", read);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  EXPECT_EQ(asked, "/site/reports/host.json");
  ASSERT_TRUE(s->qos_from.has_value());
  EXPECT_EQ(s->collectives[0].dscp, 33);
  EXPECT_EQ(s->PriorityOfDscp(33), 4);
  EXPECT_EQ(s->PriorityOfDscp(48), 5);
  EXPECT_EQ(s->PriorityOfDscp(26), 3);  // not listed: DSCP >> 3
  EXPECT_TRUE(s->queues[4].pfc);
  EXPECT_TRUE(s->queues[4].ecn);
  EXPECT_FALSE(s->queues[3].pfc) << "the default lossless priority 3 is not the host's";
  EXPECT_TRUE(s->qos_from->overrides.empty());

  auto own = ParseScenario(
      "switch:\n  qos_from: {file: host.json, ports: npu}\n  dscp_to_priority: {48: 7, 33: 4}\n"
      "  queues:\n    - {priority: 4, pfc: false}\n    - {priority: 7, strict: true}\n" +
          traffic,
      "w.yaml", read);
  ASSERT_TRUE(own.has_value()) << own.error().ToString();
  EXPECT_EQ(own->PriorityOfDscp(48), 7);
  EXPECT_FALSE(own->queues[4].pfc);
  EXPECT_TRUE(own->queues[7].strict);
  EXPECT_EQ(own->qos_from->overrides, (std::vector<std::string>{"DSCP 48 -> priority 7 (host: 5)",
                                                                "priority 4 PFC off (host: on)"}));
  // A queue the scenario lists without pfc takes the host's.
  auto listed = ParseScenario(
      "switch:\n  qos_from: {file: host.json, ports: npu}\n  queues:\n    - {priority: 4, "
      "ets_weight: 3}\n" +
          traffic,
      "l.yaml", read);
  ASSERT_TRUE(listed.has_value()) << listed.error().ToString();
  EXPECT_TRUE(listed->queues[4].pfc);
  EXPECT_EQ(listed->queues[4].ets_weight, 3);
}

TEST(NetsimHostQos, ErrorsNameTheScenarioPositionAndTheReport) {
  using ::testing::HasSubstr;
  const std::string traffic = "traffic:\n  flows: [{src: 0, dst: 1}]\n";
  auto missing = ParseScenario("switch:\n  qos_from: nowhere.json\n" + traffic, "/d/m.yaml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(missing.error().message(), HasSubstr("/d/m.yaml:2:13: switch.qos_from: open "
                                                   "/d/nowhere.json: No such file"));
  auto nothing = [](const std::string&) -> Result<std::string> { return std::string("{}"); };
  auto empty = ParseScenario("switch:\n  qos_from: r.json\n" + traffic, "e.yaml", nothing);
  ASSERT_FALSE(empty.has_value());
  EXPECT_THAT(empty.error().message(), HasSubstr("e.yaml:2:13: switch.qos_from: r.json: not an"));
  auto job = ParseScenario("traffic:\n  collectives: [{dscp: job}]\n", "j.yaml");
  ASSERT_FALSE(job.has_value());
  EXPECT_THAT(job.error().message(), HasSubstr("dscp: job needs switch.qos_from"));
  const std::string report = HostReport().dump();
  auto read = [&](const std::string&) -> Result<std::string> { return report; };
  auto kind =
      ParseScenario("switch:\n  qos_from: {file: r.json, ports: gpu}\n" + traffic, "k.yaml", read);
  ASSERT_FALSE(kind.has_value());
  EXPECT_THAT(kind.error().message(),
              HasSubstr("k.yaml:2:35: switch.qos_from.ports: ports: 'gpu'"));
  auto both = ParseScenario("switch:\n  qos_from: r.json\n" + traffic, "b.yaml", read);
  ASSERT_FALSE(both.has_value());
  EXPECT_THAT(both.error().message(), HasSubstr("r.json: ports eth0 and npu0 disagree"));
}

// The run uses the host's mapping: DSCP 48 lands in priority 5 (the host's,
// not 48 >> 3 = 6), and the incast on the job's DSCP pauses priority 4 (the
// host's PFC priority) without losing a packet.
TEST(NetsimHostQos, TheRunUsesTheHostsMapping) {
  const std::string report = HostReport().dump();
  auto read = [&](const std::string&) -> Result<std::string> { return report; };
  auto s = ParseScenario(
      "topology: {kind: star, hosts: 8, link_gbps: 100}\n"
      "switch:\n  buffer: 4MiB\n  qos_from: {file: host.json, ports: npu}\n"
      "traffic:\n  incast: {senders: 6, dst: 0, bytes: 1MiB, dscp: 33}\n"
      "  control: [{bytes: 256, interval: 5us, dscp: 48, count: 20}]\n",
      "run.yaml", read);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  SimResult r = Sim(*s);
  EXPECT_GT(r.queues[5].bytes, 0u) << "control on the host's priority for DSCP 48";
  EXPECT_EQ(r.queues[6].bytes, 0u);
  EXPECT_GT(r.queues[4].pauses_sent, 0u) << "PFC on the host's priority 4";
  EXPECT_EQ(r.lossless_drops, 0u);
  EXPECT_EQ(r.drops, 0u);
  const std::string text = FormatReport(r);
  EXPECT_NE(text.find("# QoS from host.json (host node7, 8 npu ports): PFC on priority 4; DSCP -> "
                      "priority 4 <- 33; 5 <- 48 (others DSCP >> 3)"),
            std::string::npos)
      << text;
  EXPECT_EQ(ToJson(r)["qos_from"]["pfc"], nlohmann::json::array({4}));
}

}  // namespace
}  // namespace anxin::netsim
