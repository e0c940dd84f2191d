#include "anxin/base/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "anxin/base/monotonic_clock.h"

namespace anxin {
namespace {

using namespace std::chrono_literals;

TEST(VirtualClockTest, StartsWhereToldAndOnlyMovesForward) {
  VirtualClock clock(Clock::TimePoint(100s));
  EXPECT_EQ(clock.Now(), Clock::TimePoint(100s));
  clock.Advance(5s);
  EXPECT_EQ(clock.Now(), Clock::TimePoint(105s));
  clock.AdvanceTo(Clock::TimePoint(50s));  // earlier: ignored
  EXPECT_EQ(clock.Now(), Clock::TimePoint(105s));
  clock.Advance(-3s);  // negative: ignored
  EXPECT_EQ(clock.Now(), Clock::TimePoint(105s));
}

TEST(VirtualClockTest, SleepUntilWakesOnlyWhenTheDeadlineComes) {
  VirtualClock clock;
  std::atomic<bool> woke = false;
  std::jthread sleeper([&] {
    EXPECT_TRUE(clock.SleepUntil(clock.Now() + 10s));
    woke = true;
  });
  ASSERT_TRUE(clock.WaitForSleepers(1, 5000ms));
  clock.Advance(9s);
  // Still asleep: the sleeper count only drops when it wakes.
  ASSERT_TRUE(clock.WaitForSleepers(1, 5000ms));
  EXPECT_FALSE(woke);
  clock.Advance(1s);
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.sleepers(), 0);
}

TEST(VirtualClockTest, StopRequestEndsTheSleep) {
  VirtualClock clock;
  std::stop_source stop;
  std::atomic<int> result = -1;
  std::jthread sleeper([&] { result = clock.SleepUntil(clock.Now() + 1h, stop.get_token()); });
  ASSERT_TRUE(clock.WaitForSleepers(1, 5000ms));
  stop.request_stop();
  sleeper.join();
  EXPECT_EQ(result, 0);
  EXPECT_EQ(clock.Now(), Clock::TimePoint{});
}

TEST(VirtualClockTest, AutoAdvanceJumpsToTheDeadline) {
  VirtualClock clock;
  clock.set_auto_advance(true);
  EXPECT_TRUE(clock.SleepFor(90s));
  EXPECT_EQ(clock.Now(), Clock::TimePoint(90s));
  EXPECT_TRUE(clock.SleepUntil(Clock::TimePoint(10s)));  // already past
  EXPECT_EQ(clock.Now(), Clock::TimePoint(90s));
}

TEST(RealClockTest, PastDeadlineReturnsAtOnceAndStopInterrupts) {
  Clock& clock = RealClock();
  EXPECT_TRUE(clock.SleepUntil(clock.Now() - 1s));
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(clock.SleepUntil(clock.Now() + 1h, stop.get_token()));
  auto before = clock.Now();
  EXPECT_TRUE(clock.SleepFor(20ms));
  EXPECT_GE(clock.Now() - before, 20ms);
}

TEST(MonotonicClockTest, StartsAtTheWallTimeAndNeverGoesBack) {
  Clock& clock = MonotonicClock();
  const auto wall = RealClock().Now();
  const auto first = clock.Now();
  // Near the wall clock (unless it was set since the first call, which is
  // what this clock ignores), and never backward.
  EXPECT_LT(std::chrono::abs(first - wall), 1h);
  Clock::TimePoint last = first;
  for (int i = 0; i < 1000; ++i) {
    const auto now = clock.Now();
    ASSERT_GE(now, last);
    last = now;
  }
  EXPECT_TRUE(clock.SleepUntil(clock.Now() - 1s));
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(clock.SleepUntil(clock.Now() + 1h, stop.get_token()));
  const auto before = clock.Now();
  EXPECT_TRUE(clock.SleepFor(20ms));
  EXPECT_GE(clock.Now() - before, 20ms);
}

TEST(ClockTest, SecondsConversions) {
  EXPECT_DOUBLE_EQ(ToSeconds(1500ms), 1.5);
  EXPECT_EQ(FromSeconds(2.25), 2250ms);
}

}  // namespace
}  // namespace anxin
