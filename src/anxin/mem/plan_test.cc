#include "anxin/mem/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/mem/alloc_config.h"
#include "anxin/mem/allocator.h"
#include "anxin/mem/replay.h"
#include "anxin/mem/replay_report.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

ModelShape Small() {
  ModelShape s;
  s.layers = 4;
  s.hidden = 512;
  s.heads = 8;
  s.vocab = 32000;
  s.seq_buckets = {128, 256};
  s.micro_batch = 2;
  s.micro_batches = 2;
  return s;
}

TEST(PlanTest, TraceIsBalancedAndRecomputeSavesMemory) {
  auto t = GenerateStepTrace(Small());
  ASSERT_THAT(t, IsOk());
  ReplayOptions o;
  o.run_anxin = false;
  auto r = Replay(*t, o);
  ASSERT_THAT(r, IsOk());
  // Every step ends with only the persistent state live: allocs = frees + persistent.
  EXPECT_GT(r->allocs, r->frees);
  ModelShape rc = Small();
  rc.recompute = true;
  auto t2 = GenerateStepTrace(rc);
  ASSERT_THAT(t2, IsOk());
  auto r2 = Replay(*t2, o);
  ASSERT_THAT(r2, IsOk());
  EXPECT_LT(r2->peak_live, r->peak_live);
  ModelShape z = Small();
  z.zero_stage = 3;
  z.dp = 8;
  auto t3 = GenerateStepTrace(z);
  ASSERT_THAT(t3, IsOk());
  auto r3 = Replay(*t3, o);
  ASSERT_THAT(r3, IsOk());
  EXPECT_LT(r3->peak_live, r->peak_live);
}

TEST(PlanTest, RecommendsKnobsThatHoldThePeak) {
  auto p = MakePlan(Small(), 8 * kGiB);
  ASSERT_THAT(p, IsOk());
  EXPECT_TRUE(p->fits);
  EXPECT_GE(p->pool_bytes, p->anxin_peak_reserved);
  EXPECT_GE(p->anxin_peak_reserved, p->peak_live);
  EXPECT_EQ(p->candidates.size(), 12u);
  EXPECT_FALSE(p->shard_trials.empty());
  EXPECT_GT(p->pool_fraction, 0.0);
  auto tiny = MakePlan(Small(), 16 * kMiB);
  ASSERT_THAT(tiny, IsOk());
  EXPECT_FALSE(tiny->fits);
}

// A pool may take at most 95% of the device. A plan that needs more says so,
// with the limit, and recommends no pool_size (it once said pool_size:0.96);
// one that fits recommends a fraction within the limit that holds the pool.
TEST(PlanTest, NeverRecommendsAPoolAboveTheLimit) {
  auto need = MakePlan(Small(), 0);
  ASSERT_THAT(need, IsOk());
  const double pool = static_cast<double>(need->pool_bytes);
  auto over = MakePlan(Small(), static_cast<uint64_t>(pool / 0.96));
  ASSERT_THAT(over, IsOk());
  EXPECT_FALSE(over->fits);
  EXPECT_NEAR(over->pool_fraction, 0.96, 0.001);
  std::string text = PlanText(*over);
  EXPECT_THAT(text, Not(HasSubstr("pool_size:")));
  EXPECT_THAT(text, HasSubstr("DOES NOT FIT: the pool needs"));
  EXPECT_THAT(text, HasSubstr("may take at most 95% of the"));
  EXPECT_THAT(text, HasSubstr("use a device of at least"));
  nlohmann::json j = PlanJson(*over);
  EXPECT_FALSE(j["recommended"].contains("pool_fraction"));
  EXPECT_FALSE(j["recommended"].contains("pool_bytes"));
  EXPECT_EQ(j["max_pool_fraction"], kMaxPoolFraction);

  for (double fraction : {0.90, 0.9449, 0.9499}) {
    const uint64_t device = static_cast<uint64_t>(pool / fraction);
    auto fit = MakePlan(Small(), device);
    ASSERT_THAT(fit, IsOk());
    EXPECT_TRUE(fit->fits) << fraction;
    std::string t = PlanText(*fit);
    size_t at = t.find("pool_size:");
    ASSERT_NE(at, std::string::npos) << t;
    double recommended = std::stod(t.substr(at + 10));
    EXPECT_LE(recommended, kMaxPoolFraction) << t;
    EXPECT_GE(recommended * static_cast<double>(device), pool) << t;
    EXPECT_THAT(t, Not(HasSubstr("DOES NOT FIT")));
  }
}

