#include "anxin/base/half.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

namespace anxin {
namespace {

TEST(Half, EveryHalfSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

__attribute__((target("f16c"))) uint16_t HardwareHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Half, RoundsLikeTheF16cInstruction) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(3);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), HardwareHalf(f)) << f;
  }
}

TEST(Half, DirectedRoundingKeepsTheBound) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f);
  for (int i = 0; i < 100000; ++i) {
    const float f = u(rng) * (i % 3 == 0 ? 1e-6f : 1.0f);
    const float up = HalfToFloat(FloatToHalfAwayFromZero(f));
    const float down = HalfToFloat(FloatToHalfDown(f));
    if (std::fabs(f) <= 65504) {
      EXPECT_GE(std::fabs(up), std::fabs(f)) << f;
    }
    if (f >= -65504) {
      EXPECT_LE(down, f) << f;
    }
  }
}

}  // namespace
}  // namespace anxin
