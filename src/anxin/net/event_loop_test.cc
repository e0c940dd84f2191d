#include "anxin/net/event_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "anxin/base/testing.h"

namespace anxin::net {
namespace {

using ::anxin::testing::IsOk;

TEST(EventLoopTest, CallAndWaitReturnsWhatTheLoopThreadComputed) {
  EventLoop loop;
  ASSERT_THAT(loop.Init(), IsOk());
  std::jthread runner([&] { loop.Run(); });
  std::thread::id loop_thread;
  std::optional<std::string> text = loop.CallAndWait(
      [&] {
        loop_thread = std::this_thread::get_id();
        return std::string("from the loop");
      },
      std::chrono::seconds(10));
  loop.Stop();
  runner.join();
  EXPECT_EQ(text, "from the loop");
  EXPECT_NE(loop_thread, std::this_thread::get_id());
}

TEST(EventLoopTest, CallAndWaitGivesNulloptWhenTheLoopDoesNotRun) {
  EventLoop loop;
  ASSERT_THAT(loop.Init(), IsOk());
  // No thread runs the loop: the call is posted but never run.
  EXPECT_EQ(loop.CallAndWait([] { return 7; }, std::chrono::milliseconds(20)), std::nullopt);
}

}  // namespace
}  // namespace anxin::net
