// `anxin bench comm import` and `compare` through the program, on the real
// nccl-tests and hccl_test outputs in tests/fixtures/comm/, and the errors of
// bad flags and a missing MPI (no ranks are started here).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "anxin/base/testing.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kNccl = FixturePath("comm/nccl-tests-all_reduce-16xH100.txt");
const std::string kHccl = FixturePath("comm/hccl_test-all_reduce-8npu.txt");

TEST(BenchCommImport, NcclTestsTableKeepsThePrintedNumbers) {
  auto out = RunAnxin({"bench", "comm", "import", kNccl});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("all_reduce on 16 ranks"));
  EXPECT_THAT(out.stdout_text, HasSubstr("  8589934592    2147483648     float     sum      -1  "
                                         "47535.0  180.71  338.82       0  47743.0  179.92  337.35"
                                         "       0"));
  EXPECT_THAT(out.stdout_text, HasSubstr("# Avg bus bandwidth    : 70.742"));
  EXPECT_THAT(out.stdout_text, HasSubstr("#  Rank 15 on ztan-mig-gq73"));
}

TEST(BenchCommImport, HcclTestJson) {
  TempDir dir;
  auto out = RunAnxin({"--json", "bench", "comm", "import", kHccl, "--ranks", "8", "--op",
                       "all_reduce", "--save", dir / "h.json"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  auto j = nlohmann::json::parse(out.stdout_text);
  EXPECT_EQ(j["source"], "hccl_test");
  EXPECT_EQ(j["rows"].size(), 14u);
  EXPECT_DOUBLE_EQ(j["rows"][13]["out_of_place"]["algbw"].get<double>(), 23.76245);
  EXPECT_DOUBLE_EQ(j["rows"][13]["out_of_place"]["time_us"].get<double>(), 2630.20);
  EXPECT_EQ(j["bw_unit_bytes"].get<double>(), 1073741824.0);
  EXPECT_EQ(nlohmann::json::parse(dir.Read("h.json")), j);
}

TEST(BenchCommCompare, PerSizeChangeAndRegressionGate) {
  TempDir dir;
  // "after": the same run with every time 25% longer.
  std::string text = ReadTextFile(kNccl);
  auto out = RunAnxin({"--json", "bench", "comm", "import", kNccl});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  auto j = nlohmann::json::parse(out.stdout_text);
  for (auto& row : j["rows"]) {
    for (const char* mode : {"out_of_place", "in_place"}) {
      row[mode]["time_us"] = row[mode]["time_us"].get<double>() * 1.25;
      row[mode]["algbw"] = row[mode]["algbw"].get<double>() / 1.25;
      row[mode]["busbw"] = row[mode]["busbw"].get<double>() / 1.25;
    }
  }
  const std::string after = dir.Write("after.json", j.dump());
  auto same = RunAnxin({"bench", "comm", "compare", kNccl, kNccl});
  ASSERT_EQ(same.exit_code, 0) << same.stderr_text;
  EXPECT_THAT(same.stdout_text, HasSubstr("Mean change: time +0.0%"));
  auto slower = RunAnxin({"--json", "bench", "comm", "compare", kNccl, after});
  ASSERT_EQ(slower.exit_code, 0) << slower.stderr_text;
  auto c = nlohmann::json::parse(slower.stdout_text);
  EXPECT_NEAR(c["mean_time_change_pct"].get<double>(), 25.0, 1e-6);
  EXPECT_NEAR(c["worst_bw_change_pct"].get<double>(), -20.0, 1e-6);
  auto gated = RunAnxin({"bench", "comm", "compare", kNccl, after, "--max-regression", "10"});
  EXPECT_EQ(gated.exit_code, 1);
  EXPECT_THAT(gated.stderr_text, HasSubstr("dropped 20.0%"));
}

TEST(BenchCommErrors, BadInputIsOneLineAndStatusTwo) {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string says;
  } cases[] = {
      {{"bench", "comm", "--np", "2", "-b", "1M", "-e", "8"}, 2, "-e/--maxbytes"},
      {{"bench", "comm", "--np", "2", "--coll", "allreduse"}, 2, "allreduse"},
      {{"bench", "comm", "--np", "2", "-d", "float8"}, 2, "-d/--datatype"},
      {{"bench", "comm", "--np", "2", "-b", "12XB"}, 2, "12XB"},
      {{"bench", "comm", "--np", "2", "--algo", "rung"}, 2, "rabenseifner"},
      {{"bench", "comm", "--np", "2", "-g", "8"}, 2, "one device per rank"},
      {{"bench", "comm", "-b", "8"}, 2, "give --np N"},
      {{"bench", "comm", "--np", "2", "--coll", "sendrecv", "--sweep-algos"},
       2,
       "no algorithm choice"},
      {{"bench", "comm", "--np", "2", "-d", "half"}, 3, "16-bit"},
      {{"bench", "comm", "import", dir.Write("x.txt", "hello\n")}, 2, "not nccl-tests output"},
      {{"bench", "comm", "import", dir / "missing.txt"}, 2, "missing.txt"},
      {{"bench", "comm", "compare", kNccl, dir / "missing.json"}, 2, "missing.json"},
  };
  for (const auto& c : cases) {
    auto out = RunAnxin(c.args);
    EXPECT_EQ(out.exit_code, c.status) << c.says << ": " << out.stderr_text;
    EXPECT_THAT(out.stderr_text, StartsWith("error: ")) << c.says;
    EXPECT_THAT(out.stderr_text, HasSubstr(c.says));
    EXPECT_EQ(std::count(out.stderr_text.begin(), out.stderr_text.end(), '\n'), 1)
        << out.stderr_text;
  }
}

TEST(BenchCommErrors, MissingMpiIsAnEnvironmentError) {
  auto out = RunAnxin({"bench", "comm", "--np", "2", "-e", "64"}, {.env = {"PATH=/nonexistent"}});
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("mpirun not found on PATH"));
  auto bad = RunAnxin({"bench", "comm", "--np", "2", "-e", "64"},
                      {.env = {"ANXIN_COMM_WORKER=/nonexistent/worker"}});
  EXPECT_EQ(bad.exit_code, 3) << bad.stderr_text;
  EXPECT_THAT(bad.stderr_text, HasSubstr("ANXIN_COMM_WORKER=/nonexistent/worker"));
}

}  // namespace
}  // namespace anxin::comm
