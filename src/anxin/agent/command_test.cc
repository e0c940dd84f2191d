#include "anxin/agent/command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin::agent {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(AgentCommandTest, DefaultsAndTheSocketWithoutFlags) {
  unsetenv("ANXIN_AGENT_SOCKET");
  unsetenv("ANXIN_DOCTOR_ROOT");
  auto s = LoadAgentSetup(AgentFlags{}, GlobalConfig{});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->config.port, kDefaultPort);
  EXPECT_EQ(s->config.host, kDefaultHost);
  EXPECT_EQ(s->socket, kDefaultSocket);
  EXPECT_EQ(s->duration_seconds, 0);
  EXPECT_FALSE(s->at_seconds);
}

TEST(AgentCommandTest, FlagsWinOverTheSectionAndTheEnvironment) {
  auto config = ParseGlobalConfig(
      "agent:\n  listen: 0.0.0.0:9500\n  interval: 5s\n  socket: /tmp/from-config.sock\n",
      "g.yaml");
  ASSERT_THAT(config, IsOk());
  auto s = LoadAgentSetup(AgentFlags{}, *config);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->config.host, "0.0.0.0");
  EXPECT_EQ(s->config.port, 9500);
  EXPECT_EQ(s->config.interval_seconds, 5);
  EXPECT_EQ(s->socket, "/tmp/from-config.sock");

  setenv("ANXIN_AGENT_SOCKET", "/tmp/from-env.sock", 1);
  AgentFlags f;
  f.port = 0;
  f.interval = "250ms";
  f.once = true;
  f.at = "65s";
  f.duration = "30s";
  s = LoadAgentSetup(f, *config);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->socket, "/tmp/from-env.sock");
  EXPECT_EQ(s->config.port, 0);
  EXPECT_EQ(s->config.interval_seconds, 0.25);
  EXPECT_EQ(s->duration_seconds, 30);
  EXPECT_EQ(s->at_seconds, 65);
  f.socket = "";  // turns the socket off
  s = LoadAgentSetup(f, *config);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->socket, "");
  unsetenv("ANXIN_AGENT_SOCKET");
}

TEST(AgentCommandTest, BadFlagsNameTheFlag) {
  auto check = [](void (*change)(AgentFlags&), std::string_view message) {
    AgentFlags f;
    change(f);
    EXPECT_THAT(LoadAgentSetup(f, GlobalConfig{}),
                HasCode(ErrorCode::kInvalidArgument, HasSubstr(message)));
  };
  check([](AgentFlags& f) { f.port = 70000; }, "--port: expected 0 to 65535");
  check([](AgentFlags& f) { f.interval = "0s"; }, "--interval: expected a duration above 0");
  check([](AgentFlags& f) { f.interval = "often"; }, "--interval: expected a duration above 0");
  check([](AgentFlags& f) { f.doctor_interval = "500ms"; }, "--doctor-interval: expected 0 (off)");
  check([](AgentFlags& f) { f.compat = "prometheus"; }, "--compat");
  check([](AgentFlags& f) { f.duration = "0s"; }, "--duration: expected a duration above 0");
  check([](AgentFlags& f) { f.at = "65s"; }, "--at needs --once");
  check([](AgentFlags& f) { f.listen = "nowhere"; }, "--listen");
}

}  // namespace
}  // namespace anxin::agent
