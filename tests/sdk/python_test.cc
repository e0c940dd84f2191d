// The Python module anxin_sdk (python/anxin_sdk) as a training script uses
// it: a program reports through the socket to a real `anxin agent` and its
// steps, kernels, collectives, checkpoint and allocator statistics appear in
// /metrics; two gloo ranks' torch.distributed collectives, timed by the
// module's hook, appear with their bus bandwidth; and no wrong call, missing
// library or missing agent makes the module raise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
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
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::anxin::testing::Value;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;

constexpr const char* kPython = "/usr/bin/python3";

// The environment that lets python3 import the module from the source tree
// and load the library of this build. The sanitized build's library needs
// the AddressSanitizer runtime loaded first.
std::vector<std::string> PythonEnv(std::vector<std::string> more = {}) {
  std::vector<std::string> env = {"PYTHONPATH=" + SourcePath("python"), "PYTHONDONTWRITEBYTECODE=1",
                                  std::string("ANXIN_SDK_LIB=") + ANXIN_SDK_SO};
  if (std::string(ANXIN_ASAN_RUNTIME).size() > 0) {
    env.push_back(std::string("LD_PRELOAD=") + ANXIN_ASAN_RUNTIME);
    env.push_back("ASAN_OPTIONS=detect_leaks=0");
  }
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

CommandOutput RunPython(const std::vector<std::string>& args, std::vector<std::string> env) {
  std::vector<std::string> argv = {kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = RunCommand(argv, {.timeout = 120s, .env = std::move(env)});
  EXPECT_THAT(out, IsOk());
  return out ? *out : CommandOutput{};
}

nlohmann::json LastJsonLine(const std::string& text) {
  auto lines = SplitLines(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->starts_with("{")) return nlohmann::json::parse(*it, nullptr, false);
  }
  return nlohmann::json();
}

bool HaveTorch() {
  auto out = RunCommand({kPython, "-c", "import torch, torch.distributed"}, {.timeout = 60s});
  return out && out->exit_code == 0;
}

TEST(SdkPythonTest, AProgramsStepsKernelsAndCollectivesReachTheAgent) {
  TempDir dir;
  AgentProcess agent(dir);
  ASSERT_GT(agent.port(), 0);
  auto out = RunPython({SourcePath("tests/sdk/report.py"), "40"},
                       PythonEnv({"ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=py",
                                  "RANK=1", "WORLD_SIZE=4"}));
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  nlohmann::json s = LastJsonLine(out.stdout_text);
  ASSERT_TRUE(s.is_object()) << out.stdout_text;
  EXPECT_EQ(s["loaded"], true);
  EXPECT_EQ(s["connected"], true);
  EXPECT_EQ(s["sent"], s["events"]);
  // 40 x (begin, kernel, collective, end) + heartbeat, checkpoint, allocator.
  EXPECT_EQ(s["events"], 40 * 4 + 3);

  const std::string l = R"({node="node-a",job="py",rank="1")";
  std::string m;
  ASSERT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    return Value(m, "anxin_job_step_seconds_count" + l + "}") == 40 &&
           Value(m, "anxin_job_allocator_reserved_bytes" + l + "}").has_value();
  })) << m;
  // Each step slept 2 ms inside the context manager.
  EXPECT_GE(*Value(m, "anxin_job_step_seconds_sum" + l + "}"), 40 * 0.002);
  EXPECT_EQ(Value(m, "anxin_job_last_step" + l + "}"), 39);
  const double algbw = 64.0 * (1 << 20) / 0.004;
  EXPECT_DOUBLE_EQ(
      *Value(m, "anxin_job_collective_algbw_bytes_per_second" + l + R"(,op="all_reduce"})"), algbw);
  // The group of 4 the program named, not the world size: 2(n-1)/n = 1.5.
  EXPECT_DOUBLE_EQ(
      *Value(m, "anxin_job_collective_busbw_bytes_per_second" + l + R"(,op="all_reduce"})"),
      algbw * 1.5);
  EXPECT_EQ(Value(m, "anxin_job_collective_seconds_count" + l + R"(,op="all_reduce"})"), 40);
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_kernel_seconds_median" + l + R"(,kernel="gemm_bf16"})"),
                   0.001);
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_kernel_jitter_ratio" + l + R"(,kernel="gemm_bf16"})"), 3);
  EXPECT_EQ(Value(m, "anxin_job_last_checkpoint_step" + l + "}"), 40);
  EXPECT_EQ(Value(m, "anxin_job_allocator_reserved_bytes" + l + "}"), 2.0 * (1 << 30));
  EXPECT_EQ(Value(m, "anxin_job_allocator_allocated_bytes" + l + "}"), 1.5 * (1 << 30));
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_allocator_fragmentation_ratio" + l + "}"), 0.25);
  EXPECT_EQ(Value(m, "anxin_job_allocator_ooms_total" + l + "}"), 1);
  EXPECT_EQ(Value(m, "anxin_job_allocator_remaps_total" + l + "}"), 3);
  EXPECT_EQ(Value(m, R"(anxin_sdk_events_dropped_total{node="node-a"})"), 0);
  EXPECT_EQ(agent.Stop().value().exit_code, 0) << agent.Stderr();
}

