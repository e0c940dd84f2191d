#include "anxin/base/testing.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace anxin::testing {
namespace {

using namespace std::chrono_literals;

TEST(WaitForTest, TrueAtOnceWithoutWaiting) {
  int polls = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return ++polls > 0; }, 10s));
  EXPECT_EQ(polls, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(WaitForTest, SeesWhatAnotherThreadDoes) {
  std::atomic<bool> done{false};
  std::jthread worker([&] {
    std::this_thread::sleep_for(30ms);
    done = true;
  });
  EXPECT_TRUE(WaitFor([&] { return done.load(); }, 20s));
}

TEST(WaitForTest, FalseAfterTheTimeout) {
  int polls = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitFor(
      [&] {
        ++polls;
        return false;
      },
      100ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_GT(polls, 2);  // polled again and again, not once
}

}  // namespace
}  // namespace anxin::testing
