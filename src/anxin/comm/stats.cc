#include "anxin/comm/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace anxin::comm {

double Percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  if (index >= sorted.size()) index = sorted.size() - 1;
  return sorted[index];
}

double Mean(std::span<const double> values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

namespace {

std::string RankName(int rank, const std::vector<std::string>& hosts) {
  if (rank >= 0 && static_cast<size_t>(rank) < hosts.size() && !hosts[rank].empty()) {
    return fmt::format("rank {} ({})", rank, hosts[rank]);
  }
  return fmt::format("rank {}", rank);
}

}  // namespace

SkewReport AnalyzeSkew(std::span<const double> arrivals, int ranks,
                       const std::vector<std::string>& hosts, const SkewOptions& options) {
  SkewReport report;
  if (ranks <= 0) return report;
  const size_t n = static_cast<size_t>(ranks);
  const size_t collectives = arrivals.size() / n;
  report.collectives = collectives;
  std::vector<std::vector<double>> late(n);
  std::vector<uint64_t> last_count(n, 0);
  for (size_t k = 0; k < collectives; ++k) {
    std::span<const double> row = arrivals.subspan(k * n, n);
    const double first = *std::min_element(row.begin(), row.end());
    const size_t last = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
    ++last_count[last];
    for (size_t r = 0; r < n; ++r) late[r].push_back(row[r] - first);
  }
  for (size_t r = 0; r < n; ++r) {
    RankSkew k;
    k.rank = static_cast<int>(r);
    if (r < hosts.size()) k.host = hosts[r];
    k.median_late_us = Percentile(late[r], 50);
    k.p99_late_us = Percentile(late[r], 99);
    k.last_share = collectives ? static_cast<double>(last_count[r]) / collectives : 0;
    report.ranks.push_back(std::move(k));
  }
  if (collectives == 0 || n < 2) {
    report.why = "too few ranks or collectives to compare arrivals";
    return report;
  }
  std::vector<const RankSkew*> by_late;
  for (const RankSkew& k : report.ranks) by_late.push_back(&k);
  std::sort(by_late.begin(), by_late.end(), [](const RankSkew* a, const RankSkew* b) {
    return a->median_late_us > b->median_late_us;
  });
  const RankSkew& top = *by_late[0];
  const RankSkew& next = *by_late[1];
  const double floor_us = std::max(next.median_late_us, 1.0);
  const std::string name = RankName(top.rank, hosts);
  if (top.median_late_us >= options.min_late_us && top.median_late_us >= options.ratio * floor_us &&
      top.last_share >= options.min_last_share) {
    report.slow_rank = top.rank;
    report.why = fmt::format(
        "{} entered last at {:.0f}% of {} collectives, a median {:.1f} us after the first rank "
        "(p99 {:.1f} us); the next latest rank's median is {:.1f} us",
        name, top.last_share * 100, collectives, top.median_late_us, top.p99_late_us,
        next.median_late_us);
  } else {
    report.why = fmt::format(
        "the latest, {}, has a median lateness of {:.1f} us and entered "
        "last at {:.0f}% of {} collectives (named from {:.0f} us, {:.0f}x the next rank's "
        "{:.1f} us, and {:.0f}% of collectives)",
        name, top.median_late_us, top.last_share * 100, collectives, options.min_late_us,
        options.ratio, next.median_late_us, options.min_last_share * 100);
  }
  return report;
}

void AnalyzeMatrix(MatrixReport& m, const MatrixOptions& options) {
  const int n = m.ranks;
  const size_t cells = static_cast<size_t>(n) * static_cast<size_t>(n);
  m.bw_outlier.assign(cells, false);
  m.lat_outlier.assign(cells, false);
  m.slow_ranks.clear();
  if (n < 2 || m.bw_gbs.size() != cells || m.lat_us.size() != cells) {
    m.why = "too few ranks for a matrix";
    return;
  }
  std::vector<double> bws, lats;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      bws.push_back(m.bw_gbs[i * n + j]);
      if (i < j) lats.push_back(m.lat_us[i * n + j]);
    }
  }
  const double bw_median = Percentile(bws, 50);
  const double lat_median = Percentile(lats, 50);
  // With two ranks the median is one of the two directions; their mean is
  // the fair middle.
  const double bw_mid = n == 2 ? Mean(bws) : bw_median;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const size_t c = static_cast<size_t>(i * n + j);
      m.bw_outlier[c] = m.bw_gbs[c] < bw_mid * options.bw_fraction;
      const double lat = m.lat_us[c];
      m.lat_outlier[c] = n > 2 && lat > lat_median * options.lat_multiple &&
                         lat > lat_median + options.min_lat_excess_us;
    }
  }
  auto bad_with = [&](int r, int p) {
    return m.bw_outlier[r * n + p] || m.bw_outlier[p * n + r] || m.lat_outlier[r * n + p];
  };
  auto out_bad = [&](int r) {
    for (int p = 0; p < n; ++p)
      if (p != r && !m.bw_outlier[r * n + p]) return false;
    return true;
  };
  std::vector<int> candidates;
  for (int r = 0; r < n; ++r) {
    bool all = true;
    for (int p = 0; p < n && all; ++p)
      if (p != r && !bad_with(r, p)) all = false;
    if (all) candidates.push_back(r);
  }
  if (n == 2 && candidates.size() == 2) {
    // One link: only its direction can tell the ends apart.
    const bool out0 = out_bad(0), out1 = out_bad(1);
    candidates.clear();
    if (out0 != out1) candidates.push_back(out0 ? 0 : 1);
  }
  if (candidates.size() * 2 > static_cast<size_t>(n) && n > 2) candidates.clear();
  m.slow_ranks = candidates;
  int flagged = 0;
  for (size_t c = 0; c < cells; ++c)
    flagged += (m.bw_outlier[c] ? 1 : 0) + (m.lat_outlier[c] ? 1 : 0);
  if (!m.slow_ranks.empty()) {
    std::string names;
    for (int r : m.slow_ranks) names += (names.empty() ? "" : ", ") + std::to_string(r);
    m.why = fmt::format(
        "rank {} is an outlier with every peer (median link {:.2f} GB/s, median latency "
        "{:.1f} us; outliers below {:.0f}% of the median bandwidth or above {:.1f}x the median "
        "latency)",
        names, bw_median, lat_median, options.bw_fraction * 100, options.lat_multiple);
  } else if (flagged > 0) {
    m.why = fmt::format(
        "{} outlier entries, but no single rank is an outlier with every peer{}", flagged,
        n == 2 ? " (with two ranks a slow link cannot be pinned on one end unless only one "
                 "direction is slow)"
               : "");
  } else {
    m.why = fmt::format("no outliers (median link {:.2f} GB/s, median latency {:.1f} us)",
                        bw_median, lat_median);
  }
}