TEST(SdkPythonTest, WrongCallsNeverRaiseWithOrWithoutLibraryOrAgent) {
  TempDir dir;
  const std::string script = SourcePath("tests/sdk/misuse.py");
  // No library: every call is a no-op, and since a socket is named, one line
  // says why telemetry is off.
  auto none = RunPython({script}, PythonEnv({"ANXIN_SDK_LIB=" + (dir / "missing/libanxin_sdk.so"),
                                             "ANXIN_AGENT_SOCKET=" + (dir / "agent.sock")}));
  ASSERT_EQ(none.exit_code, 0) << none.stderr_text;
  nlohmann::json s = LastJsonLine(none.stdout_text);
  ASSERT_TRUE(s.is_object()) << none.stdout_text;
  EXPECT_EQ(s["loaded"], false);
  EXPECT_EQ(s["events"], 0);
  EXPECT_THAT(none.stderr_text, HasSubstr("anxin_sdk: libanxin_sdk.so not found ("));
  EXPECT_THAT(none.stderr_text, HasSubstr("set ANXIN_SDK_LIB to its path: telemetry is off\n"));

  // A library, a socket, no agent: every report returns at once, counted as
  // unsent, without looking at its arguments; setup calls still check theirs.
  auto absent = RunPython({script}, PythonEnv({"ANXIN_AGENT_SOCKET=" + (dir / "agent.sock")}));
  ASSERT_EQ(absent.exit_code, 0) << absent.stderr_text;
  s = LastJsonLine(absent.stdout_text);
  ASSERT_TRUE(s.is_object()) << absent.stdout_text;
  EXPECT_EQ(s["loaded"], true);
  EXPECT_EQ(s["connected"], false);
  EXPECT_EQ(s["enabled"], true);
  EXPECT_EQ(s["ignored"], s["expected_ignored_setup"]);
  EXPECT_EQ(s["rejected"], 2);
  EXPECT_EQ(s["sent"], 0);
  EXPECT_EQ(s["unsent"], s["events"]);
  EXPECT_GE(s["unsent"], s["expected_ignored"]);
  EXPECT_EQ(absent.stderr_text, "");

  // With an agent: the usable calls arrive and nothing the module sent is refused.
  AgentProcess agent(dir);
  ASSERT_GT(agent.port(), 0);
  auto live = RunPython({script}, PythonEnv({"ANXIN_AGENT_SOCKET=" + agent.socket(),
                                             "ANXIN_JOB_ID=misuse", "RANK=0", "WORLD_SIZE=1"}));
  ASSERT_EQ(live.exit_code, 0) << live.stderr_text;
  s = LastJsonLine(live.stdout_text);
  ASSERT_TRUE(s.is_object()) << live.stdout_text;
  EXPECT_EQ(s["ignored"], s["expected_ignored"]);
  EXPECT_EQ(s["connected"], true);
  EXPECT_EQ(s["dropped"], 0);
  EXPECT_EQ(s["sent"], s["events"]);
  std::string m;
  ASSERT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    return Value(m, R"(anxin_job_last_step{node="node-a",job="misuse",rank="0"})") == 0;
  })) << m;
  // The 1000-byte name was cut to the wire's 96, the bytes that were not
  // UTF-8 became '?'.
  EXPECT_THAT(m, HasSubstr(R"(kernel=")" + std::string(96, 'k') + R"("})"));
  EXPECT_THAT(m, HasSubstr(R"(kernel="?? name"})"));
  EXPECT_EQ(Value(m, R"(anxin_sdk_datagrams_rejected_total{node="node-a",reason="malformed"})")
                .value_or(0),
            0);
  EXPECT_EQ(agent.Stop().value().exit_code, 0) << agent.Stderr();
}

