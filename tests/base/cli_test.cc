// Runs the real `anxin` binary: configuration precedence (flag > environment
// > file > default), error messages and exit codes (docs/exit-codes.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::IsOk;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class CliTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    return dir_.Write(name, text);
  }
  // Runs anxin with exactly these environment variables (plus PATH).
  CommandOutput Anxin(std::vector<std::string> args, std::vector<std::string> env = {}) {
    return RunAnxin(std::move(args), {.env = std::move(env), .clear_env = true});
  }
  // The value and origin of key in `anxin config --json`.
  static std::pair<std::string, std::string> Key(const CommandOutput& out, const std::string& key) {
    auto j = nlohmann::json::parse(out.stdout_text);
    for (const auto& k : j["keys"]) {
      if (k["key"] == key) return {k["value"], k["from"]};
    }
    return {"?", "?"};
  }

  TempDir dir_;
};

TEST_F(CliTest, DefaultsWithoutAnything) {
  auto out = Anxin({"config", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_EQ(Key(out, "log.level"), std::make_pair(std::string("info"), std::string("default")));
  EXPECT_EQ(Key(out, "device.backend").first, "sim");
  EXPECT_TRUE(nlohmann::json::parse(out.stdout_text)["file"].is_null());
}

TEST_F(CliTest, FlagBeatsEnvironmentBeatsFileBeatsDefault) {
  std::string cfg = Write("anxin.yaml", "log:\n  level: debug\ndevice:\n  scenario: /a.yaml\n");
  auto file_only = Anxin({"--config", cfg, "config", "--json"});
  ASSERT_EQ(file_only.exit_code, 0) << file_only.stderr_text;
  EXPECT_EQ(Key(file_only, "log.level"), std::make_pair(std::string("debug"), cfg + ":2:10"));
  EXPECT_EQ(Key(file_only, "device.scenario").first, "/a.yaml");

  auto env = Anxin({"config", "--json"}, {"ANXIN_CONFIG=" + cfg, "ANXIN_LOG_LEVEL=warn"});
  ASSERT_EQ(env.exit_code, 0) << env.stderr_text;
  EXPECT_EQ(Key(env, "log.level"),
            std::make_pair(std::string("warn"), std::string("ANXIN_LOG_LEVEL")));
  EXPECT_EQ(Key(env, "device.scenario").first, "/a.yaml");

  auto flag = Anxin({"--log-level", "error", "config", "--json"},
                    {"ANXIN_CONFIG=" + cfg, "ANXIN_LOG_LEVEL=warn"});
  ASSERT_EQ(flag.exit_code, 0) << flag.stderr_text;
  EXPECT_EQ(Key(flag, "log.level"),
            std::make_pair(std::string("error"), std::string("--log-level")));

  // --config beats ANXIN_CONFIG.
  std::string other = Write("other.yaml", "device:\n  scenario: /b.yaml\n");
  auto both = Anxin({"--config", other, "config", "--json"}, {"ANXIN_CONFIG=" + cfg});
  ASSERT_EQ(both.exit_code, 0) << both.stderr_text;
  EXPECT_EQ(Key(both, "device.scenario").first, "/b.yaml");
}

// device.backend names a backend of this build, wherever it is set.
TEST_F(CliTest, UnknownDeviceBackendIsAUsageErrorNamingWhereItCameFrom) {
  std::string cfg = Write("anxin.yaml", "device:\n  backend: rocm\n");
  auto file = Anxin({"--config", cfg, "config"});
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_THAT(file.stderr_text, StartsWith("error: " + cfg +
                                           ":2:12: device.backend: unknown device backend 'rocm': "
                                           "this build has "));
  EXPECT_THAT(file.stderr_text, HasSubstr("sim"));
  auto env = Anxin({"config"}, {"ANXIN_DEVICE_BACKEND=rocm"});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.stderr_text,
              StartsWith("error: environment variable ANXIN_DEVICE_BACKEND=rocm: unknown device "
                         "backend 'rocm'"));
  auto flag = Anxin({"devices", "--backend", "rocm"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.stderr_text, HasSubstr("rocm"));
}

TEST_F(CliTest, ConfigErrorsExitTwoWithThePosition) {
  std::string bad = Write("bad.yaml", "log:\n  level: info\n  fromat: json\n");
  auto out = Anxin({"--config", bad, "config"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_EQ(out.stderr_text,
            "error: " + bad + ":3:3: log: unknown key 'fromat' (known: level, format)\n");
  EXPECT_EQ(out.stdout_text, "");

  auto missing = Anxin({"--config", dir_ / "nope.yaml", "version"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr("No such file or directory"));
}

TEST_F(CliTest, BadEnvironmentValueNamesTheVariable) {
  auto out = Anxin({"version"}, {"ANXIN_LOG_FORMAT=xml"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_THAT(out.stderr_text,
              StartsWith("error: environment variable ANXIN_LOG_FORMAT=xml: unknown log format"));
  // Every source must be valid, even one that a flag overrides.
  auto flag = Anxin({"--log-format", "text", "version"}, {"ANXIN_LOG_FORMAT=xml"});
  EXPECT_EQ(flag.exit_code, 2);
}

TEST_F(CliTest, JsonLogsAreOneObjectPerLine) {
  auto out = Anxin({"--log-level", "debug", "--log-format", "json", "version"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, StartsWith("anxin "));
  size_t lines = 0, start = 0;
  while (start < out.stderr_text.size()) {
    size_t nl = out.stderr_text.find('\n', start);
    ASSERT_NE(nl, std::string::npos);
    auto j = nlohmann::json::parse(out.stderr_text.substr(start, nl - start));
    EXPECT_EQ(j["level"], "debug");
    ++lines;
    start = nl + 1;
  }
  EXPECT_GE(lines, 2u);
}

TEST_F(CliTest, UsageErrorsExitTwoAndHelpZero) {
  EXPECT_EQ(Anxin({"--no-such-flag", "version"}).exit_code, 2);
  EXPECT_EQ(Anxin({}).exit_code, 2);
  auto help = Anxin({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.stdout_text, HasSubstr("--config"));
  EXPECT_EQ(Anxin({"--version"}).exit_code, 0);
}

}  // namespace
}  // namespace anxin
