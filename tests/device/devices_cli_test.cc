// Runs the built `anxin` program (ANXIN_BINARY_DIR/anxin) the way a user
// does and checks its output and exit status.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "anxin/base/testing.h"
#include "anxin/device/ascend/npu_smi_testing.h"

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
  auto r = RunAnxin({"devices", "--scenario", Scenario("faults.yaml"), "--at", "75s", "--json"});
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
  auto r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval", "2s",
                     "--count", "4", "--json"});
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
  auto r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval", "3s",
                     "--count", "3"});
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

// The nvml backend, with the fake libnvidia-ml.so.1 found through
// LD_LIBRARY_PATH as a user's machine finds the real one.
std::vector<std::string> FakeNvmlEnv() {
  return {std::string("LD_LIBRARY_PATH=") + FAKE_NVML_DIR,
          "ANXIN_FAKE_NVML_SCENARIO=" + SourcePath("tests/device/fake_nvml/h200-node.txt")};
}

// The keys of a device in the JSON document, to compare backends' shapes.
std::vector<std::string> Keys(const nlohmann::json& device) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : device.items()) keys.push_back(k);
  return keys;
}

TEST(DevicesCliTest, NvmlTableFromTheDriverLibrary) {
  auto r = RunAnxin({"devices", "--backend", "nvml"}, {.env = FakeNvmlEnv()});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("| anxin devices   nvml (4 x H200)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("| GPU   Name                | Health        |"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 0     H200                | OK            | 512.3       41"));
  // Power not supported on GPU 1: a dash, not a made-up 0.
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 1     H200                | OK            | -           33"));
  EXPECT_THAT(r.stdout_text, HasSubstr("| 2     unknown             | Lost          |"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 0                         | 0000:19:00.0  | 97          18 / 18"));
  EXPECT_THAT(r.stdout_text, HasSubstr("GPU 2: lost (NVML_ERROR_GPU_IS_LOST)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("GPU 3: 88 C: at its 87 C throttle point"));
  EXPECT_THAT(r.stdout_text, HasSubstr("GPU 3: link on port 5 is down"));
}

TEST(DevicesCliTest, NvmlJsonHasTheShapeOfSim) {
  auto r = RunAnxin({"devices", "--backend", "nvml", "--json"}, {.env = FakeNvmlEnv()});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["source"], "nvml (4 x H200)");
  ASSERT_EQ(j["devices"].size(), 4u);
  EXPECT_EQ(j["devices"][0]["power_watts"], 512.3);
  EXPECT_EQ(j["devices"][0]["hbm_used_bytes"], 86973087744ull);
  EXPECT_TRUE(j["devices"][1]["power_watts"].is_null());
  EXPECT_TRUE(j["devices"][1]["ecc"]["double_bit"].is_null());
  EXPECT_EQ(j["devices"][2]["health"], "Lost");
  EXPECT_EQ(j["devices"][3]["throttled"], true);
  auto sim = RunAnxin({"devices", "--scenario", "h100-node", "--json"});
  ASSERT_EQ(sim.exit_code, 0) << sim.stderr_text;
  nlohmann::json s = nlohmann::json::parse(sim.stdout_text);
  EXPECT_EQ(Keys(j), Keys(s));
  EXPECT_EQ(Keys(j["devices"][0]), Keys(s["devices"][0]));
}

TEST(DevicesCliTest, NvmlWithoutTheLibraryIsExitThreeWithAdvice) {
  auto r = RunAnxin({"devices", "--backend", "nvml"},
                    {.env = {"ANXIN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.stderr_text, StartsWith("error: nvml: cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(r.stderr_text, HasSubstr("install the NVIDIA driver"));
  EXPECT_EQ(r.stderr_text.find('\n'), r.stderr_text.size() - 1) << r.stderr_text;
  EXPECT_TRUE(r.stdout_text.empty());
  auto driver = RunAnxin(
      {"devices", "--backend", "nvml", "--json"},
      {.env = {std::string("LD_LIBRARY_PATH=") + FAKE_NVML_DIR,
               "ANXIN_FAKE_NVML_SCENARIO=" + SourcePath("tests/device/fake_nvml/no-driver.txt")}});
  EXPECT_EQ(driver.exit_code, 3);
  EXPECT_THAT(driver.stderr_text, HasSubstr("nvmlInit failed: Driver Not Loaded"));
  // Where the loader finds no library at all (this machine has no driver).
  void* real = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (real != nullptr) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a real libnvidia-ml.so.1";
  }
  TempDir empty;
  auto none =
      RunAnxin({"devices", "--backend", "nvml"}, {.env = {"LD_LIBRARY_PATH=" + empty.path()}});
  EXPECT_EQ(none.exit_code, 3);
  EXPECT_THAT(none.stderr_text, StartsWith("error: nvml: cannot load libnvidia-ml.so.1"));
}

// The ascend backend's npu-smi fallback, with fake npu-smi and hccn_tool on
// PATH printing a real capture.
std::vector<std::string> FakeAscendEnv(const TempDir& dir, const char* capture) {
  dir.Write("info.txt", ::anxin::testing::ReadTextFile(
                            ::anxin::testing::FixturePath(std::string("ascend/") + capture)));
  return {"PATH=" + SourcePath("tests/device/fake_ascend") + ":/usr/bin:/bin",
          "ANXIN_FAKE_ASCEND_DIR=" + dir.path(), "ANXIN_DCMI_LIBRARY=/nonexistent/libdcmi.so"};
}

TEST(DevicesCliTest, AscendTableFromNpuSmi) {
  TempDir dir;
  dir.Write("health-7-0.txt", "Health Status : Alarm\nError Code : 80E01801\n");
  dir.Write("link-2.txt", "link status: DOWN\n");
  auto r = RunAnxin({"devices", "--backend", "ascend"},
                    {.env = FakeAscendEnv(dir, "npu-smi-info-16x910B2C-busy.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| anxin devices   ascend via npu-smi 24.1.rc1 (16 x Ascend910B2C)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("| NPU   Name                | Health        |"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 0     910B2C              | OK            | 86.8        35"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 0                         | 0000:66:00.0  | 0           1 / 1"));
  EXPECT_THAT(r.stdout_text, HasSubstr("| 7     910B2C              | Alarm         |"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 7: error code 80E01801 (major)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 2: link on port 0 is down"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 0: HBM 91% used"));
}

// The 16 x 910B2C capture cut to its first two NPUs the way a ticket shows
// it: no "+===" rules between devices (or anywhere), the process table kept.
std::string TwoNpusWithoutRules() {
  return ::anxin::device::ascend::testing::FirstNpus(
      ::anxin::testing::ReadTextFile(
          ::anxin::testing::FixturePath("ascend/npu-smi-info-16x910B2C-busy.txt")),
      2, /*drop_device_rules=*/true);
}

int LineWith(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find(needle) != std::string::npos) return n;
  }
  return 0;
}

// Without separator rules a table once read as three devices mixing the rows
// of two; each device is now its own two rows, and a table whose rows do not
// fit is refused with exit 3, naming the line.
TEST(DevicesCliTest, AscendTableWithoutRulesListsEachDeviceFromItsOwnRows) {
  const std::string capture = TwoNpusWithoutRules();
  ASSERT_EQ(capture.find("+==="), std::string::npos);
  ASSERT_NE(capture.find("rayNPURayWork"), std::string::npos);
  TempDir dir;
  auto env = FakeAscendEnv(dir, "npu-smi-info-16x910B2C-busy.txt");
  dir.Write("info.txt", capture);
  auto r = RunAnxin({"devices", "--backend", "ascend", "--json"}, {.env = env});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(j["devices"].size(), 2u) << r.stdout_text;
  const nlohmann::json& d0 = j["devices"][0];
  const nlohmann::json& d1 = j["devices"][1];
  EXPECT_EQ(d0["index"], 0);
  EXPECT_EQ(d0["pci_bus_id"], "0000:66:00.0");
  EXPECT_EQ(d0["power_watts"], 86.8);
  EXPECT_EQ(d0["temperature_celsius"], 35);
  EXPECT_EQ(d0["hbm_used_bytes"], 59356ull << 20);
  EXPECT_EQ(d0["hbm_total_bytes"], 65536ull << 20);
  EXPECT_EQ(d1["index"], 1);
  EXPECT_EQ(d1["pci_bus_id"], "0000:19:00.0");
  EXPECT_EQ(d1["power_watts"], 103.1);
  EXPECT_EQ(d1["temperature_celsius"], 37);
  EXPECT_EQ(d1["hbm_used_bytes"], 59351ull << 20);
  EXPECT_EQ(d1["hbm_total_bytes"], 65536ull << 20);

  // NPU 1's Chip row lost: refused, naming NPU 1's row and the one after it.
  std::string lost = capture;
  const int chip1 = LineWith(capture, "0000:19:00.0");
  lost.erase(lost.find("| 0                         | 0000:19:00.0"));
  lost += capture.substr(capture.find('\n', capture.find("0000:19:00.0")) + 1);
  dir.Write("info.txt", lost);
  auto refused = RunAnxin({"devices", "--backend", "ascend"}, {.env = env});
  EXPECT_EQ(refused.exit_code, 3) << refused.stdout_text;
  EXPECT_EQ(refused.stdout_text, "");
  EXPECT_THAT(refused.stderr_text,
              StartsWith("error: ascend: npu-smi info: line " + std::to_string(chip1 - 1) +
                         ": NPU 1 has no Chip/Bus-Id row after it (line " +
                         std::to_string(LineWith(lost, "Process id")) + " follows)"));
  // A Bus-Id that is not a PCI address (the column read from the wrong row).
  std::string bad = capture;
  bad.replace(bad.find("0000:19:00.0"), 12, "OK          ");
  dir.Write("info.txt", bad);
  auto refused2 = RunAnxin({"devices", "--backend", "ascend", "--json"}, {.env = env});
  EXPECT_EQ(refused2.exit_code, 3);
  EXPECT_EQ(refused2.stdout_text, "");
  EXPECT_THAT(refused2.stderr_text,
              StartsWith("error: ascend: npu-smi info: line " + std::to_string(chip1) +
                         ": expected a PCI address like 0000:66:00.0 in the Bus-Id column, got "
                         "'OK'"));
}

TEST(DevicesCliTest, AscendJsonHasTheShapeOfSim) {
  TempDir dir;
  auto r = RunAnxin({"devices", "--backend", "ascend", "--json"},
                    {.env = FakeAscendEnv(dir, "npu-smi-info-1x910B4-idle.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["index"], 5);
  EXPECT_EQ(j["devices"][0]["model"], "Ascend910B4");
  EXPECT_EQ(j["devices"][0]["power_watts"], 89.9);
  EXPECT_TRUE(j["devices"][0]["core_clock_mhz"].is_null());
  auto sim = RunAnxin({"devices", "--json"});
  nlohmann::json s = nlohmann::json::parse(sim.stdout_text);
  EXPECT_EQ(Keys(j), Keys(s));
  EXPECT_EQ(Keys(j["devices"][0]), Keys(s["devices"][0]));
}

TEST(DevicesCliTest, AscendThroughDcmi) {
  TempDir dir;
  auto r = RunAnxin(
      {"devices", "--backend", "ascend"},
      {.env = {std::string("LD_LIBRARY_PATH=") + FAKE_DCMI_DIR,
               "ANXIN_FAKE_DCMI_SCENARIO=" + SourcePath("tests/device/fake_dcmi/910b-node.txt"),
               "ANXIN_FAKE_ASCEND_DIR=" + dir.path(), "PATH=/usr/bin:/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("| anxin devices   ascend via dcmi (4 x Ascend910B2C)"));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("| 1     910B2C              | OK            | -           37"));
  // A chip that is not ready does not even say its name.
  EXPECT_THAT(r.stdout_text, HasSubstr("| 2                         | Lost          |"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 2: not ready (DCMI -8012"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 3: error code 80CB8009 (major)"));
}

TEST(DevicesCliTest, AscendWithoutDriverIsExitThreeWithAdvice) {
  auto r = RunAnxin({"devices", "--backend", "ascend"},
                    {.env = {"PATH=/usr/bin:/bin", "ANXIN_DCMI_LIBRARY=/nonexistent/libdcmi.so"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.stderr_text, StartsWith("error: ascend: neither DCMI nor npu-smi answers"));
  EXPECT_THAT(r.stderr_text, HasSubstr("install the Ascend driver"));
  EXPECT_EQ(r.stderr_text.find('\n'), r.stderr_text.size() - 1) << r.stderr_text;
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
  auto r = RunAnxin({"demo", "--scenario", "h100-node", "--seconds", "1", "--interval", "0.5s",
                     "--port", "0", "--stages", "devices,agent"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("== stage 1/"));
  EXPECT_THAT(r.stdout_text, HasSubstr(": a simulated node (sim, scenario h100-node"));
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
  auto r = RunAnxin({"--json", "demo", "--seconds", "3", "--interval", "1s", "--port", "0",
                     "--stages", "devices,agent"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["node"], "sim, scenario demo (8 x Ascend910C)");
  ASSERT_GE(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][0]["name"], "devices");
  EXPECT_EQ(j["stages"][1]["name"], "agent");
  ASSERT_FALSE(j["stages"][1]["changes"].empty());
  EXPECT_THAT(j["stages"][1]["changes"][0].get<std::string>(), HasSubstr("/metrics: "));
  ASSERT_FALSE(j["stages"][0]["changes"].empty());
  EXPECT_THAT(j["stages"][0]["changes"][0].get<std::string>(), HasSubstr("NPU 3"));
}

TEST(DemoCliTest, ShortDemoRunsAndSummarises) {
  auto r = RunAnxin(
      {"demo", "--seconds", "1", "--interval", "0.5s", "--port", "0", "--stages", "devices,agent"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("== stage 1/"));
  EXPECT_THAT(r.stdout_text, HasSubstr("NPU 3 anxin_device_temperature_celsius "));
  EXPECT_THAT(r.stdout_text, HasSubstr("sim, scenario demo (8 x Ascend910C)"));
  EXPECT_THAT(r.stdout_text, HasSubstr("What changed in 1.0 s:"));
  EXPECT_THAT(r.stdout_text, HasSubstr("Demo done."));
}

}  // namespace
