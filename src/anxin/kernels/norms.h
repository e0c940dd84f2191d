// LayerNorm, RMSNorm and softmax two ways: the naive forms computed in a
// half-precision format (every intermediate rounded, as a kernel that keeps
// its accumulators in float16 does), and careful forms (Welford's mean and
// variance, a max-subtracted softmax, float32 accumulation) whose only
// half-precision step is storing the result. Half-precision arithmetic is
// emulated by rounding each float32 result (rounding.h), so the drift of a
// float16 kernel shows up on any CPU (docs/kernels.md, "Norms and softmax").
//
//   std::vector<float> x(4096, 20.0f), out(4096);
//   x[0] = 21.0f;
//   LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kNaive, out);    // sum overflows: NaN
//   LayerNorm(x, {}, {}, 1e-5f, Half::kFloat16, NormForm::kCareful, out);  // ~64 then ~-0.016
//   Softmax(x, Half::kFloat16, NormForm::kNaive, out);                     // exp(20) = inf: NaN
//
// Thread safety: all functions are pure.
#ifndef ANXIN_KERNELS_NORMS_H_
#define ANXIN_KERNELS_NORMS_H_

#include <span>
#include <string_view>

namespace anxin::kernels {

enum class Half { kFloat16, kBFloat16 };
enum class NormForm {
  kNaive,    // sum and sum of squares (E[x^2] - E[x]^2), exp without the max, all in Half
  kCareful,  // Welford / max-subtracted, float32 accumulators; output rounded to Half
};
std::string_view HalfName(Half h);  // "float16", "bfloat16"

// Rounds v to the format (rounding.h).
float RoundTo(Half format, float v);

// One row: out = (x - mean) / sqrt(var + eps) * gamma + beta. Empty gamma /
// beta mean 1 and 0. REQUIRES: out.size() == x.size() >= 1, gamma and beta
// empty or of x's size. x is taken as already in the format.
void LayerNorm(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
               float eps, Half format, NormForm form, std::span<float> out);
// One row: out = x / sqrt(mean(x^2) + eps) * gamma.
void RmsNorm(std::span<const float> x, std::span<const float> gamma, float eps, Half format,
             NormForm form, std::span<float> out);
// One row: out = exp(x) / sum(exp(x)).
void Softmax(std::span<const float> x, Half format, NormForm form, std::span<float> out);

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_NORMS_H_
