#include "anxin/run/rank_fence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::run {
namespace {

using ::anxin::testing::IsOk;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// The state letter of /proc/PID/stat: 'T' when stopped.
char ProcState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

std::unique_ptr<Subprocess> Sleeper() {
  SubprocessOptions o;
  o.argv = {"/bin/sleep", "30"};
  o.timeout = 60s;
  auto p = Subprocess::Start(std::move(o));
  EXPECT_THAT(p, IsOk());
  return p ? std::move(*p) : nullptr;
}

RunLease LeaseFor(Steady::duration run_for) {
  RunLease l;
  l.renewed = Steady::now();
  l.fence_at = l.renewed + run_for;
  l.expires_at = l.fence_at + 1s;
  l.holder = "test's lease (TTL 2 s)";
  return l;
}

class RankFenceTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      ASSERT_THAT(fence_.StartGuard(), IsOk());
    }
  }
  RankFence fence_;
};

TEST_P(RankFenceTest, RenewedInTimeTheRanksRunOn) {
  auto p = Sleeper();
  ASSERT_TRUE(p);
  fence_.Guard(p->pgid());
  for (int i = 0; i < 5; ++i) {
    fence_.RunUntil(LeaseFor(300ms));
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(fence_.Tripped().has_value());
  EXPECT_EQ(ProcState(p->pid()), 'S');
  fence_.Release(p->pgid());
}

TEST_P(RankFenceTest, NotRenewedTheRanksAreStoppedAndStayStopped) {
  auto p = Sleeper();
  ASSERT_TRUE(p);
  fence_.Guard(p->pgid());
  fence_.RunUntil(LeaseFor(200ms));
  // With the guard the stop comes from it, without a call here.
  if (GetParam()) {
    EXPECT_TRUE(WaitFor([&] { return ProcState(p->pid()) == 'T'; }, 5s)) << ProcState(p->pid());
  }
  ASSERT_TRUE(WaitFor([&] { return fence_.Tripped().has_value(); }, 5s));
  EXPECT_TRUE(WaitFor([&] { return ProcState(p->pid()) == 'T'; }, 5s)) << ProcState(p->pid());
  EXPECT_THAT(fence_.Tripped()->why, HasSubstr("test's lease (TTL 2 s) was not renewed for 0.2 s"));
  // A renewal after the trip does not continue them: their generation is gone.
  fence_.RunUntil(LeaseFor(10s));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(ProcState(p->pid()), 'T');
  EXPECT_TRUE(fence_.Tripped().has_value());
  // A rank guarded while tripped is stopped at once.
  auto q = Sleeper();
  ASSERT_TRUE(q);
  fence_.Guard(q->pgid());
  EXPECT_TRUE(WaitFor([&] { return ProcState(q->pid()) == 'T'; }, 5s));
  fence_.Release(p->pgid());
  fence_.Release(q->pgid());
  // Reset with the lease renewed: new ranks run.
  fence_.Reset();
  auto r = Sleeper();
  ASSERT_TRUE(r);
  fence_.Guard(r->pgid());
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(fence_.Tripped().has_value());
  EXPECT_EQ(ProcState(r->pid()), 'S');
  fence_.Release(r->pgid());
}

TEST_P(RankFenceTest, AResetWhileTheLeaseIsStillOverdueTripsAgain) {
  fence_.RunUntil(LeaseFor(50ms));
  ASSERT_TRUE(WaitFor([&] { return fence_.Tripped().has_value(); }, 5s));
  fence_.Reset();
  EXPECT_TRUE(fence_.Tripped().has_value());
  auto p = Sleeper();
  ASSERT_TRUE(p);
  fence_.Guard(p->pgid());
  EXPECT_TRUE(WaitFor([&] { return ProcState(p->pid()) == 'T'; }, 5s));
  fence_.Release(p->pgid());
}

TEST_P(RankFenceTest, ARenewalThatComesAfterTheFenceTimeTripsIt) {
  // The supervisor was stalled past the fence time: when its next renewal
  // arrives the ranks must not simply run on.
  fence_.RunUntil(LeaseFor(50ms));
  std::this_thread::sleep_for(1200ms);
  fence_.RunUntil(LeaseFor(10s));
  auto trip = fence_.Tripped();
  ASSERT_TRUE(trip.has_value());
  EXPECT_THAT(trip->why, HasSubstr("not renewed for 0.1 s"));
  if (!GetParam()) {
    EXPECT_THAT(trip->why, HasSubstr("this process was stalled"));
  }
}

TEST_P(RankFenceTest, FenceStopsAtOnce) {
  auto p = Sleeper();
  ASSERT_TRUE(p);
  fence_.Guard(p->pgid());
  fence_.RunUntil(LeaseFor(10s));
  fence_.Fence("the lease expired at the store");
  EXPECT_TRUE(WaitFor([&] { return ProcState(p->pid()) == 'T'; }, 5s));
  ASSERT_TRUE(fence_.Tripped().has_value());
  EXPECT_EQ(fence_.Tripped()->why, "the lease expired at the store");
  fence_.Release(p->pgid());
}

INSTANTIATE_TEST_SUITE_P(GuardOrNot, RankFenceTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Guard" : "InProcess"; });

}  // namespace
}  // namespace anxin::run