TEST(SdkPythonTest, TheTorchHookTimesGlooCollectivesOfTwoRanks) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  TempDir dir;
  AgentProcess agent(dir);
  ASSERT_GT(agent.port(), 0);
  constexpr int kIterations = 20;
  const std::string store = dir / "store";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  std::vector<std::string> outputs(2);
  std::mutex mu;
  for (int rank = 0; rank < 2; ++rank) {
    SubprocessOptions o;
    o.argv = {kPython, SourcePath("tests/sdk/torch_collectives.py"), store,
              std::to_string(kIterations)};
    o.env = PythonEnv({"ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=torch",
                       "RANK=" + std::to_string(rank), "WORLD_SIZE=2", "GLOO_SOCKET_IFNAME=lo"});
    o.timeout = 120s;
    o.on_stdout = [&, rank](const OutputLine& l) {
      std::lock_guard lock(mu);
      outputs[rank] += l.text + "\n";
    };
    o.on_stderr = o.on_stdout;
    auto p = Subprocess::Start(std::move(o));
    ASSERT_THAT(p, IsOk());
    ranks.push_back(std::move(*p));
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto status = ranks[rank]->Wait();
    ASSERT_THAT(status, IsOk());
    std::lock_guard lock(mu);
    ASSERT_EQ(status->exit_code, 0) << "rank " << rank << ":\n" << outputs[rank];
  }
  std::string m;
  auto series = [](const char* name, int rank, const char* op) {
    return std::string(name) + R"({node="node-a",job="torch",rank=")" + std::to_string(rank) +
           R"(",op=")" + op + R"("})";
  };
  ASSERT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    for (int rank = 0; rank < 2; ++rank) {
      if (Value(m, series("anxin_job_collective_seconds_count", rank, "barrier")) != 1 ||
          Value(m, series("anxin_job_collective_seconds_count", rank, "all_reduce")) !=
              kIterations + 1)
        return false;
    }
    return true;
  })) << m;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    // The loop's all_reduces and the asynchronous one.
    EXPECT_EQ(Value(m, series("anxin_job_collective_seconds_count", rank, "all_reduce")),
              kIterations + 1);
    EXPECT_EQ(Value(m, series("anxin_job_collective_seconds_count", rank, "all_gather")), 1);
    EXPECT_EQ(Value(m, series("anxin_job_collective_seconds_count", rank, "broadcast")), 1);
    // Two ranks: all_reduce's factor 2(n-1)/n is 1, all_gather's (n-1)/n is 1/2.
    auto algbw =
        Value(m, series("anxin_job_collective_algbw_bytes_per_second", rank, "all_reduce"));
    auto busbw =
        Value(m, series("anxin_job_collective_busbw_bytes_per_second", rank, "all_reduce"));
    ASSERT_TRUE(algbw && busbw) << m;
    EXPECT_GT(*busbw, 0);
    EXPECT_DOUBLE_EQ(*busbw, *algbw);
    auto gather_alg =
        Value(m, series("anxin_job_collective_algbw_bytes_per_second", rank, "all_gather"));
    auto gather_bus =
        Value(m, series("anxin_job_collective_busbw_bytes_per_second", rank, "all_gather"));
    ASSERT_TRUE(gather_alg && gather_bus) << m;
    EXPECT_DOUBLE_EQ(*gather_bus, *gather_alg / 2);
    // 4 MiB in under a second on loopback, and not faster than memory.
    EXPECT_GT(*algbw, 4.0 * (1 << 20));
    EXPECT_LT(*algbw, 1e12);
    const std::string l = R"({node="node-a",job="torch",rank=")" + std::to_string(rank) + R"("})";
    EXPECT_EQ(Value(m, "anxin_job_step_seconds_count" + l), kIterations);
  }
  EXPECT_EQ(agent.Stop().value().exit_code, 0) << agent.Stderr();
}

}  // namespace
}  // namespace anxin
