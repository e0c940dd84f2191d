#include "anxin/base/global_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

EnvironmentLookup FakeEnvironment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(GlobalConfigTest, DefaultsWithoutFile) {
  auto config = LoadGlobalConfig("");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->log.level, "info");
  EXPECT_EQ(config->log.format, "text");
  EXPECT_EQ(config->device.backend, "sim");
  EXPECT_EQ(config->device.scenario, "");
  EXPECT_EQ(config->source, "");
}

TEST(GlobalConfigTest, ReadsEveryKey) {
  auto config = ParseGlobalConfig(
      "log:\n  level: debug\n  format: json\n"
      "device:\n  backend: sim\n  scenario: node8.yaml\n",
      "g.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->log.level, "debug");
  EXPECT_EQ(config->log.format, "json");
  EXPECT_EQ(config->device.backend, "sim");
  EXPECT_EQ(config->device.scenario, "node8.yaml");
  EXPECT_EQ(config->source, "g.yaml");
}

TEST(GlobalConfigTest, ScenarioPathIsRelativeToTheFile) {
  auto config = ParseGlobalConfig("device:\n  scenario: node8.yaml\n", "/etc/anxin/anxin.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->device.scenario, "/etc/anxin/node8.yaml");
  config = ParseGlobalConfig("device:\n  scenario: /srv/s.yaml\n", "/etc/anxin/anxin.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->device.scenario, "/srv/s.yaml");
  config = ParseGlobalConfig("device:\n  scenario: s.yaml\n", "anxin.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->device.scenario, "s.yaml");
}

TEST(GlobalConfigTest, PartialFileKeepsDefaults) {
  auto config = ParseGlobalConfig("log:\n  format: json\ndevice:\n", "g.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->log.level, "info");
  EXPECT_EQ(config->log.format, "json");
  EXPECT_EQ(config->device.backend, "sim");
}

TEST(GlobalConfigTest, FileErrorsNamePositionAndKey) {
  EXPECT_THAT(ParseGlobalConfig("log:\n  level: loud\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:10: log.level: unknown log level 'loud': use trace, debug, "
                      "info, warn, error or off"));
  EXPECT_THAT(ParseGlobalConfig("log:\n  levle: info\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:3: log: unknown key 'levle' (known: level, format)"));
  EXPECT_THAT(
      ParseGlobalConfig("devices: {}\n", "g.yaml"),
      HasCode(
          ErrorCode::kInvalidArgument,
          "g.yaml:1:1: unknown key 'devices' (known: log, device, compare, agent, run, notify)"));
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: [sim]\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:12: device.backend: expected a string, got a list"));
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: cuda\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:12: device.backend: unknown device backend 'cuda': this build "
                      "has sim"));
  // The backends of the build, as the program sets them from the device registry.
  SetDeviceBackendNames({"ascend", "nvml", "sim"});
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: cuda\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:12: device.backend: unknown device backend 'cuda': this build "
                      "has ascend, nvml or sim"));
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: nvml\n", "g.yaml"), IsOk());
  SetDeviceBackendNames({"sim"});
  EXPECT_THAT(ParseGlobalConfig("log: json\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument, "g.yaml:1:6: log: expected a map, got 'json'"));
}

TEST(GlobalConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadGlobalConfig("/nonexistent/anxin.yaml"),
              HasCode(ErrorCode::kNotFound, HasSubstr("/nonexistent/anxin.yaml")));
}

TEST(GlobalConfigTest, EnvironmentOverridesFile) {
  SetDeviceBackendNames({"nvml", "sim"});
  auto config = ParseGlobalConfig("log:\n  level: debug\n  format: json\n", "g.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(ApplyEnvironment(*config, FakeEnvironment({{"ANXIN_LOG_LEVEL", "warn"},
                                                         {"ANXIN_DEVICE_BACKEND", "nvml"},
                                                         {"ANXIN_SCENARIO", "s.yaml"}})),
              IsOk());
  EXPECT_EQ(config->log.level, "warn");   // env beats file
  EXPECT_EQ(config->log.format, "json");  // file beats default
  EXPECT_EQ(config->device.backend, "nvml");
  EXPECT_EQ(config->device.scenario, "s.yaml");
}

