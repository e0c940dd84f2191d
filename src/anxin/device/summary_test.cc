#include "anxin/device/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/device/sim/sim_backend.h"

namespace anxin::device {
namespace {

using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

Snapshot At(sim::SimBackend& b, VirtualClock& clock, double t) {
  clock.AdvanceTo(Clock::TimePoint{} + FromSeconds(t));
  auto s = TakeSnapshot(b, clock);
  EXPECT_THAT(s, IsOk());
  return *s;
}

TEST(SummaryTest, DemoScenarioChangesTwoDevices) {
  auto scenario = sim::BuiltinScenario("demo");
  ASSERT_THAT(scenario, IsOk());
  VirtualClock clock;
  sim::SimBackend b(std::move(*scenario), clock);
  Snapshot first = At(b, clock, 0);
  Snapshot last = At(b, clock, 6);
  std::vector<std::string> lines = DescribeChanges(first, last);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], ::testing::MatchesRegex("NPU 3: health OK -> Warning; temperature 5[0-9] C "
                                                "-> 9[5-7] C \\(\\+4[0-9] C\\), at its 95 C "
                                                "throttle point"));
  EXPECT_THAT(lines[1], HasSubstr("NPU 5: HBM used 52."));
  EXPECT_THAT(lines[1], HasSubstr("-> 62."));
  EXPECT_THAT(lines[1], HasSubstr("of 64 GiB, above the 90% alert line"));
  EXPECT_TRUE(DescribeChanges(first, first).empty());
}

TEST(SummaryTest, FaultsScenarioNamesEachKindOfChange) {
  auto scenario = sim::BuiltinScenario("faults");
  ASSERT_THAT(scenario, IsOk());
  VirtualClock clock;
  sim::SimBackend b(std::move(*scenario), clock);
  Snapshot first = At(b, clock, 0);
  Snapshot last = At(b, clock, 75);
  std::string all = ::testing::PrintToString(DescribeChanges(first, last));
  EXPECT_THAT(all, HasSubstr("NPU 2: HBM used"));
  EXPECT_THAT(all, HasSubstr("NPU 3: health OK -> Critical; error code 80E18005 raised (critical); "
                             "2 new double-bit ECC errors; 12 new single-bit ECC errors"));
  EXPECT_THAT(all, HasSubstr("NPU 4: link on port 1 down"));
  EXPECT_THAT(all, HasSubstr("NPU 5: utilisation 8"));
  EXPECT_THAT(all, HasSubstr("NPU 6: health OK -> Warning"));
  EXPECT_THAT(all, HasSubstr("NPU 7: lost"));
  Snapshot later = At(b, clock, 110);
  std::string back = ::testing::PrintToString(DescribeChanges(last, later));
  EXPECT_THAT(back, HasSubstr("NPU 3: health Critical -> OK; error code 80E18005 cleared"));
  EXPECT_THAT(back, HasSubstr("NPU 4: link on port 1 back up"));
}

}  // namespace
}  // namespace anxin::device
