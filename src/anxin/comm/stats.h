// The analyses behind `anxin bench comm`'s verdicts, as pure functions over
// measured numbers so that each rule is tested on hand-made cases: time
// percentiles, the slow-rank finding from arrival skew, outliers of the
// pairwise link matrix, algorithm crossovers and soak drift.
//
//   std::vector<double> times = {120.5, 118.0, 131.2, 119.4};  // us
//   double p99 = Percentile(times, 99);
//   // arrivals[k * ranks + r]: when rank r entered collective k (us, aligned clocks)
//   int ranks = 2;
//   std::vector<std::string> hosts = {"node-a", "node-a"};
//   std::vector<double> arrivals = {0, 450, 1000, 1480};
//   SkewReport skew = AnalyzeSkew(arrivals, ranks, hosts, {.min_late_us = 100});
//   if (skew.slow_rank) std::printf("%s\n", skew.why.c_str());
//
// Thread safety: pure functions.
#ifndef ANXIN_COMM_STATS_H_
#define ANXIN_COMM_STATS_H_

#include <span>
#include <string>
#include <vector>

#include "anxin/comm/model.h"

namespace anxin::comm {

// The p-th percentile (0..100) by the nearest-rank method; 0 for no values.
double Percentile(std::span<const double> values, double p);
double Mean(std::span<const double> values);

struct SkewOptions {
  // A rank is named only when its median lateness is at least this (us) ...
  double min_late_us = 100;
  // ... and at least this many times the next latest rank's median lateness
  // (with a floor of 1 us, so that a quiet rank 0 us late does not divide).
  double ratio = 3;
  // ... and it entered last at least this share of the collectives.
  double min_last_share = 0.5;
};

// arrivals[k * ranks + r] is when rank r entered the k-th timed collective,
// on clocks aligned to rank 0 (us). hosts may be empty or hold one name per rank.
SkewReport AnalyzeSkew(std::span<const double> arrivals, int ranks,
                       const std::vector<std::string>& hosts, const SkewOptions& options = {});

struct MatrixOptions {
  // A link's bandwidth is an outlier below this fraction of the median link.
  double bw_fraction = 0.5;
  // A pair's latency is an outlier above this multiple of the median pair
  // and at least min_lat_excess_us above it.
  double lat_multiple = 2.0;
  double min_lat_excess_us = 2.0;
};

// Fills bw_outlier, lat_outlier, slow_ranks and why from bw_gbs and lat_us
// (ranks x ranks, the diagonal ignored).
void AnalyzeMatrix(MatrixReport& m, const MatrixOptions& options = {});

// Pairs of ranks in rounds so that each rank is in at most one pair per round
// (the circle method): n-1 rounds for even n, n for odd n; every unordered
// pair exactly once.
std::vector<std::vector<std::pair<int, int>>> PairRounds(int ranks);

// Fills best and crossovers from runs (one per algorithm, same sizes).
void FindCrossovers(SweepReport& sweep);

// Fills first_us, last_us and drift_pct from pass_us.
void SummarizeSoak(SoakSize& size);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_STATS_H_
