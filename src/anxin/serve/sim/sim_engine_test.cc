#include "anxin/serve/sim/sim_engine.h"

#include <map>

#include "anxin/base/testing.h"
#include "anxin/serve/sim/sim_options.h"
#include "anxin/serve/sim/sim_text.h"

namespace anxin::serve::sim {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

std::vector<int32_t> Prompt(int n, int32_t base = 5000) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = base + i;
  return p;
}

EngineOptions Small(int blocks, int cap) {
  EngineOptions o;
  o.shape = {2, 2, 64};
  o.format = kv::ParseKvFormat("int4").value();
  o.block_tokens = 16;
  o.num_blocks = blocks;
  o.max_num_seqs = cap;
  o.watermark = 0;
  return o;
}

// Steps until idle; returns tokens per request and checks the cap each step.
std::map<RequestId, int> RunToEnd(Engine& e, int cap, int* max_batch = nullptr) {
  std::map<RequestId, int> tokens;
  for (int i = 0; i < 100000 && e.HasWork(); ++i) {
    StepResult r = e.Step();
    EXPECT_LE(r.decode_batch + r.prefilled, cap);
    if (max_batch) *max_batch = std::max(*max_batch, r.decode_batch + r.prefilled);
    for (const StepOutput& o : r.outputs) ++tokens[o.id];
  }
  EXPECT_FALSE(e.HasWork()) << "the engine did not finish";
  return tokens;
}

TEST(SimServeOptions, BlocksFromThePlanKvMemoryOrNumBlocks) {
  SimServeRequest req;  // llama-3-8b on 80GiB
  req.kv_format = "int4";
  auto plan = PlanSimServe(req);
  ASSERT_THAT(plan, IsOk());
  const EngineOptions& e = plan->options.engine;
  EXPECT_EQ(e.shape.kv_heads, 8);
  EXPECT_EQ(e.format.Name(), "int4");
  EXPECT_GT(e.num_blocks, 0);
  EXPECT_EQ(plan->blocks_from, "kv plan of llama-3-8b on 80GiB");
  // 1 GiB of int4 blocks of 16 tokens: 32 layers x 8 heads x 128 x 2 (K, V) x 4.5 bits.
  req.kv_memory = "1GiB";
  plan = PlanSimServe(req);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->options.engine.num_blocks,
            static_cast<int>((1ull << 30) / (16ull * 32 * 8 * 128 * 2 * 9 / 16)));
  req.num_blocks = 64;
  plan = PlanSimServe(req);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->options.engine.num_blocks, 64);
  EXPECT_EQ(plan->blocks_from, "--num-blocks");
  req.kv_format = "int3";
  EXPECT_THAT(PlanSimServe(req), HasCode(ErrorCode::kInvalidArgument));
  req.kv_format = "int4";
  req.num_blocks = 0;
  req.kv_memory = "";
  req.plan.device_memory = "8GiB";  // the weights alone are 16 GB
  EXPECT_THAT(PlanSimServe(req),
              HasCode(ErrorCode::kInvalidArgument, ::testing::HasSubstr("no KV blocks fit")));
}

TEST(Engine, EveryRequestGetsItsTokensUnderTheCap) {
  Engine e(Small(1000, 4));
  std::vector<RequestId> ids;
  for (int i = 0; i < 10; ++i) {
    auto id = e.Submit({.prompt = Prompt(20 + i), .max_tokens = 7 + i});
    ASSERT_THAT(id, IsOk());
    ids.push_back(*id);
  }
  int max_batch = 0;
  auto tokens = RunToEnd(e, 4, &max_batch);
  EXPECT_EQ(max_batch, 4);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(tokens[ids[i]], 7 + i);
  EngineStats s = e.Stats();
  EXPECT_EQ(s.completed, 10u);
  EXPECT_EQ(s.preemptions, 0u);
  EXPECT_EQ(s.blocks.used_blocks, 0);
}

TEST(Engine, PreemptsByRecomputeWhenBlocksRunOut) {
  // 4 sequences of 20 + 60 tokens need 5 blocks each at the end: 20 > 12.
  Engine e(Small(12, 4));
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(*e.Submit({.prompt = Prompt(20, 100 * i), .max_tokens = 60}));
  auto tokens = RunToEnd(e, 4);
  for (RequestId id : ids) EXPECT_EQ(tokens[id], 60);
  EngineStats s = e.Stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_GT(s.recomputed_tokens, 0u);
  EXPECT_EQ(s.completed, 4u);
}

TEST(Engine, SharedPromptsHitThePrefixCache) {
  Engine e(Small(100, 8));
  std::vector<int32_t> system = Prompt(64);
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = system;
    p.push_back(9000 + i);
    ASSERT_THAT(e.Submit({.prompt = p, .max_tokens = 2}), IsOk());
    RunToEnd(e, 8);
  }
  EXPECT_EQ(e.Stats().prefix_cached_tokens, 2u * 64);
}

