#include "anxin/serve/sim/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace anxin::serve::sim {

Status ValidateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    return InvalidArgument(
        fmt::format("temperature {} must be a finite number >= 0", p.temperature));
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return InvalidArgument(fmt::format("top_p {} must be in (0, 1]", p.top_p));
  }
  if (p.top_k < -1) {
    return InvalidArgument(fmt::format("top_k {} must be -1 or 0 (no limit) or positive", p.top_k));
  }
  return Ok();
}

std::vector<std::pair<int, double>> TruncatedDistribution(std::span<const float> logits,
                                                          const SamplingParams& p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (p.temperature == 0) {
    int best = *std::min_element(order.begin(), order.end(), more_likely);
    return {{best, 1.0}};
  }
  int keep = (p.top_k > 0 && p.top_k < n) ? p.top_k : n;
  if (keep < n) {
    std::nth_element(order.begin(), order.begin() + keep, order.end(), more_likely);
    order.resize(keep);
  }
  std::sort(order.begin(), order.end(), more_likely);
  const double inv_t = 1.0 / p.temperature;
  const double top = logits[order[0]] * inv_t;
  std::vector<std::pair<int, double>> dist;
  dist.reserve(order.size());
  double sum = 0;
  for (int t : order) {
    const double w = std::exp(logits[t] * inv_t - top);
    dist.emplace_back(t, w);
    sum += w;
  }
  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (p.top_p < 1) {
    double mass = 0;
    size_t cut = dist.size();
    for (size_t i = 0; i < dist.size(); ++i) {
      mass += dist[i].second / sum;
      if (mass >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
    dist.resize(cut);
    sum = 0;
    for (auto& [t, w] : dist) sum += w;
  }
  for (auto& [t, w] : dist) w /= sum;
  return dist;
}

int SampleToken(std::span<const float> logits, const SamplingParams& params, std::mt19937_64& rng) {
  auto dist = TruncatedDistribution(logits, params);
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (const auto& [t, pr] : dist) {
    if (u < pr) return t;
    u -= pr;
  }
  return dist.back().first;
}

PreparedSampler::PreparedSampler(std::span<const float> logits, const SamplingParams& params) {
  auto dist = TruncatedDistribution(logits, params);
  double c = 0;
  for (const auto& [t, pr] : dist) {
    tokens_.push_back(t);
    c += pr;
    cdf_.push_back(c);
  }
  cdf_.back() = 1.0;
}

int PreparedSampler::Draw(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  size_t i = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
  return tokens_[std::min(i, tokens_.size() - 1)];
}

}  // namespace anxin::serve::sim
