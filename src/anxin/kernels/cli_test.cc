// The `anxin buckets plan` and `anxin precision check` commands as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "anxin/base/testing.h"

namespace anxin::kernels {
namespace {

using ::testing::HasSubstr;

TEST(BucketsPlanCommand, PrintsTheTableAndExitsTwoOnBadInput) {
  testing::TempDir dir;
  std::string ok = dir.Write("l.txt", "700\n1200\n3900\n");
  auto out = testing::RunAnxin({"buckets", "plan", "--lengths", ok, "--max-buckets", "2"});
  EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("optimum"));
  EXPECT_THAT(out.stdout_text, HasSubstr("1280 3968"));
  auto js = testing::RunAnxin({"--json", "buckets", "plan", "--lengths", ok, "--max-buckets", "2"});
  ASSERT_EQ(js.exit_code, 0) << js.stderr_text;
  auto j = nlohmann::json::parse(js.stdout_text);
  EXPECT_EQ(j["schemes"][2]["padded_tokens"], 728);

  std::string bad = dir.Write("bad.txt", "10\n20\n-4\n");
  auto b = testing::RunAnxin({"buckets", "plan", "--lengths", bad});
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_THAT(b.stderr_text, HasSubstr("bad.txt:3"));
  std::string empty = dir.Write("empty.txt", "");
  EXPECT_EQ(testing::RunAnxin({"buckets", "plan", "--lengths", empty}).exit_code, 2);
  EXPECT_EQ(testing::RunAnxin({"buckets", "plan", "--lengths", ok, "--max-buckets", "0"}).exit_code,
            2);
  EXPECT_EQ(
      testing::RunAnxin({"buckets", "plan", "--lengths", dir.path() + "/missing.txt"}).exit_code,
      2);
}

TEST(PrecisionCheckCommand, TableJsonAndExitCodes) {
  const std::string dump = testing::FixturePath("kernels/precision-dump");
  auto out = testing::RunAnxin({"precision", "check", dump});
  EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("4 flagged"));
  EXPECT_THAT(out.stdout_text, HasSubstr("fp16-overflow"));
  auto js = testing::RunAnxin({"--json", "precision", "check", dump});
  ASSERT_EQ(js.exit_code, 1) << js.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(js.stdout_text)["flagged"], 4);
  auto clean = testing::RunAnxin(
      {"precision", "check", testing::FixturePath("msprobe/gpu_dump/step0/proc2016")});
  EXPECT_EQ(clean.exit_code, 0) << clean.stderr_text;
  EXPECT_THAT(clean.stdout_text, HasSubstr("0 flagged"));
  testing::TempDir dir;
  EXPECT_EQ(testing::RunAnxin({"precision", "check", dir.path()}).exit_code, 2);
}

}  // namespace
}  // namespace anxin::kernels
