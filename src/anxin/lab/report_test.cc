#include "anxin/lab/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin::lab {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

using ::testing::HasSubstr;
using ::testing::SizeIs;

// A card as anxin notify renders it for a Feishu bot (notify/render.cc).
std::string Card(const std::string& status, const std::string& alert, const std::string& node,
                 const std::string& device) {
  const std::string word = status == "firing" ? "FIRING" : "RESOLVED";
  nlohmann::json body = {
      {"msg_type", "interactive"},
      {"card",
       {{"header", {{"title", {{"tag", "plain_text"}, {"content", "[" + word + ":1] " + alert}}}}},
        {"elements",
         {{{"tag", "div"},
           {"text",
            {{"tag", "lark_md"},
             {"content", "**" + word + "** " + alert + " (warning)\n**Node:** " + node +
                             (device.empty() ? "" : "   **Device:** " + device) +
                             "\n**Since:** 2026-12-06 13:00:01 UTC\n**Summary:** hot\n"
                             "**Description:** long text"}}}}}}}}};
  return body.dump();
}

run::Incident Inc(int generation, double fault_time, double ttr, std::vector<std::string> members,
                  const std::string& cls = "process_exit") {
  run::Incident in;
  in.fault.wall = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(fault_time)));
  in.time_to_recovery_seconds = ttr;
  run::ClusterView c;
  c.generation = generation;
  c.fault_node = "node-1";
  c.fault_class = cls;
  c.agreed_step = 40;
  for (size_t i = 0; i < members.size(); ++i) {
    run::ClusterNodeTimes t;
    t.node = members[i];
    t.node_rank = static_cast<int>(i);
    c.nodes.push_back(t);
  }
  in.cluster = c;
  return in;
}

TEST(ParseCardTest, ReadsTheAlertsOfACard) {
  auto alerts = ParseCard(Card("firing", "AnxinLinkDown", "node-3", "0"), 100.5);
  ASSERT_THAT(alerts, IsOk());
  ASSERT_THAT(*alerts, SizeIs(1));
  EXPECT_EQ((*alerts)[0].status, "firing");
  EXPECT_EQ((*alerts)[0].alertname, "AnxinLinkDown");
  EXPECT_EQ((*alerts)[0].node, "node-3");
  EXPECT_EQ((*alerts)[0].device, "0");
  EXPECT_EQ((*alerts)[0].since, "2026-12-06 13:00:01 UTC");
  EXPECT_THAT((*alerts)[0].text, HasSubstr("Node: node-3"));
  EXPECT_THAT((*alerts)[0].text, ::testing::Not(HasSubstr("long text")));
  EXPECT_THAT(ParseCard("{\"msg_type\":\"image\"}", 1), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseCard("not json", 1), HasCode(ErrorCode::kInvalidArgument));
}

