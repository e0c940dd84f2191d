#include "anxin/loadgen/arrivals.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace anxin::loadgen {

std::string ArrivalSpec::ToString() const {
  if (kind == kConcurrency) return fmt::format("concurrency {}", concurrency);
  std::string rate_text = std::isinf(rate) ? "all at once" : fmt::format("{:g} req/s", rate);
  std::string s = kind == kConstant ? "constant " + rate_text
                  : kind == kPoisson
                      ? "poisson " + rate_text
                      : fmt::format("gamma {} burstiness {:g}", rate_text, burstiness);
  if (concurrency > 0) s += fmt::format(" (cap {})", concurrency);
  return s;
}

Result<ArrivalSpec::Kind> ParseArrivalKind(std::string_view name) {
  if (name == "constant") return ArrivalSpec::kConstant;
  if (name == "poisson") return ArrivalSpec::kPoisson;
  if (name == "gamma") return ArrivalSpec::kGamma;
  return InvalidArgument(
      fmt::format("unknown arrival process '{}': use poisson, gamma or constant", name));
}

std::vector<double> ArrivalOffsets(const ArrivalSpec& spec, int64_t n, uint64_t seed) {
  std::vector<double> out;
  if (!spec.open_loop() || n <= 0) return out;
  out.reserve(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  double t = 0;
  bool at_once = std::isinf(spec.rate) || spec.rate <= 0;
  double shape = spec.kind == ArrivalSpec::kPoisson ? 1.0 : spec.burstiness;
  std::gamma_distribution<double> gap(shape > 0 ? shape : 1.0,
                                      at_once ? 1.0 : 1.0 / (spec.rate * (shape > 0 ? shape : 1)));
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(t);
    if (at_once) continue;
    t += spec.kind == ArrivalSpec::kConstant ? 1.0 / spec.rate : gap(rng);
  }
  return out;
}

}  // namespace anxin::loadgen
