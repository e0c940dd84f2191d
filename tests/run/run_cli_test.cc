// `anxin run` end to end with the sample trainer. Skipped where python3-torch
// is not installed (scripts/install-deps installs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/run/journal.h"

namespace anxin::run {
namespace {

using ::anxin::testing::AnxinBinary;
using ::anxin::testing::FixturePath;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;

bool HaveTorch() {
  static const bool have = [] {
    auto out = RunCommand({"/usr/bin/python3", "-c", "import torch, torch.distributed"},
                          {.timeout = std::chrono::seconds(60)});
    return out && out->ok();
  }();
  return have;
}

struct Trainer {
  TempDir dir{"anxin-run-cli"};
  std::string ckpt = dir.Mkdir("ckpt");
  std::string state = dir / "state";

  std::vector<std::string> Args(std::vector<std::string> job_flags,
                                std::vector<std::string> run_flags = {}) {
    std::vector<std::string> args = {"run",
                                     "--nproc-per-node",
                                     "2",
                                     "--state-dir",
                                     state,
                                     "--checkpoint-dir",
                                     ckpt,
                                     "--stop-grace",
                                     "1s",
                                     "--log-dir",
                                     dir / "logs",
                                     "--scenario",
                                     FixturePath("run/fast-reset.yaml")};
    args.insert(args.end(), run_flags.begin(), run_flags.end());
    for (const char* a : {"--", "/usr/bin/python3", "-u"}) args.push_back(a);
    args.push_back(SourcePath("examples/run/train.py"));
    for (const std::string a : {"--ckpt-dir", ckpt.c_str(), "--resume", "{checkpoint}", "--steps",
                                "20", "--ckpt-every", "5"}) {
      args.push_back(a);
    }
    args.insert(args.end(), job_flags.begin(), job_flags.end());
    return args;
  }
  std::vector<Incident> Incidents() { return ReadIncidents(state).value(); }
};

// The steps rank 0 printed, in order.
std::vector<int> Steps(const std::string& out) {
  std::vector<int> steps;
  std::regex re(R"(\[rank 0\] step (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    steps.push_back(std::stoi((*it)[1]));
  }
  return steps;
}

// Asserts that after a restart the job went on from the step after
// `resumed`, and that every step up to `last` was done.
void ExpectContinuity(const std::vector<int>& steps, int fault_step, int resumed, int last) {
  ASSERT_FALSE(steps.empty());
  size_t i = 0;
  for (int s = 1; s < fault_step; ++s, ++i) {
    ASSERT_LT(i, steps.size());
    EXPECT_EQ(steps[i], s);
  }
  ASSERT_LT(i, steps.size());
  EXPECT_EQ(steps[i], resumed + 1) << "the relaunch must continue after the checkpoint";
  EXPECT_EQ(steps.back(), last);
  for (; i + 1 < steps.size(); ++i) EXPECT_EQ(steps[i + 1], steps[i] + 1);
}

double FaultTime(const Incident& in) {
  return std::chrono::duration<double>(in.fault.wall.time_since_epoch()).count();
}

double InjectedAt(const std::string& out) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex(R"(t=([0-9.]+))")));
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(RunCliTest, CrashIsRelaunchedFromTheNewestCheckpointAndTheLossFalls) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--crash-at", "13"}), {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto steps = Steps(out.stdout_text);
  ExpectContinuity(steps, 13, 10, 20);
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "process_exit");
  EXPECT_EQ(in[0].outcome, "recovered");
  EXPECT_THAT(in[0].checkpoint, HasSubstr("iter_0000010"));
  // The model learns: the last loss is well below the first.
  std::smatch first, last;
  std::regex re(R"(\[rank 0\] step 1 loss ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(out.stdout_text, first, re));
  std::regex re20(R"(\[rank 0\] step 20 loss ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(out.stdout_text, last, re20));
  EXPECT_LT(std::stod(last[1]), 0.8 * std::stod(first[1]));
}

TEST(RunCliTest, HangIsDetectedWithinTimeoutPlusTwoSeconds) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--hang-at", "8"}, {"--hang-timeout", "3s"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "hang");
  const double latency = FaultTime(in[0]) - InjectedAt(out.stdout_text);
  std::printf("hang detected %.2f s after the rank stopped (timeout 3 s)\n", latency);
  EXPECT_LT(latency, 3 + 2);
  ExpectContinuity(Steps(out.stdout_text), 8, 5, 20);
}

TEST(RunCliTest, HcclErrorLineIsDetected) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--hccl-error-at", "7"}), {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "network");
  EXPECT_EQ(in[0].fault.rank, 1);
  const double latency = FaultTime(in[0]) - InjectedAt(out.stdout_text);
  std::printf("error line detected %.3f s after it was printed\n", latency);
  EXPECT_LT(latency, 2.0);  // the target is 0.5 s; sanitizers and a busy machine get slack
  ExpectContinuity(Steps(out.stdout_text), 7, 5, 20);
}

TEST(RunCliTest, CorruptNewestCheckpointIsSkipped) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--crash-at", "13", "--corrupt-newest"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_THAT(in[0].checkpoint, HasSubstr("iter_0000005"));
  bool said = false;
  for (const StepRecord& s : in[0].steps) {
    if (s.name == "select_checkpoint") {
      said = s.detail.find("skipped iter_0000010") != std::string::npos &&
             s.detail.find("SHA-256") != std::string::npos;
    }
  }
  EXPECT_TRUE(said);
  ExpectContinuity(Steps(out.stdout_text), 13, 5, 20);
}

// Processes whose environment holds marker.
std::vector<int> ProcessesWith(const std::string& marker) {
  std::vector<int> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = ReadTextFile(e.path().string() + "/environ");
    if (env.find(marker) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

TEST(RunCliTest, SupervisorKilledLeavesNoRankRunning) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  const std::string marker = "ANXIN_RUN_TEST_MARKER=" + std::to_string(getpid());
  auto args = t.Args({"--steps", "100000"}, {"--env", marker});
  args.insert(args.begin(), AnxinBinary());
  std::atomic<int> steps{0};
  SubprocessOptions so;
  so.argv = args;
  so.on_stdout = [&](const OutputLine& l) {
    if (l.text.find("step ") != std::string::npos) ++steps;
  };
  auto sup = Subprocess::Start(so);
  ASSERT_TRUE(sup);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (steps < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(steps.load(), 3);
  ASSERT_EQ(ProcessesWith(marker).size(), 2u);
  ASSERT_EQ(::kill((*sup)->pid(), SIGKILL), 0);  // the supervisor alone, not its group
  (void)(*sup)->Wait();
  std::vector<int> left;
  for (int i = 0; i < 100; ++i) {
    left = ProcessesWith(marker);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " rank(s) outlived the supervisor";
}

}  // namespace
}  // namespace anxin::run