TEST(ReportTest, ADeviceFaultRowCompletesWithItsResolvedCard) {
  FaultPlan plan;
  plan.faults.push_back({.at_seconds = 10,
                         .kind = FaultKind::kTemperature,
                         .node = 1,
                         .npu = 3,
                         .to = 88,
                         .for_seconds = 45});
  auto rows = PlanRows(plan, 1);
  ASSERT_THAT(rows, SizeIs(1));
  rows[0].injected = 1000;
  Observations obs;
  obs.now = 1031;
  obs.alerts = {{"AnxinDeviceTemperatureHigh", "node-1", "3", "firing"},
                {"AnxinDeviceTemperatureHigh", "node-2", "3", "firing"}};
  obs.steps = {{{999, 1000.2}}, {{1000.4}}};
  obs.node_up = {true, true};
  UpdateRows(obs, rows);
  EXPECT_DOUBLE_EQ(rows[0].firing, 1031);
  EXPECT_DOUBLE_EQ(rows[0].stepping, 1000.4);
  EXPECT_LT(rows[0].card, 0);
  EXPECT_FALSE(rows[0].done);
  // The other NPU's card is not this row's.
  obs.cards = *ParseCard(Card("firing", "AnxinDeviceTemperatureHigh", "node-1", "2"), 1032);
  UpdateRows(obs, rows);
  EXPECT_LT(rows[0].card, 0);
  auto mine = *ParseCard(Card("firing", "AnxinDeviceTemperatureHigh", "node-1", "3"), 1033);
  auto resolved = *ParseCard(Card("resolved", "AnxinDeviceTemperatureHigh", "node-1", "3"), 1060);
  obs.cards.insert(obs.cards.end(), mine.begin(), mine.end());
  UpdateRows(obs, rows);
  EXPECT_DOUBLE_EQ(rows[0].card, 1033);
  EXPECT_FALSE(rows[0].done);
  obs.cards.insert(obs.cards.end(), resolved.begin(), resolved.end());
  UpdateRows(obs, rows);
  EXPECT_DOUBLE_EQ(rows[0].resolved, 1060);
  EXPECT_TRUE(rows[0].done);
  const std::string text = FormatReport(rows, obs.cards);
  EXPECT_THAT(text, HasSubstr("+31.0s"));
  EXPECT_THAT(text, HasSubstr("not needed"));
  EXPECT_THAT(text, HasSubstr("1 of 1 row(s) complete"));
  EXPECT_THAT(text, HasSubstr("0 duplicated"));
}

TEST(ReportTest, ARecoveryRowWaitsForEveryMemberNode) {
  FaultPlan plan;
  plan.faults.push_back({.at_seconds = 60, .kind = FaultKind::kCrash, .node = 1});
  auto rows = PlanRows(plan, 1);
  ASSERT_THAT(rows, SizeIs(1));
  EXPECT_EQ(rows[0].alert, "AnxinRunFault");
  EXPECT_FALSE(rows[0].prometheus);
  EXPECT_FALSE(rows[0].resolve_expected);
  rows[0].injected = 2000;
  Observations obs;
  obs.now = 2010;
  // An older generation (before the fault) must not be taken for this one.
  obs.incidents = {{Inc(1, 1500, 3, {"node-0", "node-1"}),
                    Inc(2, 2000.3, 9.5, {"node-0", "node-1"}, "cluster_restart")},
                   {Inc(2, 2000.2, -1, {"node-0", "node-1"})}};
  obs.cards = *ParseCard(Card("firing", "AnxinRunFault", "node-1", ""), 2001);
  UpdateRows(obs, rows);
  EXPECT_EQ(rows[0].generation, 2);
  EXPECT_DOUBLE_EQ(rows[0].recovery, 2000.2);
  EXPECT_THAT(rows[0].recovery_text, HasSubstr("generation 2: process_exit on node-1"));
  EXPECT_LT(rows[0].stepping, 0);  // node-1 has not stepped yet
  EXPECT_FALSE(rows[0].done);
  obs.incidents[1][0].time_to_recovery_seconds = 12;
  UpdateRows(obs, rows);
  EXPECT_NEAR(rows[0].stepping, 2012.2, 1e-3);
  EXPECT_TRUE(rows[0].done);
}

