#include "anxin/device/sim/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin::device::sim {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

Result<Scenario> Parse(std::string_view yaml) { return ParseScenarioText(yaml, "s.yaml"); }

TEST(ScenarioTest, DefaultIsEightHealthyAscend910C) {
  auto s = BuiltinScenario("default");
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->devices.size(), 8u);
  for (const SimDevice& d : s->devices) {
    EXPECT_EQ(d.info.model, "Ascend910C");
    EXPECT_EQ(d.info.hbm_total_bytes, 64 * kGiB);
    EXPECT_EQ(d.info.vendor, "huawei");
  }
  EXPECT_TRUE(s->events.empty());
  EXPECT_EQ(s->source, "builtin:default");
  // Distinct bus ids and uuids; NUMA nodes split in halves.
  EXPECT_NE(s->devices[0].info.pci_bus_id, s->devices[1].info.pci_bus_id);
  EXPECT_NE(s->devices[0].info.uuid, s->devices[1].info.uuid);
  EXPECT_EQ(s->devices[3].info.numa_node, 0);
  EXPECT_EQ(s->devices[4].info.numa_node, 1);
}

TEST(ScenarioTest, EveryShippedScenarioParsesFromItsFile) {
  std::filesystem::path dir = std::filesystem::path(ANXIN_SOURCE_DIR) / "examples" / "scenarios";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_THAT(LoadScenario(entry.path().string()), IsOk());
    EXPECT_THAT(BuiltinScenario(entry.path().stem().string()), IsOk());
    ++n;
  }
  EXPECT_GE(n, 3);
  EXPECT_EQ(static_cast<int>(BuiltinScenarioNames().size()), n);
}

TEST(ScenarioTest, FullFileWithOverridesAndEvents) {
  auto s = Parse(R"(
name: t
seed: 9
devices:
  count: 4
  model: ascend910b2c
  ports: 2
  baseline: {temperature: 40, power: 200, utilisation: 50, hbm_used: 10GiB}
  noise: {temperature: 2, power: 5, utilisation: 1, hbm_used: 1MiB, period: 500ms}
  reset: {duration: 20s, fail_first: 1}
  overrides:
    - index: [2, 3]
      model: H100
      baseline: {temperature: 60}
events:
  - {at: 30s, device: all, kind: error_raise, code: 80E01801, severity: critical, text: boom}
  - {at: 1m, device: 1, kind: link_down, port: 1, duration: 10s}
  - {at: 0, device: 0, kind: hbm_step, bytes: -2GiB}
)");
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->name, "t");
  EXPECT_EQ(s->seed, 9u);
  ASSERT_EQ(s->devices.size(), 4u);
  EXPECT_EQ(s->devices[0].info.model, "Ascend910B2C");
  EXPECT_EQ(s->devices[0].baseline.hbm_used_bytes, 10 * kGiB);
  EXPECT_DOUBLE_EQ(s->devices[0].noise.period_seconds, 0.5);
  EXPECT_EQ(s->devices[0].reset.fail_first, 1);
  EXPECT_EQ(s->devices[2].info.model, "H100");
  EXPECT_EQ(s->devices[2].info.vendor, "nvidia");
  EXPECT_DOUBLE_EQ(s->devices[2].baseline.temperature_celsius, 60);
  EXPECT_DOUBLE_EQ(s->devices[2].baseline.power_watts, 200);  // kept from devices.baseline
  EXPECT_EQ(s->devices[3].ports, 2);
  // "all" becomes one event per device; events are sorted by time.
  ASSERT_EQ(s->events.size(), 6u);
  EXPECT_EQ(s->events[0].kind, EventKind::kHbmStep);
  EXPECT_EQ(s->events[0].step_bytes, -2 * static_cast<int64_t>(kGiB));
  EXPECT_EQ(s->events[1].kind, EventKind::kErrorRaise);
  EXPECT_EQ(s->events[1].severity, Severity::kCritical);
  EXPECT_EQ(s->events[5].kind, EventKind::kLinkDown);
  EXPECT_DOUBLE_EQ(s->events[5].at_seconds, 60);
  EXPECT_DOUBLE_EQ(s->events[5].duration_seconds, 10);
  EXPECT_EQ(s->events[5].where, "s.yaml:17:5");
}

TEST(ScenarioTest, EmptyFileIsTheDefaultNodeIdle) {
  auto s = Parse("");
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->devices.size(), 8u);
  EXPECT_DOUBLE_EQ(s->devices[0].baseline.utilisation_percent, 0);
}

