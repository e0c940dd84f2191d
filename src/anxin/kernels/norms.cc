#include "anxin/kernels/norms.h"

#include <cmath>

#include "anxin/kernels/rounding.h"

namespace anxin::kernels {

std::string_view HalfName(Half h) { return h == Half::kFloat16 ? "float16" : "bfloat16"; }

float RoundTo(Half format, float v) {
  return format == Half::kFloat16 ? RoundToHalf(v) : RoundToBFloat16(v);
}

void LayerNorm(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
               float eps, Half format, NormForm form, std::span<float> out) {
  const size_t n = x.size();
  auto r = [format](float v) { return RoundTo(format, v); };
  float mean = 0, inv = 0;
  if (form == NormForm::kNaive) {
    // What a float16 kernel with float16 accumulators computes: one pass of
    // sum and sum of squares, variance as E[x^2] - E[x]^2.
    float sum = 0, sumsq = 0;
    for (size_t i = 0; i < n; ++i) {
      sum = r(sum + x[i]);
      sumsq = r(sumsq + r(x[i] * x[i]));
    }
    mean = r(sum / static_cast<float>(n));
    float var = r(r(sumsq / static_cast<float>(n)) - r(mean * mean));
    inv = r(1.0f / r(std::sqrt(r(var + eps))));
    for (size_t i = 0; i < n; ++i) {
      float y = r(r(x[i] - mean) * inv);
      if (!gamma.empty()) y = r(y * gamma[i]);
      if (!beta.empty()) y = r(y + beta[i]);
      out[i] = y;
    }
    return;
  }
  // Welford: a running mean and sum of squared deviations, in float32.
  float m2 = 0;
  for (size_t i = 0; i < n; ++i) {
    float delta = x[i] - mean;
    mean += delta / static_cast<float>(i + 1);
    m2 += delta * (x[i] - mean);
  }
  float var = m2 / static_cast<float>(n);
  inv = 1.0f / std::sqrt(var + eps);
  for (size_t i = 0; i < n; ++i) {
    float y = (x[i] - mean) * inv;
    if (!gamma.empty()) y *= gamma[i];
    if (!beta.empty()) y += beta[i];
    out[i] = r(y);
  }
}

void RmsNorm(std::span<const float> x, std::span<const float> gamma, float eps, Half format,
             NormForm form, std::span<float> out) {
  const size_t n = x.size();
  auto r = [format](float v) { return RoundTo(format, v); };
  if (form == NormForm::kNaive) {
    float sumsq = 0;
    for (size_t i = 0; i < n; ++i) sumsq = r(sumsq + r(x[i] * x[i]));
    float inv = r(1.0f / r(std::sqrt(r(r(sumsq / static_cast<float>(n)) + eps))));
    for (size_t i = 0; i < n; ++i) {
      float y = r(x[i] * inv);
      out[i] = gamma.empty() ? y : r(y * gamma[i]);
    }
    return;
  }
  // The mean of squares of x / max|x| (no overflow or underflow in the
  // squares), accumulated in float32, scaled back once.
  float amax = 0;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  float ms = 0;
  if (amax > 0) {
    for (size_t i = 0; i < n; ++i) {
      float s = x[i] / amax;
      ms += (s * s - ms) / static_cast<float>(i + 1);
    }
  }
  float rms = amax * std::sqrt(ms);
  float inv = 1.0f / std::sqrt(rms * rms + eps);
  for (size_t i = 0; i < n; ++i) {
    float y = x[i] * inv;
    if (!gamma.empty()) y *= gamma[i];
    out[i] = r(y);
  }
}

void Softmax(std::span<const float> x, Half format, NormForm form, std::span<float> out) {
  const size_t n = x.size();
  auto r = [format](float v) { return RoundTo(format, v); };
  if (form == NormForm::kNaive) {
    float sum = 0;
    for (size_t i = 0; i < n; ++i) {
      out[i] = r(std::exp(x[i]));
      sum = r(sum + out[i]);
    }
    for (size_t i = 0; i < n; ++i) out[i] = r(out[i] / sum);
    return;
  }
  float mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - mx);
    sum += out[i];
  }
  float inv = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) out[i] = r(out[i] * inv);
}

}  // namespace anxin::kernels
