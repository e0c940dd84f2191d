#include "anxin/lab/procs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::lab {
namespace {

using ::anxin::testing::IsOk;

TEST(LabProcsTest, StartTicksTellAProcessFromItsPid) {
  EXPECT_GT(ProcessStartTicks(::getpid()), 0u);
  EXPECT_EQ(ProcessStartTicks(-1), 0u);
}

// A process that names the lab's directory is found and stopped, even when
// nothing recorded it; a recorded pid whose start time differs is not
// signalled.
TEST(LabProcsTest, StopLabLeavesNothingThatNamesTheDirectory) {
  testing::TempDir dir;
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 60; true", dir.path() + "/n/0/ckpt"};
  auto child = Subprocess::Start(std::move(o));
  ASSERT_THAT(child, IsOk());
  ASSERT_TRUE(testing::WaitFor([&] { return !ProcessesUnder(dir.path()).empty(); }));
  const nlohmann::json record = {
      {"lab", {{"pid", ::getpid()}, {"start", 1}, {"port", 0}}},
      {"children", {{{"name", "not-it"}, {"pid", 1}, {"start", 12345}, {"port", 0}}}}};
  dir.Write("processes.json", record.dump());
  EXPECT_FALSE(RunningLab(dir.path()).has_value());
  DownSummary s;
  ASSERT_THAT(StopLab(dir.path(), &s), IsOk());
  EXPECT_EQ(s.left, 0);
  EXPECT_GE(s.stopped, 1);
  EXPECT_TRUE(ProcessesUnder(dir.path()).empty());
  auto st = (*child)->Wait();
  ASSERT_THAT(st, IsOk());
  EXPECT_EQ(st->signal, SIGKILL);
}

}  // namespace
}  // namespace anxin::lab
