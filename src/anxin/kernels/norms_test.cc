// The drift a float16 training run saw in LayerNorm and softmax, reproduced
// with emulated half-precision arithmetic, and its fix (float32 accumulation,
// Welford, max-subtracted softmax) measured against float64.
#include "anxin/kernels/norms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "anxin/compare/dtype.h"
#include "anxin/kernels/rounding.h"

namespace anxin::kernels {
namespace {

std::vector<double> LayerNormF64(const std::vector<float>& x, double eps) {
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (float v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  std::vector<double> out;
  for (float v : x) out.push_back((v - mean) / std::sqrt(var + eps));
  return out;
}

std::vector<double> SoftmaxF64(const std::vector<float>& x) {
  double mx = -INFINITY, sum = 0;
  for (float v : x) mx = std::max<double>(mx, v);
  std::vector<double> out;
  for (float v : x) out.push_back(std::exp(v - mx));
  for (double v : out) sum += v;
  for (double& v : out) v /= sum;
  return out;
}

// Largest |out - ref| / max(|ref|, floor); infinity when out has a NaN or Inf.
double MaxRelErr(const std::vector<float>& out, const std::vector<double>& ref, double floor) {
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    worst = std::max(worst, std::fabs(out[i] - ref[i]) / std::max(std::fabs(ref[i]), floor));
  }
  return worst;
}

// Activations of a layer with a large common offset (mean 24, std 1) over a
// 4096-wide hidden dimension, already rounded to the format.
std::vector<float> OffsetActivations(Half format, size_t n, float offset, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(offset, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = RoundTo(format, d(rng));
  return x;
}

TEST(Rounding, AgreesWithCompareDecoders) {
  // Every float16 value survives decode -> encode; the decoders agree with compare's.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t h = static_cast<uint16_t>(b);
    double want = compare::HalfToDouble(h);
    float got = HalfBitsToFloat(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
    ASSERT_EQ(FloatToHalfBits(got), h) << std::hex << b;
    ASSERT_EQ(static_cast<double>(BFloat16BitsToFloat(h)), compare::BFloat16ToDouble(h));
  }
  // Ties to even, overflow, subnormals.
  EXPECT_EQ(FloatToHalfBits(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even (down)
  EXPECT_EQ(FloatToHalfBits(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(RoundToBFloat16(1.0f + 1.0f / 512), 1.0f);
}

TEST(LayerNormDrift, NaiveFloat16OverflowsAndWelfordFixesIt) {
  std::vector<float> x = OffsetActivations(Half::kFloat16, 4096, 24.0f, 1);
  std::vector<double> ref = LayerNormF64(x, 1e-5);
  std::vector<float> naive(x.size()), careful(x.size());
  LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kNaive, naive);
  LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kCareful, careful);
  // sum(x) = 98,304 > 65,504: the float16 accumulator overflows.
  EXPECT_EQ(MaxRelErr(naive, ref, 0.1), INFINITY);
  // Welford in float32: only the float16 store rounds (2^-11 relative).
  EXPECT_LT(MaxRelErr(careful, ref, 0.1), 1e-2);
}

TEST(LayerNormDrift, NaiveVarianceCancelsWithoutOverflow) {
  // A smaller offset that does not overflow: E[x^2] - E[x]^2 in float16
  // still loses the variance to cancellation (and stagnation of the sums).
  std::vector<float> x = OffsetActivations(Half::kFloat16, 1024, 8.0f, 2);
  std::vector<double> ref = LayerNormF64(x, 1e-5);
  std::vector<float> naive(x.size()), careful(x.size());
  LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kNaive, naive);
  LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kCareful, careful);
  EXPECT_GT(MaxRelErr(naive, ref, 0.1), 0.2);
  EXPECT_LT(MaxRelErr(careful, ref, 0.1), 1e-2);
  // bfloat16 has float32's range, so no overflow, but 8 bits of mantissa
  // make the naive form's sums worse still.
  std::vector<float> xb = OffsetActivations(Half::kBFloat16, 1024, 8.0f, 2);
  std::vector<double> refb = LayerNormF64(xb, 1e-5);
  LayerNorm(xb, {}, {}, 1e-5f, Half::kBFloat16, NormForm::kNaive, naive);
  LayerNorm(xb, {}, {}, 1e-5f, Half::kBFloat16, NormForm::kCareful, careful);
  EXPECT_GT(MaxRelErr(naive, refb, 0.1), 0.2);
  EXPECT_LT(MaxRelErr(careful, refb, 0.1), 2e-2);
}

TEST(SoftmaxDrift, NaiveFloat16OverflowsAndStagnates) {
  // Logits above ~11.1: exp overflows float16 -> inf / inf = NaN.
  std::vector<float> big = {12.0f, 3.0f, -1.0f, 0.5f};
  std::vector<float> naive(big.size()), careful(big.size());
  Softmax(big, Half::kFloat16, NormForm::kNaive, naive);
  Softmax(big, Half::kFloat16, NormForm::kCareful, careful);
  EXPECT_EQ(MaxRelErr(naive, SoftmaxF64(big), 1e-6), INFINITY);
  // Relative to 1e-4 at least: smaller float16 probabilities are subnormal.
  EXPECT_LT(MaxRelErr(careful, SoftmaxF64(big), 1e-4), 2e-3);
  // 8192 near-equal logits: the float16 sum stops growing at 4096 (adding
  // ~1 to 4096, whose ULP is 4, rounds back to 4096), so every probability
  // is twice what it should be.
  std::vector<float> flat(8192);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  for (float& v : flat) v = RoundToHalf(u(rng));
  std::vector<float> n2(flat.size()), c2(flat.size());
  Softmax(flat, Half::kFloat16, NormForm::kNaive, n2);
  Softmax(flat, Half::kFloat16, NormForm::kCareful, c2);
  std::vector<double> ref = SoftmaxF64(flat);
  EXPECT_GT(MaxRelErr(n2, ref, 1e-9), 0.9);
  EXPECT_LT(MaxRelErr(c2, ref, 1e-9), 2e-3);
  double sum = 0;
  for (float v : n2) sum += v;
  EXPECT_NEAR(sum, 2.0, 0.05);  // probabilities that add up to 2
}

TEST(RmsNormDrift, NaiveSquaresOverflowFloat16) {
  std::vector<float> x = OffsetActivations(Half::kFloat16, 2048, 300.0f, 4);
  std::vector<float> naive(x.size()), careful(x.size());
  RmsNorm(x, {}, 1e-6f, Half::kFloat16, NormForm::kNaive, naive);
  RmsNorm(x, {}, 1e-6f, Half::kFloat16, NormForm::kCareful, careful);
  double ms = 0;
  for (float v : x) ms += static_cast<double>(v) * v;
  ms /= static_cast<double>(x.size());
  std::vector<double> ref;
  for (float v : x) ref.push_back(v / std::sqrt(ms + 1e-6));
  // 300^2 = 90,000 > 65,504.
  EXPECT_GT(MaxRelErr(naive, ref, 0.1), 0.5);
  EXPECT_LT(MaxRelErr(careful, ref, 0.1), 2e-3);
}

// The fix's third part: an update that bfloat16 weights cannot hold. SGD
// with lr * grad = 1e-4 on weights near 1: a bfloat16 weight never moves (half
// its ULP at 1 is 2^-8 = 0.0039), a float32 master copy moves by 0.1 in
// 1000 steps; bfloat16 gradients are fine (the gradient itself keeps its
// value to 3 digits).
TEST(MasterWeights, Bfloat16WeightsLoseSmallUpdates) {
  float master = 1.0f, bf16_weight = 1.0f;
  const float lr = 1e-3f;
  for (int step = 0; step < 1000; ++step) {
    float grad = RoundToBFloat16(-0.1f);  // bfloat16 gradient
    master -= lr * grad;
    bf16_weight = RoundToBFloat16(bf16_weight - lr * grad);
  }
  EXPECT_NEAR(master, 1.1f, 1e-3f);
  EXPECT_EQ(bf16_weight, 1.0f);
  EXPECT_NEAR(RoundToBFloat16(master), 1.1f, 5e-3f);  // what the forward pass then sees
}

}  // namespace
}  // namespace anxin::kernels
