// `anxin demo` from start to end, every stage: the node watched live, its
// agent's /metrics, an alert delivered through `anxin notify` to a sink, and
// the sample training job under `anxin run` recovering from four faults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::RunAnxin;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<std::string> Changes(const nlohmann::json& stage) {
  std::vector<std::string> out;
  for (const auto& c : stage["changes"]) out.push_back(c.get<std::string>());
  return out;
}

TEST(DemoCliTest, EveryStageDoesItsWork) {
  auto r = RunAnxin({"--json", "demo", "--port", "0"}, {.timeout = std::chrono::seconds(360)});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(j["interrupted"], false);
  ASSERT_EQ(j["stages"].size(), 4u) << j.dump(2);
  EXPECT_EQ(j["stages"][0]["name"], "devices");

  EXPECT_EQ(j["stages"][1]["name"], "agent");
  const auto agent = Changes(j["stages"][1]);
  ASSERT_EQ(agent.size(), 3u) << j["stages"][1].dump(2);
  EXPECT_THAT(agent[1], StartsWith("NPU 3 anxin_device_temperature_celsius "));

  // After 6 s NPU 3 is past 85 C and NPU 5 past 90% HBM: both alerts reach
  // the sink through the spool.
  EXPECT_EQ(j["stages"][2]["name"], "notify");
  const auto notify = Changes(j["stages"][2]);
  ASSERT_EQ(notify.size(), 3u) << j["stages"][2].dump(2);
  EXPECT_THAT(notify[0], HasSubstr(R"({"status":"stored","messages":1)"));
  EXPECT_THAT(notify[1], HasSubstr("delivered to the sink: [firing] AnxinDeviceTemperatureHigh"));
  EXPECT_THAT(notify[1], HasSubstr("demo-node NPU 3 at "));
  EXPECT_THAT(notify[2], HasSubstr("delivered to the sink: [firing] AnxinHbmUsageHigh"));

  // The job's four faults, in the order they happen, each recovered.
  EXPECT_EQ(j["stages"][3]["name"], "run");
  const auto run = Changes(j["stages"][3]);
  ASSERT_EQ(run.size(), 4u) << j["stages"][3].dump(2);
  const char* kFaults[] = {"network", "hang", "device_lost", "link_down"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_THAT(run[i], StartsWith(std::string(kFaults[i]) + ": recovered in ")) << run[i];
  }
}

TEST(DemoCliTest, UnknownStageIsAnInputError) {
  auto r = RunAnxin({"demo", "--stages", "devices,bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_THAT(r.stderr_text,
              HasSubstr("--stages: unknown stage 'bogus' (known: devices, agent, notify, run)"));
}

}  // namespace
}  // namespace anxin
