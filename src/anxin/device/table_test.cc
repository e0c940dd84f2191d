#include "anxin/device/table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "anxin/base/testing.h"
#include "anxin/device/sim/sim_backend.h"

namespace anxin::device {
namespace {

using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct Node {
  explicit Node(std::string_view builtin) : clock(Clock::TimePoint(1'800'000'000s)) {
    auto s = sim::BuiltinScenario(builtin);
    EXPECT_THAT(s, IsOk());
    backend = std::make_unique<sim::SimBackend>(std::move(*s), clock);
  }
  Snapshot At(double t) {
    clock.AdvanceTo(Clock::TimePoint(1'800'000'000s) + FromSeconds(t));
    auto snap = TakeSnapshot(*backend, clock);
    EXPECT_THAT(snap, IsOk());
    return *snap;
  }
  VirtualClock clock;
  std::unique_ptr<sim::SimBackend> backend;
};

TEST(TableTest, LooksLikeNpuSmiInfo) {
  Node node("default");
  std::string table = RenderTable(node.At(0));
  std::vector<std::string> lines = Lines(table);
  // Frame, title, rule, two header lines, rule, then two lines and a rule per device.
  ASSERT_EQ(lines.size(), 6u + 8 * 3);
  for (const std::string& l : lines) EXPECT_EQ(l.size(), 98u) << l;
  EXPECT_THAT(lines[1], HasSubstr("sim, scenario default (8 x Ascend910C)"));
  EXPECT_THAT(lines[1], HasSubstr("2027-01-15T08:00:00.000Z"));
  EXPECT_EQ(
      lines[3],
      "| NPU   Name                | Health        | Power(W)    Temp(C)           NUMA-Node    "
      "        |");
  EXPECT_EQ(lines[4],
            "| Chip                      | Bus-Id        | AICore(%)   Links(up/total)   "
            "HBM-Usage(MB)        |");
  EXPECT_EQ(lines[5],
            "+===========================+===============+=============================="
            "======================+");
  EXPECT_THAT(lines[6], ::testing::StartsWith("| 0     910C                | OK            | 3"));
  EXPECT_THAT(lines[7], ::testing::StartsWith("| 0                         | 0000:01:00.0  | 8"));
  EXPECT_THAT(lines[7], HasSubstr("1 / 1             53"));
  EXPECT_THAT(lines[7], HasSubstr("/ 65536"));
  EXPECT_THAT(table, Not(HasSubstr("Attention")));  // a healthy node has nothing to flag
  EXPECT_THAT(table, Not(HasSubstr("\x1b[")));
}

TEST(TableTest, FaultsShowInRowsAndNotes) {
  Node node("faults");
  Snapshot snap = node.At(75);
  std::string table = RenderTable(snap);
  EXPECT_THAT(table, HasSubstr("| 7     910C                | Lost          |"));
  EXPECT_THAT(table, HasSubstr("| 3     910C                | Critical      |"));
  EXPECT_THAT(table, HasSubstr("Attention:\n"));
  EXPECT_THAT(table, HasSubstr("NPU 2: HBM 94% used (60.0 of 64.0 GiB): above the 90% alert line"));
  EXPECT_THAT(table, HasSubstr("NPU 3: error code 80E18005 (critical)"));
  EXPECT_THAT(table, HasSubstr("NPU 3: 2 uncorrectable (double-bit) HBM ECC errors"));
  EXPECT_THAT(table, HasSubstr("NPU 4: link on port 1 is down"));
  EXPECT_THAT(table, HasSubstr("\n  NPU 7 is lost: it no longer answers"));
  for (const std::string& l : Lines(table)) {
    if (l.starts_with("|") || l.starts_with("+")) {
      EXPECT_EQ(l.size(), 98u) << l;
    }
  }
  std::string colored = RenderTable(snap, {.color = true, .notes = false});
  EXPECT_THAT(colored, HasSubstr("\x1b[1;31mLost\x1b[0m"));
  EXPECT_THAT(colored, Not(HasSubstr("Attention")));
}

TEST(TableTest, NotesFollowTheAlertLines) {
  Node node("demo");
  EXPECT_TRUE(Notes(node.At(0)).empty());
  std::vector<std::string> notes = Notes(node.At(6));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("NPU 3: 9"));
  EXPECT_THAT(notes[0], HasSubstr("throttle point"));
  EXPECT_THAT(notes[1], HasSubstr("NPU 5: HBM 9"));
  EXPECT_THAT(notes[1], HasSubstr("above the 90% alert line"));
}

TEST(TableTest, JsonHasEveryField) {
  Node node("faults");
  nlohmann::json j = SnapshotToJson(node.At(75));
  EXPECT_EQ(j["time"], "2027-01-15T08:01:15.000Z");
  EXPECT_EQ(j["source"], "sim, scenario faults (8 x Ascend910C)");
  ASSERT_EQ(j["devices"].size(), 8u);
  const auto& d0 = j["devices"][0];
  for (const char* key : {"index",
                          "uuid",
                          "model",
                          "vendor",
                          "pci_bus_id",
                          "numa_node",
                          "hbm_total_bytes",
                          "tdp_watts",
                          "throttle_celsius",
                          "health",
                          "hbm_used_bytes",
                          "temperature_celsius",
                          "power_watts",
                          "utilisation_percent",
                          "core_clock_mhz",
                          "memory_clock_mhz",
                          "throttled",
                          "error_codes",
                          "ecc",
                          "links"}) {
    EXPECT_TRUE(d0.contains(key)) << key;
  }
  EXPECT_EQ(d0["hbm_total_bytes"], 64ull << 30);
  EXPECT_EQ(j["devices"][3]["error_codes"][0]["code"], "80E18005");
  EXPECT_EQ(j["devices"][3]["ecc"]["double_bit"], 2);
  EXPECT_EQ(j["devices"][4]["links"][1]["up"], false);
  EXPECT_EQ(j["devices"][7]["health"], "Lost");
  EXPECT_THAT(j["devices"][7]["error"].get<std::string>(), HasSubstr("NPU 7 is lost"));
  EXPECT_FALSE(j["devices"][7].contains("temperature_celsius"));
}

TEST(TableTest, ReadingsNotReportedAreDashesAndNulls) {
  Node node("h100-node");
  Snapshot snap = node.At(0);
  ASSERT_TRUE(snap.rows[0].sample);
  DeviceSample& s = *snap.rows[0].sample;
  s.power_watts = kNotReported;
  s.utilisation_percent = kNotReported;
  s.temperature_celsius = kNotReported;
  s.hbm_used_bytes = kNotReportedCount;
  s.ecc = {kNotReportedCount, kNotReportedCount};
  std::string table = RenderTable(snap);
  EXPECT_THAT(table, HasSubstr("| 0     H100                | OK            | -           -     "));
  EXPECT_THAT(table, ::testing::ContainsRegex("\\| -           [0-9]+ / [0-9]+ +- +/ 81559 +\\|"));
  EXPECT_THAT(table, Not(HasSubstr("nan")));
  EXPECT_THAT(table, Not(HasSubstr("GPU 0:")));  // no notes from readings that are not there
  nlohmann::json j = SnapshotToJson(snap)["devices"][0];
  EXPECT_TRUE(j["power_watts"].is_null());
  EXPECT_TRUE(j["temperature_celsius"].is_null());
  EXPECT_TRUE(j["hbm_used_bytes"].is_null());
  EXPECT_TRUE(j["ecc"]["double_bit"].is_null());
  EXPECT_FALSE(j["core_clock_mhz"].is_null());
}

}  // namespace
}  // namespace anxin::device
