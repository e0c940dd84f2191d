// Real SDK clients (the C program tests/monitor/sdk_c_client.c, linked with
// libanxin_sdk.so) reporting to an SdkReceiver in this process: every event
// they say they sent arrives, a receiver restart under a running client
// neither blocks nor breaks it, and several clients at 1 kHz lose nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/monitor/sdk_receiver.h"

namespace anxin::monitor {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;

std::string ClientBinary() { return std::string(ANXIN_BINARY_DIR) + "/tests/monitor/sdk_c_client"; }

std::vector<std::string> ClientEnv(const std::string& socket, int rank, int world) {
  return {"ANXIN_AGENT_SOCKET=" + socket, "ANXIN_JOB_ID=e2e", "RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(world), "ANXIN_SDK_RETRY_MS=100"};
}

// The client's last stdout line: its SDK counters.
nlohmann::json ClientStats(const std::string& stdout_text) {
  auto j = nlohmann::json::parse(stdout_text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << stdout_text;
  return j;
}

TEST(SdkReceiverClientsTest, EveryEventTheClientSentArrives) {
  TempDir dir;
  std::atomic<uint64_t> steps{0};
  auto r = SdkReceiver::Start({.socket_path = dir / "agent.sock"},
                              [&](const SdkDatagram& d, std::span<const uint8_t>) {
                                for (const auto& e : d.events)
                                  if (std::holds_alternative<SdkStepEnd>(e.body)) ++steps;
                              });
  ASSERT_THAT(r, IsOk());
  auto out =
      RunCommand({ClientBinary(), "200"}, {.timeout = 60s, .env = ClientEnv((*r)->path(), 0, 1)});
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->exit_code, 0) << out->stdout_text << out->stderr_text;
  nlohmann::json s = ClientStats(out->stdout_text);
  // 200 steps x (begin, kernel, collective, end) + heartbeat, checkpoint, alloc stats.
  EXPECT_EQ(s["events"], 803);
  EXPECT_EQ(s["sent"], 803);
  EXPECT_EQ(s["dropped"], 0);
  ASSERT_TRUE(WaitFor([&] { return (*r)->stats().events == 803; }));
  EXPECT_EQ(steps.load(), 200u);
  EXPECT_EQ((*r)->stats().rejected_total(), 0u);
  EXPECT_EQ((*r)->stats().datagrams, s["datagrams"].get<uint64_t>());
}

TEST(SdkReceiverClientsTest, ReceiverRestartNeitherBlocksNorBreaksTheClient) {
  TempDir dir;
  std::string path = dir / "agent.sock";
  auto noop = [](const SdkDatagram&, std::span<const uint8_t>) {};
  auto first = SdkReceiver::Start({.socket_path = path}, noop);
  ASSERT_THAT(first, IsOk());

  // 3 s of steps at 1 kHz.
  SubprocessOptions opts;
  opts.argv = {ClientBinary(), "3000", "1000"};
  opts.env = ClientEnv(path, 1, 2);
  std::string stdout_text;
  opts.on_stdout = [&](const OutputLine& l) { stdout_text += l.text; };
  auto client = Subprocess::Start(std::move(opts));
  ASSERT_THAT(client, IsOk());

  ASSERT_TRUE(WaitFor([&] { return (*first)->stats().datagrams >= 5; }));
  (*first)->Stop();
  first->reset();
  auto second = SdkReceiver::Start({.socket_path = path}, noop);
  ASSERT_THAT(second, IsOk());

  auto status = (*client)->Wait(std::chrono::steady_clock::now() + 60s);
  ASSERT_THAT(status, IsOk());
  // Exit 0: the client's final flush reached the new receiver.
  EXPECT_EQ(status->exit_code, 0) << stdout_text;
  nlohmann::json s = ClientStats(stdout_text);
  EXPECT_EQ(s["events"], 12003);
  EXPECT_EQ(s["connected"], 1);
  SdkReceiverStats after = (*second)->stats();
  EXPECT_GT(after.events, 0u);
  EXPECT_EQ(after.rejected_total(), 0u);
  // What the client could not send while the receiver was away, it counted.
  EXPECT_EQ(s["events"].get<uint64_t>(),
            s["sent"].get<uint64_t>() + s["dropped"].get<uint64_t>() + s["unsent"].get<uint64_t>());
}

// The soak test's hook at a smaller scale: 4 clients at 1 kHz for 1 s each;
// the receiver's own counters say nothing was dropped or lost.
TEST(SdkReceiverClientsTest, SeveralClientsAt1kHzLoseNothing) {
  TempDir dir;
  auto r = SdkReceiver::Start({.socket_path = dir / "agent.sock"},
                              [](const SdkDatagram&, std::span<const uint8_t>) {});
  ASSERT_THAT(r, IsOk());
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<Subprocess>> clients;
  std::vector<std::string> outputs(kClients);
  for (int i = 0; i < kClients; ++i) {
    SubprocessOptions opts;
    opts.argv = {ClientBinary(), "1000", "1000"};
    opts.env = ClientEnv((*r)->path(), i, kClients);
    opts.on_stdout = [&outputs, i](const OutputLine& l) { outputs[i] += l.text; };
    auto c = Subprocess::Start(std::move(opts));
    ASSERT_THAT(c, IsOk());
    clients.push_back(std::move(*c));
  }
  uint64_t sent = 0;
  for (int i = 0; i < kClients; ++i) {
    auto st = clients[i]->Wait(std::chrono::steady_clock::now() + 60s);
    ASSERT_THAT(st, IsOk());
    EXPECT_EQ(st->exit_code, 0) << outputs[i];
    nlohmann::json s = ClientStats(outputs[i]);
    EXPECT_EQ(s["dropped"], 0) << outputs[i];
    EXPECT_EQ(s["unsent"], 0) << outputs[i];
    sent += s["sent"].get<uint64_t>();
  }
  EXPECT_EQ(sent, kClients * 4003u);
  ASSERT_TRUE(WaitFor([&] { return (*r)->stats().events == sent; }));
  SdkReceiverStats s = (*r)->stats();
  EXPECT_EQ(s.sender_dropped, 0u);
  EXPECT_EQ(s.sender_unsent, 0u);
  EXPECT_EQ(s.datagrams_lost, 0u);
  EXPECT_EQ(s.rejected_total(), 0u);
}

}  // namespace
}  // namespace anxin::monitor
