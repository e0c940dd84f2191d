#include "anxin/base/stop_token.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>

#include "anxin/base/clock.h"

namespace anxin {
namespace {

// Runs `body` in a child process (a single thread, so that the signals it
// sends itself reach only what the body sets up); returns its wait status.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(StopOnSignalsTest, TriggerStopsTheTokenAndWakesTheWaiter) {
  StopOnSignals stop;
  EXPECT_FALSE(stop.stop_requested());
  EXPECT_EQ(stop.WaitFor(0.01), 0);  // nothing yet: the time runs out
  std::jthread t([&] { stop.Trigger(SIGTERM); });
  EXPECT_EQ(stop.WaitFor(0), SIGTERM);
  EXPECT_TRUE(stop.token().stop_requested());
  EXPECT_EQ(stop.signal(), SIGTERM);
  // A clock's sleep ends with it.
  EXPECT_FALSE(RealClock().SleepFor(std::chrono::hours(1), stop.token()));
}

TEST(StopOnSignalsTest, ASignalRequestsTheStop) {
  const int status = InChild([] {
    StopOnSignals stop;
    kill(getpid(), SIGINT);
    if (stop.WaitFor(10) != SIGINT) return 1;
    return stop.token().stop_requested() ? 0 : 2;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(StopOnSignalsTest, ASecondSignalEndsTheProgram) {
  const int status = InChild([] {
    StopOnSignals stop;
    kill(getpid(), SIGTERM);
    if (stop.WaitFor(10) != SIGTERM) return 1;
    kill(getpid(), SIGTERM);
    // The signal ends the process; the bound only keeps a broken build from hanging.
    for (int i = 0; i < 1000; ++i) usleep(10000);
    return 3;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(StopOnSignalsTest, RecordedSecondSignalsKeepTheProgram) {
  const int status = InChild([] {
    {
      StopOnSignals stop(SecondSignal::kRecorded);
      kill(getpid(), SIGTERM);
      if (stop.WaitFor(10) != SIGTERM) return 1;
      kill(getpid(), SIGINT);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (stop.signal() != SIGINT) {
        if (std::chrono::steady_clock::now() > deadline) return 2;
        usleep(1000);
      }
    }
    // Gone with the object: the thread's mask is what it was.
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    return sigismember(&mask, SIGTERM) ? 4 : 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(WaitForStopTest, ReturnsTheSignalOrZeroWhenTheTimeIsUp) {
  const int status = InChild([] {
    BlockStopSignals();
    if (WaitForStop(0.02) != 0) return 1;
    kill(getpid(), SIGTERM);
    return WaitForStop(10) == SIGTERM ? 0 : 2;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace anxin
