#include "anxin/lab/faults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "anxin/base/testing.h"

namespace anxin::lab {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FaultPlanTest, ParsesEveryKindInTimeOrder) {
  auto plan = ParseFaultPlan(R"(faults:
  - {at: 50s, kind: crash, node: 1}
  - {at: 10s, kind: temperature, node: 0, npu: 3, to: 97, for: 40s}
  - {at: 20s, kind: hbm, node: 2, npu: 1, to: 0.95}
  - {at: 30s, kind: link_down, node: 3, npu: 0, for: 35s}
  - {at: 40s, kind: hccl_error, node: 2, rank: 1}
  - {at: 45s, kind: hang, node: 0}
  - {at: 1m, kind: lost_node, node: 3, for: 90s}
)",
                             "f.yaml", {.nodes = 4, .ranks_per_node = 2});
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->faults.size(), 7u);
  EXPECT_EQ(plan->faults[0].kind, FaultKind::kTemperature);
  EXPECT_EQ(plan->faults[0].npu, 3);
  EXPECT_DOUBLE_EQ(plan->faults[0].to, 97);
  EXPECT_DOUBLE_EQ(plan->faults[1].for_seconds, 75);  // hbm's default outlasts its 1m rule
  EXPECT_EQ(plan->faults[3].rank, 1);
  EXPECT_EQ(plan->faults[5].kind, FaultKind::kCrash);
  EXPECT_DOUBLE_EQ(plan->faults[6].at_seconds, 60);
  EXPECT_EQ(DescribeFault(plan->faults[0]), "node-0 NPU 3 to 97 C for 40 s");
  EXPECT_EQ(DescribeFault(plan->faults[2]), "node-3 NPU 0 port 0 link down for 35 s");
  EXPECT_THAT(ExpectedAlerts(plan->faults[0]),
              ElementsAre("AnxinDeviceTemperatureHigh", "AnxinDeviceTemperatureCritical"));
  EXPECT_THAT(ExpectedAlerts(plan->faults[1]), ElementsAre("AnxinHbmUsageHigh"));
  EXPECT_TRUE(ExpectedAlerts(plan->faults[5]).empty());
  EXPECT_FALSE(NeedsRecovery(plan->faults[0]));
  EXPECT_TRUE(NeedsRecovery(plan->faults[5]));
}

TEST(FaultPlanTest, ErrorsNameFileLineAndColumn) {
  const ClusterShape shape{.nodes = 4};
  auto e = ParseFaultPlan("faults:\n  - {at: 5s, kind: melt, node: 1}\n", "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("f.yaml:2:")));
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown kind 'melt'")));
  e = ParseFaultPlan("faults:\n  - {at: 5s, kind: crash, node: 4}\n", "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("f.yaml:2:")));
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("out of range")));
  e = ParseFaultPlan("faults:\n  - {at: 5s, kind: temperature, node: 1, npu: 2, too: 90}\n",
                     "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown key 'too'")));
  e = ParseFaultPlan("faults:\n  - {at: 5s, kind: lost_node, node: 1, for: 30s}\n", "f.yaml",
                     shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("f.yaml:2:")));
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("never fires AnxinAgentDown")));
  EXPECT_TRUE(ParseFaultPlan("faults:\n  - {at: 5s, kind: lost_node, node: 1, for: 80s}\n",
                             "f.yaml", shape));
  e = ParseFaultPlan("faults:\n  - {at: soon, kind: crash, node: 1}\n", "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("f.yaml:2:")));
  e = ParseFaultPlan("faults: [\n", "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("f.yaml:")));
  e = ParseFaultPlan("fault: []\n", "f.yaml", shape);
  EXPECT_THAT(e, HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown key 'fault'")));
}

TEST(FaultPlanTest, TheShippedDefaultParses) {
  auto plan = LoadFaultPlan(testing::SourcePath("examples/lab/faults.yaml"), {.nodes = 4});
  ASSERT_THAT(plan, IsOk());
  int alerts = 0, recoveries = 0;
  for (const LabFault& f : plan->faults) {
    alerts += static_cast<int>(ExpectedAlerts(f).size());
    recoveries += NeedsRecovery(f);
  }
  // The field report's four alerts (85 C, 95 C, HBM, link), the 97 C NPU's
  // warning as well, and a crash.
  EXPECT_EQ(alerts, 5);
  EXPECT_EQ(recoveries, 2);  // the link of the job's NPU 0, and the crash
}

TEST(FaultPlanTest, TheEveryKindExampleHasEachKindOnce) {
  auto plan = LoadFaultPlan(testing::SourcePath("examples/lab/every-kind.yaml"), {.nodes = 4});
  ASSERT_THAT(plan, IsOk());
  std::set<FaultKind> kinds;
  for (const LabFault& f : plan->faults) kinds.insert(f.kind);
  EXPECT_EQ(kinds.size(), 7u);
  EXPECT_EQ(plan->faults.size(), 8u);  // two temperatures: 88 C and 97 C
}

}  // namespace
}  // namespace anxin::lab
