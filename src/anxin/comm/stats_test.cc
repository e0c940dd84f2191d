// The analyses on hand-made numbers: percentiles, the slow-rank rule, matrix
// outliers, pair rounds, crossovers and soak drift.
#include "anxin/comm/stats.h"

#include <gtest/gtest.h>

#include <set>

#include "anxin/base/testing.h"
#include "anxin/comm/format.h"

namespace anxin::comm {
namespace {

using ::testing::HasSubstr;

TEST(Percentile, NearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(Percentile(v, 50), 3);
  EXPECT_EQ(Percentile(v, 99), 5);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(std::vector<double>{}, 50), 0);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 99), 99);
  EXPECT_EQ(Mean(hundred), 50.5);
}

// Four ranks, rank 2 arrives `late` us after the others, which arrive with
// small jitter.
std::vector<double> Arrivals(int collectives, double late, int slow = 2) {
  std::vector<double> a;
  for (int k = 0; k < collectives; ++k) {
    const double base = k * 1000.0;
    for (int r = 0; r < 4; ++r) a.push_back(base + (r == slow ? late : (k + r) % 3));
  }
  return a;
}

TEST(Skew, NamesTheRankThatIsAlwaysLate) {
  SkewReport s = AnalyzeSkew(Arrivals(50, 500), 4, {"h0", "h1", "h2", "h3"});
  EXPECT_EQ(s.collectives, 50u);
  ASSERT_TRUE(s.slow_rank);
  EXPECT_EQ(*s.slow_rank, 2);
  EXPECT_DOUBLE_EQ(s.ranks[2].last_share, 1.0);
  EXPECT_NEAR(s.ranks[2].median_late_us, 500, 1);
  EXPECT_THAT(s.why, HasSubstr("rank 2 (h2) entered last at 100% of 50 collectives"));
  EXPECT_THAT(FormatSkew(s), HasSubstr("<- slow"));
}

TEST(Skew, QuietRunsNameNobody) {
  SkewReport s = AnalyzeSkew(Arrivals(50, 1), 4, {});
  EXPECT_FALSE(s.slow_rank);
  EXPECT_THAT(s.why, HasSubstr("the latest, rank"));
  EXPECT_THAT(FormatSkew(s), HasSubstr("# Slow rank: none; the latest"));
  // Late but under the threshold.
  EXPECT_FALSE(AnalyzeSkew(Arrivals(50, 50), 4, {}).slow_rank);
  EXPECT_TRUE(AnalyzeSkew(Arrivals(50, 50), 4, {}, {.min_late_us = 20}).slow_rank);
}

TEST(Skew, TwoEquallyLateRanksAreNotOne) {
  // A root that races ahead makes every other rank look late alike.
  std::vector<double> a;
  for (int k = 0; k < 40; ++k) {
    a.push_back(k * 1000.0);
    for (int r = 1; r < 4; ++r) a.push_back(k * 1000.0 + 400 + r);
  }
  EXPECT_FALSE(AnalyzeSkew(a, 4, {}).slow_rank);
}

MatrixReport Matrix(int n, int slow, bool both_ways) {
  MatrixReport m;
  m.ranks = n;
  m.bw_gbs.assign(n * n, 10.0);
  m.lat_us.assign(n * n, 2.0);
  for (int p = 0; p < n && slow >= 0; ++p) {
    if (p == slow) continue;
    m.bw_gbs[slow * n + p] = 1.0;  // slow rank sends slowly
    if (both_ways) m.bw_gbs[p * n + slow] = 1.0;
    m.lat_us[slow * n + p] = m.lat_us[p * n + slow] = 50.0;
  }
  return m;
}

TEST(Matrix, NamesTheSlowRank) {
  MatrixReport m = Matrix(4, 1, false);
  AnalyzeMatrix(m);
  EXPECT_EQ(m.slow_ranks, std::vector<int>{1});
  EXPECT_TRUE(m.bw_outlier[1 * 4 + 0]);
  EXPECT_FALSE(m.bw_outlier[0 * 4 + 1]);
  EXPECT_TRUE(m.lat_outlier[0 * 4 + 1]);
  EXPECT_FALSE(m.lat_outlier[0 * 4 + 2]);
  EXPECT_THAT(m.why, HasSubstr("rank 1 is an outlier with every peer"));
  const std::string text = FormatMatrix(m, {});
  EXPECT_THAT(text, HasSubstr("1.00*"));
}

TEST(Matrix, TwoRanksByDirection) {
  MatrixReport one_way = Matrix(2, 1, false);
  AnalyzeMatrix(one_way);
  EXPECT_EQ(one_way.slow_ranks, std::vector<int>{1});
  MatrixReport both = Matrix(2, 1, true);
  AnalyzeMatrix(both);
  EXPECT_TRUE(both.slow_ranks.empty());
  MatrixReport even = Matrix(4, -1, false);
  AnalyzeMatrix(even);
  EXPECT_TRUE(even.slow_ranks.empty());
  EXPECT_THAT(even.why, HasSubstr("no outliers"));
}

TEST(PairRounds, EveryPairOnceAndNobodyTwiceInARound) {
  for (int n : {2, 3, 4, 5, 8, 9}) {
    auto rounds = PairRounds(n);
    EXPECT_EQ(rounds.size(), static_cast<size_t>(n % 2 == 0 ? n - 1 : n)) << n;
    std::set<std::pair<int, int>> pairs;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (auto [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second) << n;
        EXPECT_TRUE(busy.insert(b).second) << n;
        EXPECT_TRUE(pairs.insert({a, b}).second) << n;
      }
    }
    EXPECT_EQ(pairs.size(), static_cast<size_t>(n * (n - 1) / 2)) << n;
  }
}

TEST(Sweep, CrossoversWhereTheFastestChanges) {
  SweepReport s;
  s.algos = {"recursive_doubling", "ring"};
  for (int a = 0; a < 2; ++a) {
    CommRun run;
    run.algo = s.algos[a];
    for (int i = 0; i < 4; ++i) {
      Row r;
      r.bytes = 1024ull << (4 * i);
      Sample smp;
      // recursive doubling wins small sizes, ring large ones.
      smp.time_us = a == 0 ? 10.0 * (1 << (2 * i)) : 30.0 * (1 << i);
      r.out_of_place = smp;
      run.rows.push_back(r);
    }
    s.runs.push_back(run);
  }
  FindCrossovers(s);
  EXPECT_EQ(s.best,
            (std::vector<std::string>{"recursive_doubling", "recursive_doubling", "ring", "ring"}));
  ASSERT_EQ(s.crossovers.size(), 1u);
  EXPECT_EQ(s.crossovers[0].bytes, 1024ull << 8);
  EXPECT_EQ(s.crossovers[0].to, "ring");
  EXPECT_THAT(FormatSweep(s), HasSubstr("Crossover at 262144 (256 KiB): ring overtakes "
                                        "recursive_doubling"));
}

TEST(Soak, DriftComparesTheLastQuarterWithTheFirst) {
  SoakSize s;
  s.pass_us = {100, 100, 100, 100, 110, 110, 120, 120};
  SummarizeSoak(s);
  EXPECT_EQ(s.first_us, 100);
  EXPECT_EQ(s.last_us, 120);
  EXPECT_DOUBLE_EQ(s.drift_pct, 20.0);
}

}  // namespace
}  // namespace anxin::comm
