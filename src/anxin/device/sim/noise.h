// Deterministic noise for the simulator: a pure function of (seed, stream,
// time), so the same scenario gives the same readings at the same virtual
// times however often and in whatever order they are read.
//
//   uint64_t seed = 7;
//   int device = 3;
//   double t = 12.5;  // seconds into the scenario
//   double wobble = SmoothNoise(seed, Stream(device, Metric::kTemperature), t, 1.0);  // [-1, 1]
#ifndef ANXIN_DEVICE_SIM_NOISE_H_
#define ANXIN_DEVICE_SIM_NOISE_H_

#include <cmath>
#include <cstdint>

namespace anxin::device::sim {

// splitmix64's finaliser over a combination of the inputs.
inline uint64_t HashBits(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (a + 1) + 0xBF58476D1CE4E5B9ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1].
inline double HashUnit(uint64_t seed, uint64_t stream, int64_t tick) {
  uint64_t bits = HashBits(seed, stream, static_cast<uint64_t>(tick));
  return static_cast<double>(bits >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

// Value noise: random points every `period` seconds joined by a smooth curve,
// so readings wander instead of jumping. In [-1, 1].
inline double SmoothNoise(uint64_t seed, uint64_t stream, double t, double period) {
  double x = t / period;
  double k = std::floor(x);
  double f = x - k;
  double s = f * f * (3 - 2 * f);  // smoothstep
  auto tick = static_cast<int64_t>(k);
  double a = HashUnit(seed, stream, tick);
  double b = HashUnit(seed, stream, tick + 1);
  return a + (b - a) * s;
}

enum class Metric : uint64_t { kTemperature = 1, kPower, kUtilisation, kHbm };
inline uint64_t Stream(int device, Metric m) {
  return static_cast<uint64_t>(device) * 16 + static_cast<uint64_t>(m);
}

}  // namespace anxin::device::sim

#endif  // ANXIN_DEVICE_SIM_NOISE_H_
