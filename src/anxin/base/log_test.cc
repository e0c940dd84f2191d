#include "anxin/base/log.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Runs fn with stderr going to a file and returns what was written.
template <typename F>
std::string CaptureStderr(F fn) {
  std::string path = ::testing::TempDir() + "/anxin_log_test_" + std::to_string(getpid());
  std::fflush(stderr);
  int saved = dup(2);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  dup2(fd, 2);
  close(fd);
  fn();
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string out = ReadFile(path).value_or("");
  std::remove(path.c_str());
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

TEST(LogTest, JsonLinesStayOneValidLinePerRecord) {
  std::string out = CaptureStderr([] {
    ASSERT_THAT(InitLogging("debug", "json"), IsOk());
    spdlog::info("device {} says \"hot\"\nand then\ta tab", 3);
    spdlog::debug("second");
    spdlog::trace("not shown at debug");
  });
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["msg"], "device 3 says \"hot\"\nand then\ta tab");
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["logger"], "anxin");
  EXPECT_GT(first["ts"].get<double>(), 1.6e9);  // seconds since the epoch
  auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["msg"], "second");
  EXPECT_EQ(second["level"], "debug");
}

TEST(LogTest, InvalidUtf8IsReplacedNotFatal) {
  std::string out = CaptureStderr([] {
    ASSERT_THAT(InitLogging("info", "json"), IsOk());
    spdlog::warn("bytes \xff\xfe end");
  });
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u);
  auto j = nlohmann::json::parse(lines[0]);
  EXPECT_THAT(j["msg"].get<std::string>(), HasSubstr("end"));
  EXPECT_EQ(j["level"], "warning");
}

TEST(LogTest, TextIsTheDefaultFormat) {
  std::string out = CaptureStderr([] {
    ASSERT_THAT(InitLogging("info", "text"), IsOk());
    spdlog::info("plain message");
    spdlog::debug("hidden");
  });
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_THAT(lines[0], MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ .*info.* plain message"));
}

TEST(LogTest, LevelOffIsSilent) {
  std::string out = CaptureStderr([] {
    ASSERT_THAT(InitLogging("off", "json"), IsOk());
    spdlog::error("nothing");
  });
  EXPECT_EQ(out, "");
}

TEST(LogTest, BadValuesNameTheChoices) {
  EXPECT_THAT(InitLogging("loud", "text"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown log level 'loud'")));
  EXPECT_THAT(InitLogging("info", "xml"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("use text or json")));
}

}  // namespace
}  // namespace anxin