std::vector<std::vector<std::pair<int, int>>> PairRounds(int ranks) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (ranks < 2) return rounds;
  // Circle method: with an odd count, a dummy rank sits out one rank per round.
  const int m = ranks % 2 == 0 ? ranks : ranks + 1;
  std::vector<int> ring(m);
  std::iota(ring.begin(), ring.end(), 0);
  for (int round = 0; round < m - 1; ++round) {
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < m / 2; ++i) {
      int a = ring[i], b = ring[m - 1 - i];
      if (a >= ranks || b >= ranks) continue;
      pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(std::move(pairs));
    // Keep ring[0] fixed, rotate the rest by one.
    std::rotate(ring.begin() + 1, ring.end() - 1, ring.end());
  }
  return rounds;
}

void FindCrossovers(SweepReport& sweep) {
  sweep.best.clear();
  sweep.crossovers.clear();
  if (sweep.runs.empty()) return;
  const size_t sizes = sweep.runs[0].rows.size();
  for (size_t i = 0; i < sizes; ++i) {
    double best_time = 0;
    std::string best;
    for (size_t a = 0; a < sweep.runs.size(); ++a) {
      const CommRun& run = sweep.runs[a];
      if (i >= run.rows.size()) continue;
      const Row& row = run.rows[i];
      const auto& s = row.out_of_place ? row.out_of_place : row.in_place;
      if (!s) continue;
      if (best.empty() || s->time_us < best_time) {
        best_time = s->time_us;
        best = a < sweep.algos.size() ? sweep.algos[a] : run.algo;
      }
    }
    if (!sweep.best.empty() && !best.empty() && best != sweep.best.back()) {
      sweep.crossovers.push_back({sweep.runs[0].rows[i].bytes, sweep.best.back(), best});
    }
    sweep.best.push_back(best);
  }
}

void SummarizeSoak(SoakSize& size) {
  const auto& p = size.pass_us;
  if (p.empty()) return;
  size.first_us = p.front();
  size.last_us = p.back();
  const size_t quarter = std::max<size_t>(1, p.size() / 4);
  const double head = Mean(std::span<const double>(p.data(), quarter));
  const double tail = Mean(std::span<const double>(p.data() + p.size() - quarter, quarter));
  size.drift_pct = head > 0 ? (tail - head) / head * 100.0 : 0;
}

}  // namespace anxin::comm
