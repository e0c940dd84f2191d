// The algorithm sweep with a stand-in for mpirun that prints a worker's result.
#include "anxin/comm/sweep.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "anxin/base/testing.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A "mpirun" that records the algorithm it was given and prints a result.
SweepRequest FakeLaunch(const TempDir& dir, std::string_view status) {
  CommRun run;
  run.engine = "mpi";
  run.op = CollOp::kAllReduce;
  run.ranks = 2;
  const std::string script =
      dir.Write("mpirun", "#!/bin/sh\nenv | grep '^OMPI_MCA_coll_tuned_allreduce_algorithm=' >> " +
                              (dir / "algos.txt") + "\ncat <<'EOF'\n" + ToJson(run).dump() +
                              "\nEOF\necho '@@anxin-comm-status " + std::string(status) + "'\n");
  chmod(script.c_str(), 0755);
  SweepRequest req;
  req.launch.mpirun = script;
  req.launch.worker = "/bin/true";
  req.timeout = std::chrono::seconds(30);
  return req;
}

TEST(SweepTest, RunsEachAlgorithmWithItsEnvironment) {
  TempDir dir;
  SweepRequest req = FakeLaunch(dir, "1");
  req.algos = "ring,recursive_doubling";
  std::vector<std::string> progress;
  auto out = RunSweep(req, [&](const std::string& l) { progress.push_back(l); });
  ASSERT_TRUE(out) << out.error().ToString();
  EXPECT_EQ(out->status, 1);  // the worst of the runs
  EXPECT_THAT(out->sweep.algos, ElementsAre("ring", "recursive_doubling"));
  ASSERT_EQ(out->sweep.runs.size(), 2u);
  EXPECT_THAT(progress, ElementsAre("sweep: ring (1 of 2)", "sweep: recursive_doubling (2 of 2)"));
  EXPECT_EQ(dir.Read("algos.txt"),
            "OMPI_MCA_coll_tuned_allreduce_algorithm=ring\n"
            "OMPI_MCA_coll_tuned_allreduce_algorithm=recursive_doubling\n");
}

TEST(SweepTest, UnknownAlgorithmsFailBeforeAnyRun) {
  TempDir dir;
  SweepRequest req = FakeLaunch(dir, "0");
  req.algos = "ring,fastest";
  EXPECT_THAT(RunSweep(req, [](const std::string&) {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--algo fastest")));
  EXPECT_EQ(dir.Read("algos.txt"), "");
  req.algos = "";
  req.bench.op = CollOp::kSendRecv;
  EXPECT_THAT(RunSweep(req, [](const std::string&) {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no algorithm choice for")));
}

TEST(SweepTest, AFailedRunNamesTheAlgorithm) {
  TempDir dir;
  SweepRequest req = FakeLaunch(dir, "2");
  req.algos = "ring";
  EXPECT_THAT(RunSweep(req, [](const std::string&) {}),
              HasCode(ErrorCode::kUnavailable, HasSubstr("algorithm ring: the run failed")));
}

}  // namespace
}  // namespace anxin::comm
