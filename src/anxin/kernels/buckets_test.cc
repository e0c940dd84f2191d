#include "anxin/kernels/buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "anxin/base/testing.h"

namespace anxin::kernels {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(ParseLengths, ReadsNumbersCsvAndJsonLines) {
  auto n = ParseLengths("700\n\n# comment\n1200\r\n700\n", "a.txt");
  ASSERT_THAT(n, IsOk());
  EXPECT_EQ(n->format, "numbers");
  EXPECT_EQ(n->lengths, (std::vector<int64_t>{700, 1200}));
  EXPECT_EQ(n->counts, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(n->tokens, 2600u);

  auto c = ParseLengths("length,count\n512,10\n128,3\n512,1\n", "h.csv");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->format, "csv");
  EXPECT_EQ(c->lengths, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(c->counts, (std::vector<uint64_t>{3, 11}));

  auto j = ParseLengths("{\"length\": 9}\n{\"input_ids\": [1, 2, 3]}\n{\"num_tokens\": 9.0}\n",
                        "d.jsonl");
  ASSERT_THAT(j, IsOk());
  EXPECT_EQ(j->format, "jsonl");
  EXPECT_EQ(j->lengths, (std::vector<int64_t>{3, 9}));
  EXPECT_EQ(j->counts, (std::vector<uint64_t>{1, 2}));
}

TEST(ParseLengths, BadInputNamesTheLine) {
  EXPECT_THAT(ParseLengths("", "e.txt"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("e.txt")));
  EXPECT_THAT(ParseLengths("\n# only a comment\n", "e.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no lengths")));
  EXPECT_THAT(ParseLengths("5\n-3\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:2: '-3' is negative")));
  EXPECT_THAT(ParseLengths("5\n6\nabc\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:3: 'abc' is not a number")));
  EXPECT_THAT(ParseLengths("5\n1.5\n", "n.txt"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("n.txt:2")));
  EXPECT_THAT(ParseLengths("1,2\n3,x\n", "h.csv"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("h.csv:2: count")));
  EXPECT_THAT(ParseLengths("1,2,3\n", "h.csv"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("h.csv:1: 3 fields")));
  EXPECT_THAT(ParseLengths("{\"length\": 3}\n{\"text\": \"hi\"}\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:2: no length field")));
  EXPECT_THAT(ParseLengths("{\"length\": -1}\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:1")));
  EXPECT_THAT(ParseLengths("{\"length\": 3\n", "d.jsonl"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("d.jsonl:1: not valid JSON")));
}

TEST(PlanBuckets, SmallExampleByHand) {
  auto h = ParseLengths("700\n1200\n3900\n", "l.txt");
  ASSERT_THAT(h, IsOk());
  BucketPlanOptions opts;
  opts.max_buckets = 2;
  auto plan = PlanBuckets(*h, opts);
  ASSERT_THAT(plan, IsOk());
  const BucketScheme& best = plan->schemes.back();
  EXPECT_EQ(best.name, "optimum");
  // {700, 1200} -> 1280 (580 + 80), {3900} -> 3968 (68).
  EXPECT_EQ(best.boundaries, (std::vector<int64_t>{1280, 3968}));
  EXPECT_EQ(best.padded_tokens, 728u);
  EXPECT_EQ(best.compiles, 2u);
  EXPECT_EQ(plan->distinct_lengths, 3u);
  // Hand-picked 4K/8K/16K: everything in 4096, one compile.
  EXPECT_EQ(plan->schemes[0].boundaries, (std::vector<int64_t>{4096, 8192, 16384}));
  EXPECT_EQ(plan->schemes[0].padded_tokens, 3 * 4096u - 5800u);
  EXPECT_EQ(plan->schemes[0].compiles, 1u);
  // Powers of two from 128: 1024, 2048, 4096 hold one each.
  EXPECT_EQ(plan->schemes[1].boundaries, (std::vector<int64_t>{1024, 2048, 4096}));
  EXPECT_EQ(plan->padding_by_k, (std::vector<uint64_t>{3 * 3968u - 5800u, 728u}));
}

