// Formulas, names, options and JSON of the comm result model, on cases
// computed by hand.
#include "anxin/comm/model.h"

#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/comm/format.h"
#include "anxin/comm/options.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(BusBandwidth, FactorsAreNcclTestsFormulas) {
  // 2(n-1)/n for all_reduce: 8 ranks -> 14/8.
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kAllReduce, 4), 1.5);
  // (n-1)/n for all_gather, reduce_scatter and alltoall.
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kAlltoAll, 16), 15.0 / 16);
  // 1 for broadcast, reduce, sendrecv.
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kReduce, 16), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollOp::kSendRecv, 16), 1.0);
}

TEST(BusBandwidth, AlgBandwidthIsBytesOverTimeIn1e9) {
  // 1 MiB in 100 us: 1048576 / 1e9 / 1e-4 = 10.48576 GB/s.
  EXPECT_DOUBLE_EQ(AlgBandwidth(1048576, 100.0), 10.48576);
  EXPECT_DOUBLE_EQ(AlgBandwidth(8, 0), 0);
  // The H100 sample's 8 GiB row: 8589934592 B in 47535 us -> 180.71 GB/s printed.
  EXPECT_NEAR(AlgBandwidth(8589934592ull, 47535), 180.71, 0.005);
  EXPECT_NEAR(AlgBandwidth(8589934592ull, 47535) * BusBandwidthFactor(CollOp::kAllReduce, 16),
              338.82, 0.02);
}

