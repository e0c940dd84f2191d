#include "anxin/serve/sim/sampling.h"

#include <cmath>
#include <map>

#include "anxin/base/testing.h"

namespace anxin::serve::sim {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 3.0f, -1.0f};

TEST(Sampling, GreedyTakesTheLargestLogitLowestIndexOnTies) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(SampleToken(kLogits, {.temperature = 0}, rng), 1);
}

TEST(Sampling, TopKKeepsOnlyTheKMostLikely) {
  auto d = TruncatedDistribution(kLogits, {.top_k = 3});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_EQ(d[1].first, 4);
  EXPECT_EQ(d[2].first, 2);
  const double z = 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(d[0].second, std::exp(3.0) / z, 1e-12);
  EXPECT_NEAR(d[2].second, std::exp(2.0) / z, 1e-12);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // Softmax of kLogits: 0.383, 0.383, 0.141, 0.052, ... -> 0.7 needs two.
  auto d = TruncatedDistribution(kLogits, {.top_p = 0.7f});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0].second, 0.5, 1e-12);
  auto d3 = TruncatedDistribution(kLogits, {.top_p = 0.8f});
  EXPECT_EQ(d3.size(), 3u);
}

TEST(Sampling, TemperatureSharpens) {
  auto hot = TruncatedDistribution(kLogits, {.temperature = 2.0f});
  auto cold = TruncatedDistribution(kLogits, {.temperature = 0.5f});
  EXPECT_LT(hot[0].second, cold[0].second);
}

TEST(Sampling, DrawsFollowTheTruncatedDistribution) {
  const SamplingParams p{.temperature = 1.0f, .top_k = 4, .top_p = 0.95f};
  auto d = TruncatedDistribution(kLogits, p);
  std::mt19937_64 rng(7);
  PreparedSampler prepared(kLogits, p);
  std::map<int, int> direct, fast;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    ++direct[SampleToken(kLogits, p, rng)];
    ++fast[prepared.Draw(rng)];
  }
  for (const auto& [t, pr] : d) {
    EXPECT_NEAR(direct[t] / double(n), pr, 0.005) << t;
    EXPECT_NEAR(fast[t] / double(n), pr, 0.005) << t;
  }
  // Nothing outside the kept set is ever drawn.
  EXPECT_EQ(direct.size(), d.size());
  EXPECT_EQ(fast.size(), d.size());
}

TEST(Sampling, ValidatesParameters) {
  EXPECT_THAT(ValidateSampling({}), IsOk());
  EXPECT_THAT(ValidateSampling({.temperature = -1}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ValidateSampling({.top_p = 0}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ValidateSampling({.top_p = 1.5f}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ValidateSampling({.top_k = -2}), HasCode(ErrorCode::kInvalidArgument));
}

}  // namespace
}  // namespace anxin::serve::sim