TEST(PlanTest, BadShapesAndPrecisionsAreErrors) {
  ModelShape s = Small();
  s.hidden = 500;
  EXPECT_THAT(GenerateStepTrace(s), HasCode(ErrorCode::kInvalidArgument, HasSubstr("heads")));
  s = Small();
  s.zero_stage = 4;
  EXPECT_THAT(GenerateStepTrace(s), HasCode(ErrorCode::kInvalidArgument, HasSubstr("ZeRO")));
  EXPECT_THAT(ApplyPrecision("fp32-master,int3-grads", s),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("int3")));
  EXPECT_THAT(ApplyPrecision("bf16-gradz", s),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("gradz")));
  ASSERT_THAT(ApplyPrecision("no-master,fp16-params,fp32-grads,fp8-acts", s), IsOk());
  EXPECT_EQ(s.master_bytes, 0);
  EXPECT_EQ(s.grad_bytes, 4);
  EXPECT_EQ(s.act_bytes, 1);
}

TEST(PlanTest, ShapesPastWhatCanBeModelledAreRefusedNotCrashes) {
  // A zero sequence bucket, tensors whose sizes wrap 64 bits (once a
  // bad_alloc that ended the process) and a trace of billions of events
  // (once a hang) are refused before anything is built.
  ModelShape s = Small();
  s.seq_buckets = {128, 0};
  EXPECT_THAT(GenerateStepTrace(s),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("sequence bucket 0")));
  s = Small();
  s.seq_buckets = {1'000'000'000};
  EXPECT_THAT(GenerateStepTrace(s),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("attention scores of one layer")));
  s = Small();
  s.hidden = 2'147'483'640;
  EXPECT_THAT(MakePlan(s, 0), HasCode(ErrorCode::kInvalidArgument,
                                      HasSubstr("MLP weight of one layer (4 x hidden^2) would "
                                                "take more than 2^64 bytes")));
  s = Small();
  s.vocab = 2'000'000'000;
  s.seq_buckets = {4096};
  EXPECT_THAT(GenerateStepTrace(s), HasCode(ErrorCode::kInvalidArgument, HasSubstr("logits")));
  s = Small();
  s.layers = 2'147'483'647;
  EXPECT_THAT(MakePlan(s, 0),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("M allocator events")));
  s = Small();
  s.embedding_shard = 1;  // a shard per byte of the embedding
  EXPECT_THAT(GenerateStepTrace(s),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("M allocator events")));
  // The bound on the events holds for the largest shape it lets through.
  s = Small();
  s.layers = 10'000;
  s.micro_batches = 4;
  s.recompute = true;
  s.zero_stage = 3;
  s.dp = 8;
  auto t = GenerateStepTrace(s);
  ASSERT_THAT(t, IsOk());
  EXPECT_LT(t->events.size(), 10'000'000u);
}

TEST(PlanTest, APlanWithoutADeviceSizeNamesThePoolAsAllocConfReadsIt) {
  auto p = MakePlan(Small(), 0);
  ASSERT_THAT(p, IsOk());
  const std::string text = PlanText(*p);
  const auto at = text.find("ANXIN_ALLOC_CONF=");
  ASSERT_NE(at, std::string::npos);
  const std::string conf = text.substr(at + 17, text.find('\n', at) - at - 17);
  auto parsed = ParseAllocConf(conf);
  ASSERT_THAT(parsed, IsOk()) << conf;
  EXPECT_GE(parsed->options.pool_bytes, p->pool_bytes);
  EXPECT_LT(parsed->options.pool_bytes, p->pool_bytes + kMiB);
}

}  // namespace
}  // namespace anxin::mem
