// Imports of real nccl-tests and hccl_test outputs (tests/fixtures/comm/)
// give the numbers printed in them.
#include "anxin/comm/import.h"

#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/comm/format.h"
#include "anxin/comm/result_diff.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::testing::HasSubstr;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

const std::string kNccl = "comm/nccl-tests-all_reduce-16xH100.txt";
const std::string kHccl = "comm/hccl_test-all_reduce-8npu.txt";

TEST(ImportNcclTests, RealH100SampleGivesThePrintedNumbers) {
  const std::string text = ReadTextFile(FixturePath(kNccl));
  ASSERT_EQ(DetectFormat(text), ImportFormat::kNcclTests);
  auto runs = ImportText(text, kNccl, {});
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 1u);
  const CommRun& run = (*runs)[0];
  EXPECT_EQ(run.source, "nccl-tests");
  ASSERT_TRUE(run.op);
  EXPECT_EQ(*run.op, CollOp::kAllReduce);
  EXPECT_EQ(run.ranks, 16);
  ASSERT_EQ(run.hosts.size(), 16u);
  EXPECT_EQ(run.hosts[0], "ztan-mig-235z");
  EXPECT_EQ(run.hosts[15], "ztan-mig-gq73");
  EXPECT_EQ(run.iters, 20);
  EXPECT_EQ(run.warmup, 5);
  EXPECT_TRUE(run.checked);
  EXPECT_EQ(run.type, DataType::kFloat);
  EXPECT_EQ(*run.redop, RedOp::kSum);
  EXPECT_EQ(run.root, -1);
  ASSERT_EQ(run.rows.size(), 31u);
  const Row& first = run.rows.front();
  EXPECT_EQ(first.bytes, 8u);
  EXPECT_EQ(first.count, 2u);
  EXPECT_DOUBLE_EQ(first.out_of_place->time_us, 135.8);
  EXPECT_DOUBLE_EQ(first.in_place->time_us, 123.5);
  EXPECT_EQ(first.out_of_place->wrong, 0);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.bytes, 8589934592u);
  EXPECT_EQ(last.count, 2147483648u);
  EXPECT_DOUBLE_EQ(last.out_of_place->time_us, 47535);
  EXPECT_DOUBLE_EQ(last.out_of_place->algbw, 180.71);
  EXPECT_DOUBLE_EQ(last.out_of_place->busbw, 338.82);
  EXPECT_DOUBLE_EQ(last.in_place->time_us, 47743);
  EXPECT_DOUBLE_EQ(last.in_place->busbw, 337.35);
  ASSERT_TRUE(run.avg_busbw);
  EXPECT_DOUBLE_EQ(*run.avg_busbw, 70.742);
  // The printed columns agree with the formulas: algbw = S / t, busbw =
  // algbw x 2(n-1)/n, and the footer is the mean of every busbw.
  for (const Row& r : run.rows) {
    for (const auto* s : {&r.out_of_place, &r.in_place}) {
      EXPECT_NEAR((*s)->algbw, AlgBandwidth(r.bytes, (*s)->time_us), 0.006 + 0.001 * (*s)->algbw)
          << r.bytes;
      EXPECT_NEAR((*s)->busbw, (*s)->algbw * 30.0 / 16, 0.015 + 0.001 * (*s)->busbw) << r.bytes;
    }
  }
  CommRun recomputed = run;
  UpdateAverageBusBandwidth(recomputed);
  EXPECT_NEAR(*recomputed.avg_busbw, 70.742, 0.001);
}

TEST(ImportNcclTests, InfersTheOperationWithoutTheCommandLine) {
  std::string text = ReadTextFile(FixturePath(kNccl));
  text = Replace(text, "all_reduce_perf", "a.out");
  auto runs = ImportText(text, kNccl, {});
  ASSERT_THAT(runs, IsOk());
  ASSERT_TRUE((*runs)[0].op);
  EXPECT_EQ(*(*runs)[0].op, CollOp::kAllReduce);
  // 16 ranks but told 8: the ratio 1.875 then fits nothing; the op stays unknown.
  auto told = ImportText(text, kNccl, {.ranks = 8});
  ASSERT_THAT(told, IsOk());
  EXPECT_FALSE((*told)[0].op);
  EXPECT_THAT((*told)[0].command, HasSubstr("give --op"));
}

TEST(ImportNcclTests, ReadsTaggedOutputAndSplitsMixedTypes) {
  // mpirun --tag-output prefixes every line; a second type follows.
  std::string text = ReadTextFile(FixturePath(kNccl));
  std::string tagged;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    tagged += "[1,0]<stdout>:" + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  tagged +=
      "[1,0]<stdout>:           8             1    double     sum      -1    13.00    0.00"
      "    0.00      0    12.00    0.00    0.00      0\n";
  auto runs = ImportText(tagged, "tagged", {});
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].rows.size(), 31u);
  EXPECT_EQ((*runs)[1].type, DataType::kDouble);
  EXPECT_EQ((*runs)[1].rows.size(), 1u);
}

TEST(ImportNcclTests, MalformedRowsAreErrorsWithTheLine) {
  std::string text = ReadTextFile(FixturePath(kNccl));
  text = Replace(text, "  1059.9   31.66", "  10x9.9   31.66");
  EXPECT_THAT(ImportText(text, "bad.txt", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("bad.txt:54:")));
  EXPECT_THAT(ImportText("# size count\n", "empty.txt", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("empty.txt")));
  EXPECT_THAT(ImportText("hello\n", "other.txt", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("not nccl-tests output")));
}