TEST(GlobalConfigTest, FlagBeatsEnvironment) {
  GlobalConfig config;
  ASSERT_THAT(ApplyEnvironment(config, FakeEnvironment({{"ANXIN_LOG_FORMAT", "json"}})), IsOk());
  EXPECT_EQ(config.log.format, "json");
  ASSERT_THAT(SetLogFormat(config, "text", "--log-format"), IsOk());
  EXPECT_EQ(config.log.format, "text");
}

TEST(GlobalConfigTest, BadEnvironmentValueNamesTheVariable) {
  GlobalConfig config;
  EXPECT_THAT(ApplyEnvironment(config, FakeEnvironment({{"ANXIN_LOG_LEVEL", "loud"}})),
              HasCode(ErrorCode::kInvalidArgument,
                      "environment variable ANXIN_LOG_LEVEL=loud: unknown log level 'loud': use "
                      "trace, debug, info, warn, error or off"));
  EXPECT_THAT(ApplyEnvironment(config, FakeEnvironment({{"ANXIN_LOG_FORMAT", "xml"}})),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("ANXIN_LOG_FORMAT=xml")));
  EXPECT_THAT(ApplyEnvironment(config, FakeEnvironment({{"ANXIN_DEVICE_BACKEND", ""}})),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("ANXIN_DEVICE_BACKEND=")));
  EXPECT_EQ(config.log.level, "info");
}

TEST(GlobalConfigTest, FlagErrorsNameTheFlag) {
  GlobalConfig config;
  EXPECT_THAT(SetLogLevel(config, "verbose", "--log-level"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--log-level: unknown log level")));
}

TEST(GlobalConfigTest, EveryOverrideIsListed) {
  std::map<std::string, std::string> all;
  for (const auto& o : EnvironmentOverrides()) all[std::string(o.variable)] = "bogus\x01";
  all["ANXIN_SCENARIO"] = "x.yaml";
  GlobalConfig config;
  // Every listed variable is read: the first bad one stops it.
  EXPECT_THAT(ApplyEnvironment(config, FakeEnvironment(all)),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("ANXIN_LOG_LEVEL")));
  EXPECT_EQ(EnvironmentOverrides().size(), 4u);
}

TEST(GlobalConfigTest, DescribeSaysWhereEachValueCameFrom) {
  SetDeviceBackendNames({"ascend", "nvml", "sim"});
  auto config = ParseGlobalConfig("log:\n  format: json\n  level: debug\n", "g.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(ApplyEnvironment(*config, FakeEnvironment({{"ANXIN_DEVICE_BACKEND", "ascend"}})),
              IsOk());
  ASSERT_THAT(SetLogLevel(*config, "warn", "--log-level"), IsOk());
  auto entries = DescribeGlobalConfig(*config);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].key, "log.level");
  EXPECT_EQ(entries[0].value, "warn");
  EXPECT_EQ(entries[0].origin, "--log-level");
  EXPECT_EQ(entries[0].environment, "ANXIN_LOG_LEVEL");
  EXPECT_EQ(entries[1].value, "json");
  EXPECT_EQ(entries[1].origin, "g.yaml:2:11");
  EXPECT_EQ(entries[2].value, "ascend");
  EXPECT_EQ(entries[2].origin, "ANXIN_DEVICE_BACKEND");
  EXPECT_EQ(entries[3].key, "device.scenario");
  EXPECT_EQ(entries[3].origin, "default");
}

TEST(GlobalConfigTest, ModuleSectionsAreKeptForTheirModules) {
  auto config = ParseGlobalConfig(
      "log:\n  level: warn\n"
      "compare:\n  default:\n    rtol: 0.01\n",
      "g.yaml");
  ASSERT_THAT(config, IsOk());
  auto section = FindSection(*config, "compare");
  ASSERT_TRUE(section.has_value());
  EXPECT_EQ(section->path(), "compare");
  EXPECT_EQ(section->line(), 4);
  auto rtol = section->Child("default")->Get<double>("rtol");
  ASSERT_THAT(rtol, IsOk());
  EXPECT_DOUBLE_EQ(*rtol, 0.01);
  EXPECT_FALSE(FindSection(*config, "monitor").has_value());
  EXPECT_FALSE(FindSection(GlobalConfig{}, "compare").has_value());
  EXPECT_THAT(
      ParseGlobalConfig("compare: 3\n", "g.yaml"),
      HasCode(ErrorCode::kInvalidArgument, "g.yaml:1:10: compare: expected a map, got '3'"));
  EXPECT_THAT(ParseGlobalConfig("- log\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("expected a map of sections")));
}

}  // namespace
}  // namespace anxin
