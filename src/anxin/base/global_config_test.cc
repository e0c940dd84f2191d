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
  EXPECT_THAT(ParseGlobalConfig("devices: {}\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:1:1: unknown key 'devices' (known: log, device)"));
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: [sim]\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:12: device.backend: expected a string, got a list"));
  EXPECT_THAT(ParseGlobalConfig("device:\n  backend: cuda\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument,
                      "g.yaml:2:12: device.backend: unknown device backend 'cuda': use sim, "
                      "nvml or ascend"));
  EXPECT_THAT(ParseGlobalConfig("log: json\n", "g.yaml"),
              HasCode(ErrorCode::kInvalidArgument, "g.yaml:1:6: log: expected a map, got 'json'"));
}

TEST(GlobalConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadGlobalConfig("/nonexistent/anxin.yaml"),
              HasCode(ErrorCode::kNotFound, HasSubstr("/nonexistent/anxin.yaml")));
}

TEST(GlobalConfigTest, EnvironmentOverridesFile) {
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

}  // namespace
}  // namespace anxin