TEST(PlanBuckets, MatchesBruteForceOnRandomHistograms) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 40);
    std::vector<int64_t> lengths;
    for (int i = 0; i < n; ++i) {
      int reps = 1 + static_cast<int>(rng() % 5);
      int64_t len = static_cast<int64_t>(rng() % 5000);
      for (int r = 0; r < reps; ++r) lengths.push_back(len);
    }
    LengthHistogram h = HistogramOf(lengths);
    BucketPlanOptions opts;
    opts.max_buckets = 1 + static_cast<int>(rng() % 8);
    opts.align = trial % 3 == 0 ? 1 : 64;
    auto plan = PlanBuckets(h, opts);
    ASSERT_THAT(plan, IsOk());
    // The same aligned groups the planner uses.
    std::vector<int64_t> aligned;
    std::vector<uint64_t> counts, real;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      int64_t a = std::max<int64_t>(h.lengths[i], 1);
      a = (a + opts.align - 1) / opts.align * opts.align;
      if (!aligned.empty() && aligned.back() == a) {
        counts.back() += h.counts[i];
        real.back() += h.counts[i] * h.lengths[i];
      } else {
        aligned.push_back(a);
        counts.push_back(h.counts[i]);
        real.push_back(h.counts[i] * h.lengths[i]);
      }
    }
    for (int k = 1; k <= static_cast<int>(plan->padding_by_k.size()); ++k) {
      EXPECT_EQ(plan->padding_by_k[k - 1], internal::BruteForcePadding(aligned, counts, real, k))
          << "trial " << trial << " k " << k;
    }
    // The boundaries it returns achieve the padding it claims, and cover all.
    const BucketScheme& best = plan->schemes.back();
    EXPECT_EQ(best.padded_tokens, plan->padding_by_k.back()) << "trial " << trial;
    EXPECT_EQ(best.over_limit, 0u);
    EXPECT_LE(best.boundaries.size(), static_cast<size_t>(opts.max_buckets));
  }
}

TEST(PlanBuckets, CostModelTradesCompilesForPadding) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 1000; ++i) lengths.push_back(100 + (i % 50) * 100);
  LengthHistogram h = HistogramOf(lengths);
  BucketPlanOptions opts;
  opts.max_buckets = 50;
  opts.align = 1;
  auto free_compiles = PlanBuckets(h, opts);
  ASSERT_THAT(free_compiles, IsOk());
  EXPECT_EQ(free_compiles->schemes.back().compiles, 50u);
  EXPECT_EQ(free_compiles->schemes.back().padded_tokens, 0u);
  // Each compile costs as much as 10^6 padded tokens: far fewer buckets.
  opts.cost = CostModel{10, 100000};
  auto costly = PlanBuckets(h, opts);
  ASSERT_THAT(costly, IsOk());
  const BucketScheme& best = costly->schemes.back();
  EXPECT_LT(best.compiles, 10u);
  EXPECT_GT(best.compiles, 1u);
  double cost = best.cost_tokens;
  for (size_t k = 1; k <= costly->padding_by_k.size(); ++k)
    EXPECT_LE(cost, static_cast<double>(costly->padding_by_k[k - 1]) + 1e6 * k);
}

TEST(PlanBuckets, TruncateCutsLongSequencesFirst) {
  LengthHistogram h = HistogramOf(std::vector<int64_t>{100, 200, 5000, 9000, 9000});
  BucketPlanOptions opts;
  opts.max_buckets = 2;
  opts.align = 1;
  opts.truncate = 4096;
  auto plan = PlanBuckets(h, opts);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->truncated, 3u);
  EXPECT_EQ(plan->max_length, 4096);
  EXPECT_EQ(plan->tokens, 300u + 3 * 4096u);
  EXPECT_EQ(plan->schemes.back().boundaries, (std::vector<int64_t>{200, 4096}));
  EXPECT_EQ(plan->schemes.back().padded_tokens, 100u);
  opts.truncate = -1;
  EXPECT_THAT(PlanBuckets(h, opts), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--truncate")));
}

TEST(PlanBuckets, RejectsBadOptions) {
  LengthHistogram h = HistogramOf(std::vector<int64_t>{5, 6});
  BucketPlanOptions opts;
  opts.max_buckets = 0;
  EXPECT_THAT(PlanBuckets(h, opts),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--max-buckets")));
  opts.max_buckets = 2;
  opts.align = 0;
  EXPECT_THAT(PlanBuckets(h, opts), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--align")));
  EXPECT_THAT(ParseCostModel("compile=40"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseCostModel("compile=40,throughput=x"), HasCode(ErrorCode::kInvalidArgument));
  auto m = ParseCostModel("compile=40, throughput=50000");
  ASSERT_THAT(m, IsOk());
  EXPECT_DOUBLE_EQ(m->TokensPerCompile(), 2e6);
}

}  // namespace
}  // namespace anxin::kernels
