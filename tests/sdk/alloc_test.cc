// libanxin_alloc.so reports its statistics to the agent through the SDK:
// a program that allocates on the simulated device, with an agent on the
// node, shows up as the allocator series of its job and rank, with the
// numbers anxin_alloc_get_stats gives it. Without an agent the SDK is not
// even loaded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "tests/support/monitoring_stack.h"

namespace anxin {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::AgentProcess;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::Value;
using ::anxin::testing::WaitFor;

const std::string kClient = std::string(ANXIN_BINARY_DIR) + "/tests/sdk/sdk_alloc_client";
const std::string kConf =
    "ANXIN_ALLOC_CONF=provider:sim,sim_capacity:256MiB,sim_backed:false,pool_size:0.5,"
    "block_size:2MiB,expand:false";

TEST(SdkAllocTest, AllocatorStatisticsReachTheAgent) {
  TempDir dir;
  AgentProcess agent(dir);
  ASSERT_GT(agent.port(), 0);
  std::mutex mu;
  std::string printed;
  SubprocessOptions o;
  o.argv = {kClient, "--wait"};
  o.env = {kConf, "ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=alloc", "RANK=3",
           "WORLD_SIZE=8"};
  o.on_stdout = [&](const OutputLine& l) {
    std::lock_guard lock(mu);
    printed += l.text;
  };
  auto client = Subprocess::Start(std::move(o));
  ASSERT_THAT(client, IsOk());
  nlohmann::json s;
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    s = nlohmann::json::parse(printed, nullptr, false);
    return !s.is_discarded() && s.is_object();
  })) << printed;
  EXPECT_EQ(s["sdk_loaded"], true);
  const nlohmann::json& d0 = s["0"];
  const nlohmann::json& d1 = s["1"];
  ASSERT_TRUE(d0.is_object() && d1.is_object()) << s.dump();
  EXPECT_EQ(d0["allocated"], (24 + 12) << 20);
  EXPECT_EQ(d0["ooms"], 1);
  EXPECT_GT(d0["remaps"], 0);
  EXPECT_EQ(d1["allocated"], 4 << 20);

  const std::string l = R"({node="node-a",job="alloc",rank="3"})";
  std::string m;
  const double reserved = d0["reserved"].get<double>() + d1["reserved"].get<double>();
  const double remaps = d0["remaps"].get<double>() + d1["remaps"].get<double>();
  // The first report went out as the first allocator was made; the state the
  // program printed arrives with a later one (about once a second).
  ASSERT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    return Value(m, "anxin_job_allocator_reserved_bytes" + l) == reserved &&
           Value(m, "anxin_job_allocator_allocated_bytes" + l) == (24 + 12 + 4) << 20 &&
           Value(m, "anxin_job_allocator_remaps_total" + l) == remaps;
  })) << m;
  EXPECT_EQ(Value(m, "anxin_job_allocator_allocated_bytes" + l), (24 + 12 + 4) << 20);
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_allocator_fragmentation_ratio" + l),
                   std::max(d0["fragmentation"].get<double>(), d1["fragmentation"].get<double>()));
  EXPECT_EQ(Value(m, "anxin_job_allocator_ooms_total" + l), 1);
  EXPECT_EQ(Value(m, "anxin_job_allocator_remaps_total" + l), remaps);
  // The allocator's reports are all the job sent: no steps, no heartbeat
  // family of its own beyond the rank's.
  EXPECT_FALSE(Value(m, "anxin_job_last_step" + l).has_value());
  ASSERT_THAT((*client)->Stop(5s), IsOk());
  EXPECT_EQ(agent.Stop().value().exit_code, 0) << agent.Stderr();
}

TEST(SdkAllocTest, WithoutAnAgentSocketTheSdkIsNotLoaded) {
  auto out = RunCommand({kClient}, {.timeout = 30s, .env = {kConf, "ANXIN_AGENT_SOCKET="}});
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->exit_code, 0) << out->stderr_text;
  auto s = nlohmann::json::parse(out->stdout_text, nullptr, false);
  ASSERT_TRUE(s.is_object()) << out->stdout_text;
  EXPECT_EQ(s["sdk_loaded"], false);
  EXPECT_EQ(s["0"]["ooms"], 1);
}

}  // namespace
}  // namespace anxin
