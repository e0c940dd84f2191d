// Runs the built `anxin mem` the way a user (or a CI gate) does: what it
// prints and the exit status it ends with.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "anxin/base/testing.h"

namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string Snapshot(const char* name) { return FixturePath(std::string("mem-traces/") + name); }

// A trace anxin cannot run on the device is a finding (exit 1), said before
// anything else, and never headlined as a saving.
TEST(MemCliTest, ReplayWithOomsSaysSoFirstAndExitsOne) {
  auto r = RunAnxin(
      {"mem", "replay", Snapshot("cs336-memory_ctx256_forward_.pickle"), "--capacity", "20GiB"});
  ASSERT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, StartsWith("OOM: "));
  EXPECT_THAT(r.stdout_text, HasSubstr("anxin failed"));
  EXPECT_THAT(r.stdout_text, HasSubstr("within --capacity 20.00 GiB"));
  EXPECT_THAT(r.stdout_text, HasSubstr("anxin vs recorded PyTorch: not compared"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("less)")));
}

TEST(MemCliTest, ReplayThatFitsExitsZero) {
  auto r = RunAnxin({"mem", "replay", Snapshot("cs336b-memory_forward_bf16_128.pickle")});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, StartsWith("trace "));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("OOM")));
  EXPECT_THAT(r.stdout_text, HasSubstr("anxin vs recorded PyTorch: peak reserved -"));
}

// A directory, an empty file or a file in neither format is an input error
// (exit 2) naming the file, not a table of zeros.
TEST(MemCliTest, ReplayOfWhatIsNoTraceIsAnInputError) {
  TempDir dir;
  std::string empty = dir.Write("empty.pickle", "");
  std::string text = dir.Write("notes.pickle", "not a snapshot\n");
  struct Case {
    std::string path, message;
  };
  for (const Case& c :
       {Case{dir.path(), "is a directory, not a file"}, Case{empty, "the file is empty"},
        Case{text, "is not a PyTorch memory snapshot"}}) {
    auto r = RunAnxin({"mem", "replay", c.path});
    EXPECT_EQ(r.exit_code, 2) << c.path << ": " << r.stdout_text;
    EXPECT_EQ(r.stdout_text, "") << c.path;
    EXPECT_THAT(r.stderr_text, StartsWith("error: trace " + c.path + ": " + c.message));
  }
}

}  // namespace
