#include "anxin/demo/demo.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin::demo {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DemoPlanTest, DefaultsPlayEveryStageInOrder) {
  auto plan = PlanDemo(DemoFlags{});
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->seconds, 6);
  EXPECT_EQ(plan->interval_seconds, 0.5);
  EXPECT_FALSE(plan->stay_seconds);
  EXPECT_THAT(plan->stages, ElementsAre("devices", "agent", "notify", "run"));
}

TEST(DemoPlanTest, ChosenStagesKeepTheDemosOrder) {
  DemoFlags f;
  f.stages = {"run", "devices"};
  f.stay = "10m";
  auto plan = PlanDemo(f);
  ASSERT_THAT(plan, IsOk());
  EXPECT_THAT(plan->stages, ElementsAre("devices", "run"));
  EXPECT_EQ(plan->stay_seconds, 600);
}

TEST(DemoPlanTest, BadFlagsNameTheFlag) {
  auto check = [](void (*change)(DemoFlags&), std::string_view message) {
    DemoFlags f;
    change(f);
    EXPECT_THAT(PlanDemo(f), HasCode(ErrorCode::kInvalidArgument, HasSubstr(message)));
  };
  check([](DemoFlags& f) { f.seconds = "2h"; }, "--seconds: expected a duration from 1s to 1h");
  check([](DemoFlags& f) { f.interval = "10ms"; }, "--interval: expected a duration of at least");
  check([](DemoFlags& f) { f.interval = "10s"; }, "--interval 10s is longer than --seconds 6s");
  check([](DemoFlags& f) { f.stay = "never"; }, "--stay: expected a duration above 0");
  check([](DemoFlags& f) { f.port = -1; }, "--port: expected 0 to 65535");
  check([](DemoFlags& f) { f.stages = {"devcies"}; },
        "--stages: unknown stage 'devcies' (known: devices, agent, notify, run)");
}

}  // namespace
}  // namespace anxin::demo
