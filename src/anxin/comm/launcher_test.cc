// The launcher's decisions: when anxin is a rank, what mpirun is given, and
// which line explains a failed job.
#include "anxin/comm/launcher.h"

#include <gtest/gtest.h>

#include <map>

#include "anxin/base/testing.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::HasCode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Getenv Env(std::map<std::string, std::string> vars) {
  auto owned = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

TEST(Launcher, DetectsMpiRanks) {
  EXPECT_FALSE(UnderMpiLauncher(Env({})));
  EXPECT_TRUE(UnderMpiLauncher(Env({{"OMPI_COMM_WORLD_SIZE", "4"}})));
  EXPECT_TRUE(UnderMpiLauncher(Env({{"PMI_SIZE", "4"}})));
}

TEST(Launcher, BuildsMpirunArguments) {
  LaunchRequest r;
  r.mpirun = "/usr/bin/mpirun";
  r.worker = "/opt/anxin-comm-worker";
  r.ranks = 4;
  r.spec = "{}";
  r.env = {"OMPI_MCA_coll_tuned_use_dynamic_rules=1", "NCCL_ALGO=Tree"};
  r.root = true;
  r.hardware_threads = 2;
  LaunchPlan p = BuildLaunch(r);
  EXPECT_THAT(p.argv, ElementsAre("/usr/bin/mpirun", "-np", "4", "--oversubscribe", "-x",
                                  "NCCL_ALGO", "/opt/anxin-comm-worker", "--spec", "{}"));
  EXPECT_THAT(p.env, ::testing::Contains("OMPI_ALLOW_RUN_AS_ROOT=1"));
  EXPECT_THAT(p.env, ::testing::Contains("NCCL_ALGO=Tree"));
  r.hosts = "n1:8,n2:8";
  r.root = false;
  r.ranks = 16;
  p = BuildLaunch(r);
  EXPECT_THAT(p.argv, ::testing::IsSupersetOf({std::string("-H"), std::string("n1:8,n2:8")}));
  EXPECT_THAT(p.argv, ::testing::Not(::testing::Contains("--oversubscribe")));
  EXPECT_THAT(p.env, ::testing::Not(::testing::Contains("OMPI_ALLOW_RUN_AS_ROOT=1")));
}

TEST(Launcher, ExplainsFailures) {
  EXPECT_EQ(ExplainFailure({"noise", "error: rank 2: all_reduce of 8 bytes has not completed",
                            "mpirun noticed"}),
            "rank 2: all_reduce of 8 bytes has not completed");
  EXPECT_EQ(ExplainFailure({"-------", "mpirun noticed that process rank 1 with PID 0 on node x",
                            "exited on signal 9 (Killed).", "-------"}),
            "mpirun noticed that process rank 1 with PID 0 on node x exited on signal 9 "
            "(Killed).");
  EXPECT_EQ(ExplainFailure({}), "the job ended without a result and without a message");
}

TEST(Launcher, MissingProgramsAreEnvironmentErrors) {
  auto env = Env({{"PATH", "/nonexistent"}});
  EXPECT_THAT(FindMpirun(env), HasCode(ErrorCode::kUnavailable, HasSubstr("openmpi-bin")));
  EXPECT_THAT(FindMpirun(Env({{"ANXIN_MPIRUN", "/nonexistent/mpirun"}})),
              HasCode(ErrorCode::kUnavailable, HasSubstr("ANXIN_MPIRUN")));
  EXPECT_THAT(FindWorker("nccl", Env({{"PATH", "/nonexistent"},
                                      {"ANXIN_COMM_WORKER_NCCL", "/nonexistent/w"}})),
              HasCode(ErrorCode::kUnavailable, HasSubstr("ANXIN_COMM_WORKER_NCCL")));
}

TEST(Launcher, RunLaunchReadsTheStatusMarker) {
  LaunchPlan plan;
  plan.argv = {"/bin/sh", "-c", "echo table; echo '@@anxin-comm-status 1'; echo 'soak: 1 s' >&2"};
  std::vector<std::string> out, progress;
  auto r = RunLaunch(
      plan, std::chrono::seconds(30), [&](const std::string& l) { out.push_back(l); },
      [&](const std::string& l) { progress.push_back(l); });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status, 1);
  EXPECT_THAT(out, ElementsAre("table"));
  EXPECT_THAT(progress, ElementsAre("soak: 1 s"));
}

TEST(Launcher, RunLaunchExplainsAJobWithoutAResult) {
  LaunchPlan plan;
  plan.argv = {"/bin/sh", "-c", "echo 'error: rank 1: boom' >&2; exit 3"};
  auto r = RunLaunch(
      plan, std::chrono::seconds(30), [](const std::string&) {}, [](const std::string&) {});
  EXPECT_THAT(r, HasCode(ErrorCode::kUnavailable, HasSubstr("rank 1: boom")));
  plan.argv = {"/bin/sleep", "30"};
  const auto start = std::chrono::steady_clock::now();
  r = RunLaunch(
      plan, std::chrono::seconds(1), [](const std::string&) {}, [](const std::string&) {});
  EXPECT_THAT(r, HasCode(ErrorCode::kDeadlineExceeded));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace anxin::comm
