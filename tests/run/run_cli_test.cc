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
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/run/checkpoint.h"
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

TEST(RunCliTest, SigtermStopsTheRanksAndExitsWith128PlusTheSignal) {
  TempDir dir;
  const std::string marker = "ANXIN_RUN_TEST_MARKER=term-" + std::to_string(getpid());
  SubprocessOptions so;
  so.argv = {AnxinBinary(),
             "run",
             "--nproc-per-node",
             "2",
             "--state-dir",
             dir / "state",
             "--stop-grace",
             "2s",
             "--env",
             marker,
             "--",
             "/bin/sh",
             "-c",
             "echo up; exec sleep 60"};
  std::atomic<int> up{0};
  so.on_stdout = [&](const OutputLine& l) {
    if (l.text.find("up") != std::string::npos) ++up;
  };
  auto sup = Subprocess::Start(so);
  ASSERT_TRUE(sup);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (up < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(up.load(), 2);
  ASSERT_EQ(::kill((*sup)->pid(), SIGTERM), 0);
  auto st = (*sup)->Wait(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(st->exit_code, 128 + SIGTERM) << st->Describe();
  EXPECT_TRUE(ProcessesWith(marker).empty());  // stopped, not orphaned
  // The job stays resumable.
  EXPECT_THAT(ReadTextFile(dir / "state/supervisor.json"), HasSubstr("\"state\": \"running\""));
}

TEST(RunCliTest, BadPlaybooksAndEscalationSettingsAreUsageErrors) {
  TempDir dir;
  const std::string bad = dir.Write("bad.yaml",
                                    "playbooks:\n  p:\n    - step: stop_ranks\n"
                                    "    - step: reset_device\n      retries: 2\n"
                                    "      timeout: soon\n");
  auto out = RunAnxin({"run", "--state-dir", dir / "s", "--playbook", bad, "--", "/bin/true"});
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text,
              HasSubstr(bad + ":6:16: playbooks.p[1].timeout: expected a duration"));

  const std::string cfg = dir.Write("anxin.yaml",
                                    "run:\n  faults:\n    collective_timeout: default\n"
                                    "    hangs: default\n");
  out = RunAnxin({"--config", cfg, "run", "--state-dir", dir / "s", "--", "/bin/true"});
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(cfg + ":4:12: run.faults.hangs: unknown fault class"));

  const std::string esc =
      dir.Write("esc.yaml", "run:\n  escalation:\n    faults: 2\n    windwo: 5m\n");
  out = RunAnxin({"--config", esc, "run", "--state-dir", dir / "s", "--", "/bin/true"});
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(esc + ":4:5: run.escalation: unknown key 'windwo'"));

  // The shipped example is accepted: the job runs.
  out = RunAnxin({"run", "--state-dir", dir / "s2", "--playbook",
                  SourcePath("examples/run/playbooks.yaml"), "--", "/bin/true"});
  EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
}