TEST(Engine, RefusesWhatCanNeverRunAndFullQueues) {
  EngineOptions o = Small(4, 1);
  o.max_waiting = 1;
  o.max_model_len = 100;
  Engine e(o);
  EXPECT_THAT(e.Submit({.prompt = {}, .max_tokens = 1}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(e.Submit({.prompt = Prompt(90), .max_tokens = 20}),
              HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(e.Submit({.prompt = Prompt(60), .max_tokens = 20}),
              HasCode(ErrorCode::kInvalidArgument));  // 5 blocks > 4
  EXPECT_THAT(e.Submit({.prompt = Prompt(10), .max_tokens = 2, .sampling = {.top_p = 2}}),
              HasCode(ErrorCode::kInvalidArgument));
  ASSERT_THAT(e.Submit({.prompt = Prompt(10), .max_tokens = 2}), IsOk());
  EXPECT_THAT(e.Submit({.prompt = Prompt(10), .max_tokens = 2}),
              HasCode(ErrorCode::kResourceExhausted));
}

TEST(Engine, CancelFreesBlocks) {
  Engine e(Small(10, 2));
  RequestId a = *e.Submit({.prompt = Prompt(40), .max_tokens = 50});
  RequestId b = *e.Submit({.prompt = Prompt(40, 77), .max_tokens = 50});
  e.Step();
  EXPECT_GT(e.Stats().blocks.used_blocks, 0);
  e.Cancel(a);
  e.Cancel(b);
  EXPECT_EQ(e.Stats().blocks.used_blocks, 0);
  EXPECT_FALSE(e.HasWork());
  EXPECT_EQ(e.Stats().cancelled, 2u);
}

TEST(Engine, StepTimeGrowsWithKvBytesAndSmallerFormatsReadLess) {
  EngineOptions fp16 = Small(1000, 16);
  fp16.shape = {32, 8, 128};
  fp16.format = kv::ParseKvFormat("fp16").value();
  EngineOptions int4 = fp16;
  int4.format = kv::ParseKvFormat("int4").value();
  Engine a(fp16), b(int4);
  for (int i = 0; i < 8; ++i) {
    ASSERT_THAT(a.Submit({.prompt = Prompt(1000, i * 2000), .max_tokens = 5}), IsOk());
    ASSERT_THAT(b.Submit({.prompt = Prompt(1000, i * 2000), .max_tokens = 5}), IsOk());
  }
  a.Step();
  b.Step();
  StepResult ra = a.Step(), rb = b.Step();  // decode steps over 8 x 1001 tokens
  ASSERT_EQ(ra.decode_batch, 8);
  EXPECT_NEAR(ra.kv_bytes_read / rb.kv_bytes_read, 16.0 / 4.5, 1e-9);
  EXPECT_GT(ra.seconds, rb.seconds);
}

TEST(TimeModel, InterpolatesAndReadsFiles) {
  auto tm = TimeModel::Parse(
      "prefill: [[100, 10], [200, 30]]\ndecode: [[1, 5], [10, 14]]\nkv_read_gbps: 1\n"
      "step_overhead_ms: 1\n",
      "t.yaml");
  ASSERT_THAT(tm, IsOk());
  EXPECT_NEAR(tm->StepSeconds({.prefill_tokens = 150}), (1 + 20) / 1e3, 1e-12);
  EXPECT_NEAR(tm->StepSeconds({.prefill_tokens = 300}), (1 + 50) / 1e3, 1e-12);
  EXPECT_NEAR(tm->StepSeconds({.decode_batch = 4, .kv_bytes_read = 1e6}), (1 + 8 + 1) / 1e3, 1e-12);
  EXPECT_EQ(tm->StepSeconds({}), 0);
  EXPECT_THAT(TimeModel::Parse("prefill: [[2, 1], [1, 2]]\ndecode: [[1, 1]]\n", "bad.yaml"),
              HasCode(ErrorCode::kInvalidArgument, ::testing::HasSubstr("bad.yaml:1")));
  EXPECT_THAT(TimeModel::Parse("decode: [[1, 1]]\n", "x.yaml"),
              HasCode(ErrorCode::kInvalidArgument, ::testing::HasSubstr("prefill")));
}

TEST(TimeModel, TheExampleFileIsTheBuiltInDefault) {
  auto tm = TimeModel::LoadFile(::anxin::testing::SourcePath("examples/serve/time-model.yaml"));
  ASSERT_THAT(tm, IsOk());
  const TimeModel d = TimeModel::Default();
  EXPECT_EQ(tm->prefill_ms, d.prefill_ms);
  EXPECT_EQ(tm->decode_ms, d.decode_ms);
  EXPECT_EQ(tm->kv_read_gbps, d.kv_read_gbps);
  EXPECT_EQ(tm->step_overhead_ms, d.step_overhead_ms);
}

TEST(SimText, TokenizesDeterministically) {
  EXPECT_EQ(SimTokenize("Hello, world").size(), 5u);  // Hell o , worl d
  EXPECT_EQ(SimTokenize("a b  c").size(), 3u);
  EXPECT_EQ(SimTokenize("abc"), SimTokenize("abc"));
  EXPECT_NE(SimTokenize("abc"), SimTokenize("abd"));
  EXPECT_TRUE(SimTokenize("   ").empty());
}

}  // namespace
}  // namespace anxin::serve::sim