TEST(ImportHcclTest, RealSampleGivesThePrintedNumbers) {
  const std::string text = ReadTextFile(FixturePath(kHccl));
  ASSERT_EQ(DetectFormat(text), ImportFormat::kHcclTest);
  auto runs = ImportText(text, kHccl, {.op = CollOp::kAllReduce, .ranks = 8});
  ASSERT_THAT(runs, IsOk());
  const CommRun& run = (*runs)[0];
  EXPECT_EQ(run.source, "hccl_test");
  EXPECT_EQ(run.iters, 20);
  EXPECT_EQ(run.warmup, 5);
  ASSERT_EQ(run.rows.size(), 14u);
  EXPECT_EQ(run.rows[0].bytes, 8192u);
  EXPECT_EQ(run.rows[0].count, 2048u);
  EXPECT_DOUBLE_EQ(run.rows[0].out_of_place->time_us, 764.55);
  EXPECT_DOUBLE_EQ(run.rows[0].out_of_place->algbw, 0.00998);
  EXPECT_EQ(run.rows[0].out_of_place->wrong, 0);
  EXPECT_DOUBLE_EQ(run.rows[13].out_of_place->time_us, 2630.20);
  EXPECT_DOUBLE_EQ(run.rows[13].out_of_place->algbw, 23.76245);
  // hccl_test's GB/s is 2^30 bytes per second: size / time / 2^30.
  EXPECT_DOUBLE_EQ(run.bw_unit_bytes, 1073741824.0);
  for (const Row& r : run.rows) {
    const double gib = r.bytes / (r.out_of_place->time_us * 1e-6) / 1073741824.0;
    EXPECT_NEAR(r.out_of_place->algbw, gib, 0.00001 + 1e-5 * gib) << r.bytes;
    // busbw from the rank count: x 2(8-1)/8.
    EXPECT_DOUBLE_EQ(r.out_of_place->busbw, r.out_of_place->algbw * 1.75);
  }
  EXPECT_TRUE(run.checked);
  EXPECT_TRUE(run.avg_busbw);
}

TEST(ImportHcclTest, WithoutRanksThereIsNoBusBandwidth) {
  const std::string text = ReadTextFile(FixturePath(kHccl));
  auto runs = ImportText(text, kHccl, {});
  ASSERT_THAT(runs, IsOk());
  EXPECT_FALSE((*runs)[0].op);
  EXPECT_FALSE((*runs)[0].avg_busbw);
  EXPECT_DOUBLE_EQ((*runs)[0].rows[0].out_of_place->busbw, 0);
  const std::string failed =
      "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
      "64 | 10.00 | 0.00001 | failed\n128 | 10.00 | 0.00001 | NULL\n";
  auto f = ImportText(failed, "f", {});
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ((*f)[0].rows[0].out_of_place->wrong, 1);
  EXPECT_EQ((*f)[0].rows[1].out_of_place->wrong, -1);
}

TEST(Compare, BeforeAfterPerSize) {
  auto a = LoadResult(FixturePath(kNccl));
  ASSERT_THAT(a, IsOk());
  CommRun b = *a;
  // The after run is 10% faster at every size.
  for (Row& r : b.rows) {
    for (auto* s : {&r.out_of_place, &r.in_place}) {
      (*s)->time_us *= 0.9;
      (*s)->algbw /= 0.9;
      (*s)->busbw /= 0.9;
    }
  }
  b.rows.pop_back();
  CompareReport report = CompareRuns(*a, b, "before", "after");
  EXPECT_EQ(report.rows.size(), 30u);
  EXPECT_EQ(report.only_a, std::vector<uint64_t>{8589934592u});
  EXPECT_NEAR(report.rows[0].time_change_pct, -10.0, 1e-9);
  EXPECT_NEAR(*report.mean_time_change_pct, -10.0, 1e-9);
  EXPECT_NEAR(*report.mean_bw_change_pct, 100.0 / 9, 1e-6);
  EXPECT_THAT(FormatCompare(report), HasSubstr("-10.0"));
}

TEST(Compare, HcclGiBAreBroughtToGB) {
  const std::string text = ReadTextFile(FixturePath(kHccl));
  auto h = ImportText(text, kHccl, {});
  ASSERT_THAT(h, IsOk());
  CommRun gb = (*h)[0];
  gb.bw_unit_bytes = 1e9;
  for (Row& r : gb.rows) r.out_of_place->algbw = AlgBandwidth(r.bytes, r.out_of_place->time_us);
  CompareReport report = CompareRuns((*h)[0], gb);
  EXPECT_EQ(report.bw_kind, "algbw");
  // Same times, same bandwidth once both are in GB/s (to the printed 5 decimals).
  for (const CompareRow& r : report.rows) EXPECT_NEAR(r.bw_change_pct, 0, 0.06) << r.bytes;
  EXPECT_THAT(report.notes, ::testing::Contains(HasSubstr("units differ")));
}

TEST(Compare, LoadResultRejectsOtherFiles) {
  ::anxin::testing::TempDir dir;
  EXPECT_THAT(LoadResult(dir.Write("x.txt", "nothing here\n")),
              HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(LoadResult(dir / "missing.json"), HasCode(ErrorCode::kNotFound));
  EXPECT_THAT(LoadResult(dir.Write("y.json", "{\"schema\": 1")),
              HasCode(ErrorCode::kInvalidArgument));
}

}  // namespace
}  // namespace anxin::comm