TEST(RunCliTest, SupervisorKilledAndStartedAgainResumesTheJob) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  const std::string marker = "ANXIN_RUN_TEST_MARKER=resume-" + std::to_string(getpid());
  auto args = t.Args({"--steps", "30"}, {"--env", marker});
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), AnxinBinary());
  std::atomic<int> last_step{0};
  SubprocessOptions so;
  so.argv = argv;
  so.on_stdout = [&](const OutputLine& l) {
    std::smatch m;
    if (std::regex_search(l.text, m, std::regex(R"(\[rank 0\] step (\d+) loss)"))) {
      last_step = std::stoi(m[1]);
    }
  };
  auto first = Subprocess::Start(so);
  ASSERT_TRUE(first);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (last_step < 12 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(last_step.load(), 12) << "the job did not reach step 12";
  ASSERT_EQ(::kill((*first)->pid(), SIGKILL), 0);
  (void)(*first)->Wait();
  for (int i = 0; i < 100 && !ProcessesWith(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ProcessesWith(marker).empty()) << "ranks outlived the supervisor";
  auto scan = ScanCheckpoints(t.ckpt);
  ASSERT_TRUE(scan && scan->Chosen() != nullptr);
  const int64_t newest = scan->Chosen()->step;

  auto out = RunAnxin(args, {.timeout = std::chrono::seconds(90)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("resuming the job of supervisor pid"));
  // The second supervisor went on from the newest checkpoint to the end.
  auto steps = Steps(out.stdout_text);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front(), newest + 1);
  EXPECT_EQ(steps.back(), 30);
  for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_EQ(steps[i + 1], steps[i] + 1);
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "supervisor_restart");
  EXPECT_EQ(in[0].outcome, "recovered");
  EXPECT_GE(in[0].resumed_step, newest);  // "resumed from ... at step N" is progress too
  EXPECT_THAT(in[0].checkpoint,
              HasSubstr("iter_" + std::string(7 - std::to_string(newest).size(), '0') +
                        std::to_string(newest)));
  // The attempt counter went on: the relaunch is attempt 1.
  EXPECT_THAT(t.dir.Read("logs/rank-0.log"), HasSubstr("--- anxin run: attempt 1, rank 0 ---"));
}

// ---- In-process restart and warm spares (docs/recovery.md).

// Every "step N loss X" rank 0 printed, in order.
std::vector<std::pair<int, std::string>> Losses(const std::string& out) {
  std::vector<std::pair<int, std::string>> losses;
  std::regex re(R"(\[rank 0\] step (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    losses.emplace_back(std::stoi((*it)[1]), (*it)[2]);
  }
  return losses;
}

// The losses of the sample trainer run without a fault, by step (run once).
const std::map<int, std::string>& UnfaultedLosses() {
  static const std::map<int, std::string> losses = [] {
    Trainer t;
    auto out = RunAnxin(t.Args({"--steps", "14"}), {.timeout = std::chrono::seconds(60)});
    EXPECT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
    std::map<int, std::string> m;
    for (const auto& [step, loss] : Losses(out.stdout_text)) m[step] = loss;
    return m;
  }();
  return losses;
}

// Every loss the faulted run printed (before the fault and again after the
// resume) equals the unfaulted run's at that step, and it reached the end.
void ExpectSameLosses(const std::string& out) {
  const auto& want = UnfaultedLosses();
  ASSERT_EQ(want.size(), 14u);
  const auto got = Losses(out);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().first, 14);
  for (const auto& [step, loss] : got) {
    ASSERT_TRUE(want.contains(step)) << step;
    EXPECT_EQ(loss, want.at(step)) << "step " << step;
  }
}

const StepRecord* FindStep(const Incident& in, const std::string& name) {
  for (const StepRecord& s : in.steps) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(RunCliTest, HangIsRecoveredInTheRanksOwnProcessesWithTheSameLosses) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--steps", "14", "--hang-at", "8"}, {"--hang-timeout", "2s"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "hang");
  EXPECT_EQ(in[0].outcome, "recovered");
  EXPECT_EQ(in[0].recovery_path, "in-process");
  const StepRecord* abort = FindStep(in[0], "abort_ranks");
  ASSERT_NE(abort, nullptr);
  EXPECT_THAT(abort->detail, HasSubstr("2 rank(s) aborted in their processes"));
  const StepRecord* rejoin = FindStep(in[0], "rejoin");
  ASSERT_NE(rejoin, nullptr);
  EXPECT_THAT(rejoin->detail, HasSubstr("2 rank(s) rejoined in their processes"));
  // The same process went on: it resumed the checkpoint it kept in memory.
  EXPECT_THAT(out.stdout_text, HasSubstr("[rank 0] resumed from memory at step 5"));
  EXPECT_EQ(FindStep(in[0], "stop_ranks"), nullptr);
  ExpectSameLosses(out.stdout_text);
  std::printf("hang: fault -> progress %.3f s in-process\n", in[0].time_to_recovery_seconds);
  // anxin incidents shows the path.
  auto table = RunAnxin({"incidents", "--state-dir", t.state});
  EXPECT_THAT(table.stdout_text, HasSubstr("path: in-process, abort_ranks"));
}