TEST(ReportTest, GenerationsAndCardsAreMatchedByTheFaultsClassAndNode) {
  FaultPlan plan;
  plan.faults.push_back({.at_seconds = 40, .kind = FaultKind::kHang, .node = 1});
  plan.faults.push_back({.at_seconds = 41, .kind = FaultKind::kCrash, .node = 2});
  plan.faults.push_back({.at_seconds = 90, .kind = FaultKind::kLostNode, .node = 1});
  auto rows = PlanRows(plan, 1);
  ASSERT_THAT(rows, SizeIs(3));
  rows[0].injected = 3000;
  rows[1].injected = 3001;
  Observations obs;
  obs.now = 3010;
  // Node 0 saw the hang first and opened generation 1 (node 1 heard of it
  // from etcd); node 2's crash opened generation 2, journaled earlier by node 0.
  auto hang = Inc(1, 3005.5, 0.3, {"node-0", "node-1", "node-2"}, "hang");
  hang.cluster->fault_node = "node-0";
  auto heard = hang;
  heard.fault.detector = "cluster";
  heard.fault.fault_class = "cluster_restart";
  auto crash = Inc(2, 3002, 1.5, {"node-0", "node-1", "node-2"}, "process_exit");
  crash.cluster->fault_node = "node-2";
  obs.incidents = {{crash, hang}, {crash, heard}, {crash, heard}};
  // Only node 0 sent anxin run's card for the hang; node 2 its own for the crash.
  auto crash_card = *ParseCard(Card("firing", "AnxinRunFault", "node-2", ""), 3002.1);
  auto hang_card = *ParseCard(Card("firing", "AnxinRunFault", "node-0", ""), 3005.6);
  obs.cards = crash_card;
  obs.cards.insert(obs.cards.end(), hang_card.begin(), hang_card.end());
  UpdateRows(obs, rows);
  EXPECT_EQ(rows[0].generation, 1);  // the earlier crash generation is not the hang's
  EXPECT_EQ(rows[1].generation, 2);
  EXPECT_DOUBLE_EQ(rows[0].card, 3005.6);
  EXPECT_DOUBLE_EQ(rows[1].card, 3002.1);
  EXPECT_TRUE(rows[0].done);
  EXPECT_TRUE(rows[1].done);
  // The lost node: the generation whose summary names it, opened by node 0.
  rows[2].injected = 3050;
  auto lost = Inc(3, 3056, 2, {"node-0", "node-2"}, "node_lost");
  lost.cluster->fault_node = "node-0";
  lost.fault.summary = "node node-2 is lost: its lease expired";
  auto lost1 = Inc(4, 3057, 2, {"node-0", "node-2"}, "node_lost");
  lost1.cluster->fault_node = "node-0";
  lost1.fault.summary = "node node-1 is lost: its lease expired";
  obs.incidents[0].push_back(lost);
  obs.incidents[0].push_back(lost1);
  UpdateRows(obs, rows);
  EXPECT_EQ(rows[2].generation, 4);
}

TEST(ReportTest, DuplicatedCardsAreNamed) {
  auto a = *ParseCard(Card("firing", "AnxinLinkDown", "node-3", "0"), 1);
  auto b = *ParseCard(Card("firing", "AnxinLinkDown", "node-3", "0"), 2);
  std::vector<CardAlert> cards = a;
  cards.insert(cards.end(), b.begin(), b.end());
  EXPECT_THAT(DuplicateCards(cards), ::testing::ElementsAre(HasSubstr("(2 times)")));
  EXPECT_TRUE(DuplicateCards(a).empty());
}

TEST(ReportTest, JsonRoundTrips) {
  FaultPlan plan;
  plan.faults.push_back(
      {.at_seconds = 10, .kind = FaultKind::kLinkDown, .node = 3, .npu = 0, .for_seconds = 40});
  auto rows = PlanRows(plan, 1);
  rows[0].injected = 5;
  rows[0].firing = 40;
  rows[0].recovery_text = "generation 1";
  auto cards = *ParseCard(Card("firing", "AnxinLinkDown", "node-3", "0"), 41);
  const nlohmann::json j = ReportToJson(rows, cards);
  EXPECT_DOUBLE_EQ(j["rows"][0]["seconds"]["firing"].get<double>(), 35);
  EXPECT_TRUE(j["rows"][0]["recovery_expected"].get<bool>());
  auto back = RowsFromJson(j);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(FormatReport(*back, *CardsFromJson(j)), FormatReport(rows, cards));
  EXPECT_THAT(RowsFromJson(nlohmann::json::object()), HasCode(ErrorCode::kDataLoss));
}

}  // namespace
}  // namespace anxin::lab