struct BadCase {
  const char* name;
  const char* yaml;
  const char* expected;  // substring of the error, including file:line:col
};

class BadScenarioTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadScenarioTest, NamesLineColumnAndProblem) {
  auto s = Parse(GetParam().yaml);
  EXPECT_THAT(s, HasCode(ErrorCode::kInvalidArgument, HasSubstr(GetParam().expected)));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadScenarioTest,
    ::testing::Values(
        BadCase{"UnknownTopKey", "seed: 1\nevnets: []\n", "s.yaml:2:1: unknown key 'evnets'"},
        BadCase{"UnknownDeviceKey", "devices:\n  modle: H100\n",
                "s.yaml:2:3: devices: unknown key 'modle'"},
        BadCase{"UnknownModel", "devices:\n  model: Ascend999\n",
                "s.yaml:2:10: devices.model: unknown model 'Ascend999' (known: Ascend910C"},
        BadCase{"CountOutOfRange", "devices:\n  count: 0\n",
                "s.yaml:2:10: devices.count: 0 is out of range"},
        BadCase{"HbmUsedAboveTotal",
                "devices:\n  model: Ascend910B4\n  baseline:\n    hbm_used: 40GiB\n",
                "s.yaml:4:15: devices.baseline.hbm_used: 42949672960 bytes is more than"},
        BadCase{"BadBytes", "devices:\n  baseline:\n    hbm_used: lots\n", "s.yaml:3:15:"},
        BadCase{"BadSeed", "seed: abc\n", "s.yaml:1:7: seed: expected"},
        BadCase{"EventsNotAList", "events: {at: 1}\n", "s.yaml:1:9: events: expected a list"},
        BadCase{
            "UnknownEventKind", "events:\n  - {at: 1s, device: 0, kind: explode}\n",
            "s.yaml:2:31: events[0].kind: unknown event kind 'explode' (known: temperature_ramp"},
        BadCase{"MissingKind", "events:\n  - {at: 1s, device: 0}\n",
                "s.yaml:2:5: events[0]: missing required key 'kind'"},
        BadCase{"DeviceOutOfRange", "events:\n  - {at: 1s, device: 8, kind: device_lost}\n",
                "s.yaml:2:22: events[0].device: device 8 does not exist: the scenario has 8"},
        BadCase{"KeyOfAnotherKind", "events:\n  - {at: 1s, device: 0, kind: device_lost, to: 90}\n",
                "s.yaml:2:44: events[0]: unknown key 'to'"},
        BadCase{"RampWithoutTarget", "events:\n  - {at: 1s, device: 0, kind: temperature_ramp}\n",
                "events[0]: missing required key 'to'"},
        BadCase{"NegativeTime", "events:\n  - {at: -1s, device: 0, kind: device_lost}\n",
                "s.yaml:2:10: events[0].at:"},
        BadCase{"BadSeverity",
                "events:\n  - {at: 1s, device: 0, kind: error_raise, code: 80E0, severity: meh}\n",
                "events[0].severity: unknown severity 'meh'"},
        BadCase{"BadCode", "events:\n  - {at: 1s, device: 0, kind: error_raise, code: 'a b'}\n",
                "events[0].code: 'a b' is not an error code"},
        BadCase{"PortBeyondDevice", "events:\n  - {at: 1s, device: 0, kind: link_down, port: 1}\n",
                "events[0].port: device 0 has 1 port(s)"},
        BadCase{"EmptyEcc", "events:\n  - {at: 1s, device: 0, kind: ecc_errors}\n",
                "needs single_bit or double_bit"},
        BadCase{"UnknownOperation", "unsupported: [reset, fly]\n",
                "s.yaml:1:14: unsupported: unknown operation 'fly'"},
        BadCase{"YamlSyntax", "devices: [\n", "s.yaml:"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(ScenarioTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadScenario("/nonexistent/x.yaml"), HasCode(ErrorCode::kNotFound));
}

TEST(ScenarioTest, ResolveTakesFilesThenBuiltinNames) {
  auto d = ResolveScenario("");
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->name, "default");
  auto demo = ResolveScenario("demo");
  ASSERT_THAT(demo, IsOk());
  EXPECT_EQ(demo->name, "demo");
  EXPECT_THAT(ResolveScenario("no-such-scenario"),
              HasCode(ErrorCode::kNotFound, HasSubstr("default, demo")));
  EXPECT_THAT(ResolveScenario("missing.yaml"), HasCode(ErrorCode::kNotFound));
}

}  // namespace
}  // namespace anxin::device::sim