TEST(RunCliTest, AnInProcessRestartSendsThePlaybooksNotifyToo) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  HttpServer hook;
  std::mutex mu;
  std::vector<std::string> bodies;
  hook.Post("/hook", [&](const HttpRequest& r) {
    std::lock_guard lock(mu);
    bodies.push_back(r.body);
    return HttpResponse::Json(200, R"({"status":"stored"})");
  });
  ASSERT_TRUE(hook.Start());
  Trainer t;
  const std::string books =
      t.dir.Write("playbooks.yaml",
                  "playbooks:\n  default:\n    - {step: stop_ranks, grace: 1s}\n"
                  "    - {step: notify, url: \"http://127.0.0.1:" +
                      std::to_string(hook.port()) +
                      "/hook\", timeout: 2s, only_for: [hang]}\n"
                      "    - {step: select_checkpoint}\n    - {step: relaunch}\n"
                      "    - {step: verify_progress, timeout: 1m}\n");
  auto out = RunAnxin(
      t.Args({"--steps", "14", "--hang-at", "8"}, {"--hang-timeout", "2s", "--playbook", books}),
      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].recovery_path, "in-process");
  const StepRecord* notify = FindStep(in[0], "notify");
  ASSERT_NE(notify, nullptr);
  EXPECT_EQ(notify->result, "ok");
  std::lock_guard lock(mu);
  ASSERT_EQ(bodies.size(), 1u);
  auto msg = nlohmann::json::parse(bodies[0]);
  EXPECT_EQ(msg["alerts"][0]["labels"]["alertname"], "AnxinRunFault");
  EXPECT_EQ(msg["alerts"][0]["labels"]["fault_class"], "hang");
}

TEST(RunCliTest, WarmSpareTakesTheDeadRanksPlaceAndANewSpareIsStarted) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--steps", "14", "--crash-at", "8"}, {"--warm-spares", "1"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "process_exit");
  EXPECT_EQ(in[0].outcome, "recovered");
  EXPECT_EQ(in[0].recovery_path, "spare");
  const StepRecord* rejoin = FindStep(in[0], "rejoin");
  ASSERT_NE(rejoin, nullptr);
  EXPECT_THAT(rejoin->detail,
              HasSubstr("1 rank(s) rejoined in their processes, 1 from warm spares, 0 started"));
  // The spare, not a fresh process, became rank 0: it read the checkpoint
  // from disk (it never had the model), and its log continues as rank-0.log.
  EXPECT_THAT(out.stdout_text, HasSubstr("[rank 0] resumed from " + t.ckpt + "/iter_0000005"));
  EXPECT_THAT(t.dir.Read("logs/rank-0.log"), HasSubstr("rank 0, from spare-0 ---"));
  // A new spare was started in its place.
  EXPECT_TRUE(std::filesystem::exists(t.dir / "logs/spare-1.log"));
  ExpectSameLosses(out.stdout_text);
  std::printf("crash: fault -> progress %.3f s with a warm spare\n",
              in[0].time_to_recovery_seconds);
}

TEST(RunCliTest, RankThatIgnoresTheAbortIsKilledAndRelaunched) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  auto out = RunAnxin(t.Args({"--steps", "14", "--hang-at", "8", "--ignore-abort"},
                             {"--hang-timeout", "2s", "--abort-timeout", "1s"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("rank 1 ignores the abort"));
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].recovery_path, "relaunch");
  const StepRecord* abort = FindStep(in[0], "abort_ranks");
  ASSERT_NE(abort, nullptr);
  EXPECT_THAT(abort->detail, HasSubstr("1 rank(s) aborted in their processes, 0 had exited, 1 "
                                       "did not answer within 1 s and were killed"));
  const StepRecord* rejoin = FindStep(in[0], "rejoin");
  ASSERT_NE(rejoin, nullptr);
  EXPECT_THAT(rejoin->detail, HasSubstr("1 rank(s) rejoined in their processes, 0 from warm "
                                        "spares, 1 started anew"));
  // The killed rank's relaunch is a new process: its log has attempt 1's banner.
  EXPECT_THAT(t.dir.Read("logs/rank-1.log"), HasSubstr("--- anxin run: attempt 1, rank 1 ---"));
  ExpectSameLosses(out.stdout_text);
}

