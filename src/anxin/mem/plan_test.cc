#include "anxin/mem/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/mem/allocator.h"
#include "anxin/mem/replay.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace anxin::mem