TEST(Names, RoundTripAndAliases) {
  for (CollOp op : kAllOps) {
    auto back = ParseOp(OpName(op));
    ASSERT_THAT(back, IsOk());
    EXPECT_EQ(*back, op);
  }
  EXPECT_EQ(*ParseOp("all_reduce_perf"), CollOp::kAllReduce);
  EXPECT_EQ(*ParseOp("allreduce"), CollOp::kAllReduce);
  EXPECT_EQ(*ParseOp("reduce_scatter_test"), CollOp::kReduceScatter);
  EXPECT_THAT(ParseOp("allreduc"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("allreduc")));
  EXPECT_EQ(*ParseType("fp32"), DataType::kFloat);
  EXPECT_EQ(*ParseType("bf16"), DataType::kBfloat16);
  EXPECT_THAT(ParseType("float128"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_EQ(*ParseRedOp("MAX"), RedOp::kMax);
}

TEST(Options, SizesFollowNcclTests) {
  EXPECT_EQ(*ParseSize("8"), 8u);
  EXPECT_EQ(*ParseSize("8K"), 8192u);
  EXPECT_EQ(*ParseSize("128M"), 128u << 20);
  EXPECT_EQ(*ParseSize("1G"), 1u << 30);
  EXPECT_EQ(*ParseSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseSize("1MB"), 1u << 20);  // one meaning of MB in anxin (docs/configuration.md)
  EXPECT_THAT(ParseSize("12XB"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("12XB")));
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 64;
  EXPECT_EQ(SweepSizes(o), (std::vector<uint64_t>{8, 16, 32, 64}));
  o.step_factor = 1;
  o.step_bytes = 24;
  EXPECT_EQ(SweepSizes(o), (std::vector<uint64_t>{8, 32, 56}));
}

TEST(Options, CountsPerOperation) {
  // all_gather on 4 ranks: 1 MiB of floats is 4 blocks of 65536 elements.
  EXPECT_EQ(CallCount(CollOp::kAllGather, 1 << 20, DataType::kFloat, 4), 65536u);
  EXPECT_EQ(RowBytes(CollOp::kAllGather, 65536, DataType::kFloat, 4), 1u << 20);
  EXPECT_EQ(CallCount(CollOp::kAllReduce, 1 << 20, DataType::kFloat, 4), 262144u);
  EXPECT_EQ(CallCount(CollOp::kAlltoAll, 8, DataType::kFloat, 4), 0u);  // too small
  EXPECT_EQ(RowBytes(CollOp::kAllReduce, 2, DataType::kDouble, 4), 16u);
}

TEST(Options, ValidateRefusesWhatCannotBeChecked) {
  BenchOptions o;
  EXPECT_THAT(Validate(o), IsOk());
  o.max_bytes = 4;
  EXPECT_THAT(Validate(o), HasCode(ErrorCode::kInvalidArgument, HasSubstr("-e")));
  o = BenchOptions();
  o.engine = "gloo";
  EXPECT_THAT(Validate(o), HasCode(ErrorCode::kInvalidArgument, HasSubstr("gloo")));
  o = BenchOptions();
  o.type = DataType::kHalf;
  EXPECT_THAT(Validate(o), HasCode(ErrorCode::kUnimplemented));
  o = BenchOptions();
  o.algo = "ringg";
  EXPECT_THAT(Validate(o), HasCode(ErrorCode::kInvalidArgument, HasSubstr("rabenseifner")));
}

TEST(Options, SpecRoundTrip) {
  BenchOptions o;
  o.op = CollOp::kAlltoAll;
  o.min_bytes = 1024;
  o.max_bytes = 4096;
  o.type = DataType::kInt32;
  o.matrix_iters = 7;
  o.duration_s = 2.5;
  o.launched = true;
  auto back = BenchOptionsFromJson(ToJson(o).dump());
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->op, CollOp::kAlltoAll);
  EXPECT_EQ(back->min_bytes, 1024u);
  EXPECT_EQ(back->type, DataType::kInt32);
  EXPECT_EQ(back->matrix_iters, 7);
  EXPECT_DOUBLE_EQ(back->duration_s, 2.5);
  EXPECT_TRUE(back->launched);
  EXPECT_THAT(BenchOptionsFromJson("[1]"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(BenchOptionsFromJson(R"({"iters": "many"})"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Options, AlgorithmEnvironment) {
  auto env = AlgorithmEnvironment("mpi", CollOp::kAllReduce, "ring");
  ASSERT_THAT(env, IsOk());
  EXPECT_EQ(*env, (std::vector<std::string>{"OMPI_MCA_coll_tuned_use_dynamic_rules=1",
                                            "OMPI_MCA_coll_tuned_allreduce_algorithm=ring"}));
  EXPECT_EQ(AlgorithmEnvironment("mpi", CollOp::kReduceScatter, "butterfly")->back(),
            "OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm=butterfly");
  EXPECT_EQ(AlgorithmEnvironment("nccl", CollOp::kAllReduce, "tree")->back(), "NCCL_ALGO=tree");
  EXPECT_EQ(AlgorithmEnvironment("hccl", CollOp::kAllReduce, "NHR")->back(),
            "HCCL_ALGO=level0:NA;level1:NHR");
  EXPECT_EQ(AlgorithmEnvironment("hccl", CollOp::kAllReduce, "level0:NA;level1:ring")->back(),
            "HCCL_ALGO=level0:NA;level1:ring");
  EXPECT_THAT(AlgorithmEnvironment("mpi", CollOp::kSendRecv, "ring"),
              HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(AlgorithmEnvironment("nccl", CollOp::kAllReduce, "Rung"),
              HasCode(ErrorCode::kInvalidArgument));
}

CommRun SampleRun() {
  CommRun run;
  run.engine = "mpi";
  run.op = CollOp::kAllReduce;
  run.redop = RedOp::kSum;
  run.ranks = 4;
  run.iters = 20;
  run.warmup = 5;
  run.checked = true;
  run.hosts = {"a", "a", "b", "b"};
  for (uint64_t bytes : {8ull, 1048576ull}) {
    Row r;
    r.bytes = bytes;
    r.count = bytes / 4;
    Sample s;
    s.time_us = bytes == 8 ? 12.5 : 100.0;
    s.algbw = AlgBandwidth(bytes, s.time_us);
    s.busbw = s.algbw * 1.5;
    s.wrong = 0;
    s.p50_us = s.time_us;
    s.p99_us = s.time_us * 2;
    r.out_of_place = s;
    r.in_place = s;
    run.rows.push_back(r);
  }
  UpdateAverageBusBandwidth(run);
  return run;
}

TEST(Model, AverageBusBandwidthIsTheMeanOfEverySample) {
  CommRun run = SampleRun();
  ASSERT_TRUE(run.avg_busbw);
  // busbw 8 B: 8/1e9/12.5e-6*1.5 = 0.00096; 1 MiB: 10.48576*1.5 = 15.72864.
  EXPECT_NEAR(*run.avg_busbw, (0.00096 + 15.72864) / 2, 1e-9);
}

TEST(Model, JsonRoundTrip) {
  CommRun run = SampleRun();
  run.rows[1].in_place->wrong = 3;
  auto back = CommRunFromJson(ToJson(run), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->rows.size(), 2u);
  EXPECT_EQ(back->rows[1].in_place->wrong, 3);
  EXPECT_EQ(back->rows[1].bytes, 1048576u);
  EXPECT_EQ(*back->op, CollOp::kAllReduce);
  EXPECT_EQ(back->hosts, run.hosts);
  EXPECT_EQ(TotalWrong(*back), 3);
  nlohmann::json bad = ToJson(run);
  bad["rows"][0]["size"] = "big";
  EXPECT_THAT(CommRunFromJson(bad, "x.json"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("x.json: field 'size'")));
  bad = ToJson(run);
  bad["schema"] = "other";
  EXPECT_THAT(CommRunFromJson(bad, "x.json"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Format, TableHasNcclTestsColumns) {
  const std::string table = FormatTable(SampleRun());
  EXPECT_THAT(table, HasSubstr("#wrong"));
  EXPECT_THAT(table, HasSubstr("# Avg bus bandwidth    : 7.8648"));
  EXPECT_THAT(table, HasSubstr("# Out of bounds values : 0 OK"));
  // size, count, type, redop, root, then time (2 decimals under 100 us),
  // algbw, busbw, #wrong; then in-place; then p50/p99.
  EXPECT_THAT(table, HasSubstr("           8             2     float     sum      -1    12.50  "
                               "  0.00    0.00       0    12.50    0.00    0.00       0    12.50"
                               "    25.00"));
  EXPECT_THAT(table, HasSubstr("     1048576        262144     float     sum      -1   100.00   "
                               "10.49   15.73       0"));
}

TEST(Format, Numbers) {
  EXPECT_EQ(FitNumber(12.5, 7), "  12.50");
  EXPECT_EQ(FitNumber(47535, 7), "47535.0");
  EXPECT_EQ(FitNumber(1234567, 7), "1234567");
  EXPECT_EQ(FitNumber(123456789, 7), "1.2e+08");
  EXPECT_EQ(FitNumber(338.82, 6), "338.82");
  EXPECT_EQ(FitNumber(1338.82, 6), "1338.8");
}

TEST(Format, CsvHasALinePerSize) {
  const std::string csv = FormatCsv(SampleRun());
  EXPECT_THAT(csv, HasSubstr("op,engine,ranks,algo,type,redop,root,size,count,oop_time_us"));
  EXPECT_THAT(csv, HasSubstr("all_reduce,mpi,4,,float,sum,-1,1048576,262144,100.000,10.4858,"
                             "15.7286,0,100.000,200.000"));
}

}  // namespace
}  // namespace anxin::comm