TEST(RunCliTest, FaultDuringAnInProcessRestartIsRecoveredAgain) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  // An error line at step 7, then rank 0 crashes at step 6 of the restarted
  // generation, before the restart has shown progress.
  auto out = RunAnxin(t.Args({"--steps", "14", "--hccl-error-at", "7", "--crash-at", "6:1"}),
                      {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].fault.fault_class, "network");
  EXPECT_EQ(in[0].recovery_path, "in-process");
  EXPECT_EQ(in[0].outcome, "failed_again");
  EXPECT_EQ(in[1].fault.fault_class, "process_exit");
  EXPECT_EQ(in[1].outcome, "recovered");
  EXPECT_EQ(in[1].attempt, 1);
  const StepRecord* abort = FindStep(in[1], "abort_ranks");
  ASSERT_NE(abort, nullptr);
  EXPECT_THAT(abort->detail, HasSubstr("1 rank(s) aborted in their processes, 1 had exited"));
  ExpectSameLosses(out.stdout_text);
}

TEST(RunCliTest, SupervisorKilledDuringAnInProcessRestartLeavesNoRankAndResumes) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed";
  Trainer t;
  const std::string marker = "ANXIN_RUN_TEST_MARKER=inproc-" + std::to_string(getpid());
  // Rank 1 ignores the abort and the supervisor waits 30 s for it: it is
  // killed while rank 0 has aborted and waits for the next generation.
  auto args = t.Args({"--steps", "14", "--hang-at", "8", "--ignore-abort"},
                     {"--hang-timeout", "2s", "--abort-timeout", "30s", "--env", marker});
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), AnxinBinary());
  auto first = Subprocess::Start({.argv = argv});
  ASSERT_TRUE(first);
  bool aborting = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!aborting && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto in = ReadIncidents(t.state);
    if (in && !in->empty()) {
      const StepRecord* s = FindStep(in->back(), "abort_ranks");
      aborting = s != nullptr && s->result == "running";
    }
  }
  ASSERT_TRUE(aborting) << "the supervisor never began the in-process restart";
  ASSERT_EQ(ProcessesWith(marker).size(), 2u);
  ASSERT_EQ(::kill((*first)->pid(), SIGKILL), 0);
  (void)(*first)->Wait();
  std::vector<int> left;
  for (int i = 0; i < 100; ++i) {
    left = ProcessesWith(marker);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(left.empty()) << left.size() << " rank(s) outlived the supervisor";

  auto out = RunAnxin(args, {.timeout = std::chrono::seconds(90)});
  ASSERT_EQ(out.exit_code, 0) << out.stdout_text << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("resuming the job of supervisor pid"));
  auto in = t.Incidents();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].outcome, "supervisor_restarted");
  EXPECT_EQ(FindStep(in[0], "abort_ranks")->result, "interrupted");
  EXPECT_EQ(in[1].fault.fault_class, "supervisor_restart");
  EXPECT_EQ(in[1].outcome, "recovered");
  EXPECT_EQ(Steps(out.stdout_text).back(), 14);
}

TEST(RunCliTest, WarmSparesNeedInProcessRestart) {
  TempDir dir;
  auto out = RunAnxin({"run", "--state-dir", dir / "s", "--warm-spares", "1", "--no-in-process",
                       "--", "/bin/true"});
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("--warm-spares needs in-process restart"));
}

}  // namespace
}  // namespace anxin::run
