// A node under load for a while: an agent sampling 16 simulated devices
// every second while 8 SDK clients each report 1,000 steps a second (four
// events a step: begin, kernel, all_reduce, end). The agent's resident
// memory must level off (in the last third of the run it grows by less than
// kMaxLateGrowthBytes), and nothing may be lost at this rate: the clients'
// own counters (anxin_sdk_get_stats) and the agent's (anxin_sdk_*,
// anxin_agent_telemetry_dropped_total) both say every event arrived.
//
// ANXIN_SOAK_SECONDS sets the length of the client run (default 30; 120 for the full soak).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "tests/support/monitoring_stack.h"

namespace anxin {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::AgentProcess;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::anxin::testing::Value;
using ::anxin::testing::WaitFor;

constexpr int kClients = 8;
constexpr int kRateHz = 1000;
constexpr int kEventsPerStep = 4;
// Growth allowed over the last third of the run, once the agent's maps,
// histograms and allocator pools have reached their working size.
constexpr double kMaxLateGrowthBytes = 4.0 * (1 << 20);

int SoakSeconds() {
  const char* v = getenv("ANXIN_SOAK_SECONDS");
  int s = v ? atoi(v) : 0;
  return s > 0 ? s : 30;
}

TEST(SdkSoakTest, SixteenDevicesAndEightClientsAtOneKilohertz) {
  const int seconds = SoakSeconds();
  const uint64_t steps = static_cast<uint64_t>(seconds) * kRateHz;
  TempDir dir;
  // The default node, with 16 devices instead of 8.
  std::string scenario = ReadTextFile(SourcePath("examples/scenarios/default.yaml"));
  const size_t at = scenario.find("  count: 8\n");
  ASSERT_NE(at, std::string::npos);
  scenario.replace(at, 11, "  count: 16\n");
  const std::string scenario_file = dir.Write("soak16.yaml", scenario);
  // In the sanitized build, AddressSanitizer holds freed memory back in a
  // quarantine of 256 MiB before reusing it, which would read as growth for
  // minutes; a small one leaves the agent's own memory to be measured.
  AgentProcess agent(dir,
                     {"--scenario", scenario_file, "--interval", "1s", "--duration",
                      std::to_string(seconds + 120) + "s"},
                     "node-a", {"ASAN_OPTIONS=quarantine_size_mb=8"});
  ASSERT_GT(agent.port(), 0);
  ASSERT_TRUE(WaitFor([&] {
    return agent.Get("/metrics").find(R"(anxin_device_up{node="node-a",device="15",)") !=
           std::string::npos;
  })) << agent.Get("/metrics");

  std::mutex mu;
  std::vector<std::string> outputs(kClients);
  std::vector<std::unique_ptr<Subprocess>> clients;
  for (int rank = 0; rank < kClients; ++rank) {
    SubprocessOptions o;
    o.argv = {std::string(ANXIN_BINARY_DIR) + "/tests/monitor/sdk_c_client", std::to_string(steps),
              std::to_string(kRateHz)};
    o.env = {"ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=soak",
             "RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(kClients)};
    o.timeout = std::chrono::seconds(seconds + 60);
    o.on_stdout = [&, rank](const OutputLine& l) {
      std::lock_guard lock(mu);
      outputs[rank] += l.text + "\n";
    };
    auto p = Subprocess::Start(std::move(o));
    ASSERT_THAT(p, IsOk());
    clients.push_back(std::move(*p));
  }

  // The agent's resident memory once a second while the clients run.
  std::vector<double> rss;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool running = false;
    for (auto& c : clients) running |= !c->Wait(std::chrono::steady_clock::now()).has_value();
    if (!running) break;
    if (auto v =
            Value(agent.Get("/metrics"), R"(anxin_agent_resident_memory_bytes{node="node-a"})"))
      rss.push_back(*v);
    std::this_thread::sleep_until(start + std::chrono::seconds(rss.size() + 1));
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  uint64_t events = 0;
  for (int rank = 0; rank < kClients; ++rank) {
    SCOPED_TRACE("client " + std::to_string(rank));
    auto status = clients[rank]->Wait();
    ASSERT_THAT(status, IsOk());
    std::lock_guard lock(mu);
    EXPECT_EQ(status->exit_code, 0) << outputs[rank];
    auto s = nlohmann::json::parse(outputs[rank], nullptr, false);
    ASSERT_TRUE(s.is_object()) << outputs[rank];
    EXPECT_EQ(s["dropped"], 0);
    EXPECT_EQ(s["unsent"], 0);
    EXPECT_EQ(s["sent"], s["events"]);
    // The steps' events, then a heartbeat, a checkpoint and allocator statistics.
    EXPECT_EQ(s["events"], steps * kEventsPerStep + 3);
    events += s["events"].get<uint64_t>();
  }

  std::string m;
  EXPECT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    return Value(m, R"(anxin_sdk_events_received_total{node="node-a"})") == events;
  })) << m;
  EXPECT_EQ(Value(m, R"(anxin_sdk_events_dropped_total{node="node-a"})"), 0);
  EXPECT_EQ(Value(m, R"(anxin_sdk_events_unsent_total{node="node-a"})"), 0);
  EXPECT_EQ(Value(m, R"(anxin_sdk_datagrams_lost_total{node="node-a"})"), 0);
  for (const char* reason : {"malformed", "truncated", "oversized", "unknown_version"}) {
    EXPECT_EQ(Value(m, std::string(R"(anxin_sdk_datagrams_rejected_total{node="node-a",reason=")") +
                           reason + "\"}")
                  .value_or(0),
              0)
        << reason;
  }
  for (const char* limit : {"jobs", "ranks", "kernels"}) {
    EXPECT_EQ(Value(m, std::string(R"(anxin_agent_telemetry_dropped_total{node="node-a",limit=")") +
                           limit + "\"}"),
              0)
        << limit;
  }
  for (int rank = 0; rank < kClients; ++rank) {
    EXPECT_EQ(Value(m, R"(anxin_job_step_seconds_count{node="node-a",job="soak",rank=")" +
                           std::to_string(rank) + "\"}"),
              steps)
        << rank;
  }

  ASSERT_GE(rss.size(), 9u) << "too few samples of the agent's memory";
  const size_t third = rss.size() / 3;
  const double late_start = rss[rss.size() - third - 1];
  const double late_max = *std::max_element(rss.end() - static_cast<ptrdiff_t>(third), rss.end());
  std::printf(
      "soak: %d clients x %d Hz for %.0f s, %llu events; agent RSS %.1f MiB at 1 s, %.1f MiB at "
      "2/3, %.1f MiB peak, %.1f MiB at the end; last third +%.2f MiB\n",
      kClients, kRateHz, elapsed, static_cast<unsigned long long>(events), rss.front() / (1 << 20),
      late_start / (1 << 20), *std::max_element(rss.begin(), rss.end()) / (1 << 20),
      rss.back() / (1 << 20), (late_max - late_start) / (1 << 20));
  EXPECT_LT(late_max - late_start, kMaxLateGrowthBytes);
  EXPECT_EQ(agent.Stop().value().exit_code, 0) << agent.Stderr();
}

}  // namespace
}  // namespace anxin
