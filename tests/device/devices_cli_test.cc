// Runs the built `anxin` program (ANXIN_BINARY_DIR/anxin) the way a user
// does and checks its output and exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "anxin/base/testing.h"

namespace {

using ::anxin::testing::RunAnxin;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string Scenario(const char* name) {
  return SourcePath(std::string("examples/scenarios/") + name);
}

TEST(DevicesCliTest, JsonOfAScenarioFile) {
  auto r =
      RunAnxin({"devices", "--scenario", Scenario("faults.yaml"), "--at", "75s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["source"], "sim, scenario faults (8 x Ascend910C)");
  ASSERT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["devices"][0]["model"], "Ascend910C");
  EXPECT_EQ(j["devices"][0]["hbm_total_bytes"], 64ull << 30);
  EXPECT_EQ(j["devices"][3]["health"], "Critical");
  EXPECT_EQ(j["devices"][4]["links"][1]["up"], false);
  EXPECT_EQ(j["devices"][5]["utilisation_percent"], 0.0);
  EXPECT_EQ(j["devices"][7]["health"], "Lost");
  // The same scenario at the same virtual time reads the same.
  auto again =
      RunAnxin({"devices", "--scenario", Scenario("faults.yaml"), "--at", "75s", "--json"});
  nlohmann::json j2 = nlohmann::json::parse(again.stdout_text);
  EXPECT_EQ(j["devices"], j2["devices"]);
}

TEST(DevicesCliTest, DefaultTableAndGlobalJsonFlag) {
  auto r = RunAnxin({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("sim, scenario default (8 x Ascend910C)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("| 7     910C                | OK            |"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("\x1b[")));  // not a terminal: no colours
  auto j = RunAnxin({"--json", "devices"});
  ASSERT_EQ(j.exit_code, 0) << j.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(j.stdout_text)["devices"].size(), 8u);
}

TEST(DevicesCliTest, WatchPrintsFramesAsJsonLines) {
  auto r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval",
                          "2s", "--count", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::istringstream in(r.stdout_text);
  std::vector<nlohmann::json> frames;
  for (std::string line; std::getline(in, line);) frames.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0]["frame"], 0);
  EXPECT_EQ(frames[3]["frame"], 3);
  // 2 s apart on the scenario's clock; NPU 3 heats up frame by frame.
  double t0 = frames[0]["devices"][3]["temperature_celsius"];
  double t3 = frames[3]["devices"][3]["temperature_celsius"];
  EXPECT_GT(t3, t0 + 20);
}

TEST(DevicesCliTest, WatchAsTextEndsWithWhatChanged) {
  auto r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval",
                          "3s", "--count", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text,
              HasSubstr("What changed in 6.0 s:\n  NPU 3: health OK -> Warning; temperature"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 5: HBM used"));
}

TEST(DevicesCliTest, BadScenarioIsExitTwoWithLineAndColumn) {
  TempDir dir;
  std::string path =
      dir.Write("bad.yaml", "devices:\n  count: 4\nevents:\n  - {at: 1s, device: 9, kind: hang}\n");
  auto r = RunAnxin({"devices", "--scenario", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr(path + ":4:22: events[0].device: device 9 does not exist"));
  EXPECT_TRUE(r.stdout_text.empty());
}

// A directory or an empty file where a scenario file is expected: exit 2
// naming the flag.
TEST(DevicesCliTest, ScenarioThatIsNotAFileNamesTheFlag) {
  TempDir dir;
  auto directory = RunAnxin({"devices", "--scenario", dir.path()});
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_THAT(directory.stderr_text, StartsWith("error: --scenario: "));
  EXPECT_THAT(directory.stderr_text, HasSubstr("directory"));
  std::string empty = dir.Write("empty.yaml", "");
  auto e = RunAnxin({"devices", "--scenario", empty});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_THAT(e.stderr_text, HasSubstr("--scenario: " + empty + ": the file is empty"));
  auto config = RunAnxin({"--config", dir.path(), "version"});
  EXPECT_EQ(config.exit_code, 2);
  EXPECT_THAT(config.stderr_text, StartsWith("error: --config " + dir.path() + ": is a directory"));
  auto env = RunAnxin({"version"}, {.env = {"ANXIN_CONFIG=" + empty}});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.stderr_text, StartsWith("error: ANXIN_CONFIG " + empty + ": the file is empty"));
}

TEST(DevicesCliTest, OtherBadInputIsExitTwo) {
  auto missing = RunAnxin({"devices", "--scenario", "/nonexistent/x.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr("/nonexistent/x.yaml"));
  auto backend = RunAnxin({"devices", "--backend", "nope"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_THAT(backend.stderr_text, HasSubstr("unknown device backend 'nope'"));
  auto interval = RunAnxin({"devices", "--watch", "--interval", "soon"});
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_THAT(interval.stderr_text, HasSubstr("--interval"));
  auto flag = RunAnxin({"devices", "--bogus"});
  EXPECT_EQ(flag.exit_code, 2);
  auto demo = RunAnxin({"demo", "--seconds", "0"});
  EXPECT_EQ(demo.exit_code, 2);
}

// Counts that make no sense, and options that only go with --watch, are
// refused with one line naming the flag.
TEST(DevicesCliTest, CountIsCheckedAndGoesWithWatch) {
  auto negative = RunAnxin({"devices", "--watch", "--count", "-1"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_EQ(negative.stderr_text.find('\n'), negative.stderr_text.size() - 1)
      << negative.stderr_text;
  EXPECT_THAT(negative.stderr_text,
              StartsWith("error: --count: expected a whole number of frames, 0 or more, got '-1'"));
  auto alone = RunAnxin({"devices", "--count", "3"});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_THAT(alone.stderr_text, HasSubstr("--count requires --watch"));
  EXPECT_TRUE(alone.stdout_text.empty());
  auto interval = RunAnxin({"devices", "--interval", "2s"});
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_THAT(interval.stderr_text, HasSubstr("--interval requires --watch"));
}

// A mistyped command is named, with the nearest real one, on one line.
TEST(CliErrorsTest, UnknownCommandsAreNamedWithTheNearestOne) {
  auto top = RunAnxin({"devics"});
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_EQ(top.stderr_text,
            "error: unknown command 'devics' (did you mean 'devices'?); see 'anxin --help'\n");
  auto nested = RunAnxin({"--log-level", "warn", "mem", "replai", "x.pickle"});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_EQ(nested.stderr_text,
            "error: unknown command 'replai' for 'anxin mem' (did you mean 'replay'?); see "
            "'anxin mem --help'\n");
  auto far = RunAnxin({"frobnicate"});
  EXPECT_EQ(far.stderr_text, "error: unknown command 'frobnicate'; see 'anxin --help'\n");
  auto none = RunAnxin({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.stderr_text, StartsWith("error: a command is required; see 'anxin --help'"));
  auto group = RunAnxin({"mem"});
  EXPECT_EQ(group.exit_code, 2);
  EXPECT_THAT(group.stderr_text, StartsWith("error: 'anxin mem' needs a command: "));
  auto flag = RunAnxin({"devices", "--bogus"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.stderr_text, StartsWith("error: "));
  EXPECT_EQ(flag.stderr_text.find('\n'), flag.stderr_text.size() - 1) << flag.stderr_text;
  auto help = RunAnxin({"mem", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.stdout_text, HasSubstr("replay"));
}

// The demo names the node it plays, checks everything before printing, and
// speaks JSON when asked.
TEST(DemoCliTest, NamesTheNodeItPlays) {
  auto r = RunAnxin({"demo", "--scenario", "h100-node", "--seconds", "1", "--interval", "0.5s"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("== stage 1/1: a simulated node (sim, scenario h100-node"));
  EXPECT_THAT(r.stdout_text, HasSubstr("H100"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("910C")));
}

TEST(DemoCliTest, BadInputIsReportedBeforeAnythingIsPrinted) {
  auto scenario = RunAnxin({"demo", "--scenario", "/nonexistent/s.yaml"});
  EXPECT_EQ(scenario.exit_code, 2);
  EXPECT_EQ(scenario.stdout_text, "");
  EXPECT_THAT(scenario.stderr_text, StartsWith("error: --scenario /nonexistent/s.yaml: "));
  auto interval = RunAnxin({"demo", "--seconds", "1s", "--interval", "2s"});
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_EQ(interval.stdout_text, "");
  EXPECT_THAT(interval.stderr_text, HasSubstr("--interval 2s is longer than --seconds 1s"));
}

TEST(DemoCliTest, GlobalJsonGivesOneSummaryDocument) {
  auto r = RunAnxin({"--json", "demo", "--seconds", "3", "--interval", "1s"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["node"], "sim, scenario demo (8 x Ascend910C)");
  ASSERT_EQ(j["stages"].size(), 1u);
  EXPECT_EQ(j["stages"][0]["name"], "devices");
  ASSERT_FALSE(j["stages"][0]["changes"].empty());
  EXPECT_THAT(j["stages"][0]["changes"][0].get<std::string>(), HasSubstr("NPU 3"));
}

TEST(DemoCliTest, ShortDemoRunsAndSummarises) {
  auto r = RunAnxin({"demo", "--seconds", "1", "--interval", "0.5s"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("== stage 1/1"));
  EXPECT_THAT(r.stdout_text, HasSubstr("sim, scenario demo (8 x Ascend910C)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("What changed in 1.0 s:"));
  EXPECT_THAT(r.stdout_text, HasSubstr("Demo done."));
}

}  // namespace
