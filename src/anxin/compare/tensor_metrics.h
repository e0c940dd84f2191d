// Element-wise accuracy metrics between an output tensor and its reference,
// accumulated in float64 (reference.md, "Accuracy compare").
//
//   MetricParams params = MetricParams::For(DType::kFloat16, DType::kFloat32);
//   std::vector<double> out_block(256, 1.0), ref_block(256, 1.0);
//   std::vector<uint16_t> out_f16(256, 0x3c00);   // 1.0 in float16
//   std::vector<float> ref_f32(256, 1.0f);
//   size_t n = 256;
//   MetricAccumulator acc;
//   acc.Add(params, out_block.data(), ref_block.data(), n);   // float64 blocks, any number
//   acc.Add(params, DType::kFloat16, out_f16.data(), DType::kFloat32, ref_f32.data(), n);
//   Metrics m = acc.Finish(params);
//
// Conventions, chosen to match msprobe and torch.testing:
// - Error metrics use positions where both values are finite. NaN and Inf are
//   compared by position instead: nan_mismatch counts positions where exactly
//   one side is NaN, inf_mismatch those where an infinity meets anything else.
// - Relative error is |N-B|/|B|; where B == 0, msprobe's rule applies after the
//   float64 cast: B' = eps, N' = N + eps, rel = |(N'-B')/B'|.
// - ULP error is |N-B| * 2^(mant - eb), eb = max(floor(log2|B|), min_eb), in
//   the format of the output (the side under test).
// - allclose is |N-B| <= atol + rtol*|B| at torch.testing's defaults for the
//   output's dtype, NaN never equal.
//
// The kernel decodes float32, float16 and bfloat16 itself (each byte is read
// once) and is built for AVX-512, AVX2 and baseline x86-64, chosen at run
// time. All paths give bit-identical results: the same eight float64 lanes,
// the same operations in the same order, no fused multiply-add.
//
// Thread safety: MetricAccumulator is a value; use one per thread and Merge.
#ifndef ANXIN_COMPARE_TENSOR_METRICS_H_
#define ANXIN_COMPARE_TENSOR_METRICS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "anxin/compare/dtype.h"
#include "anxin/compare/metric_sums.h"

namespace anxin::compare {

// Instruction set of the metric kernel. kAuto: the best this CPU supports.
enum class KernelPath : uint8_t { kAuto, kBaseline, kAvx2, kAvx512 };
std::string_view KernelPathName(KernelPath path);  // "auto", "baseline", "avx2", "avx512"
// The paths this CPU can run, baseline first; the last is what kAuto picks.
std::vector<KernelPath> AvailableKernelPaths();

struct MetricParams {
  bool ulp_enabled = true;
  int ulp_mantissa_bits = 52;
  int ulp_min_exponent = -1022;
  double rtol = 1e-7;
  double atol = 1e-7;
  // Tests force a path; a path the CPU lacks falls back to kAuto's choice.
  KernelPath path = KernelPath::kAuto;
  // Tests run every block through the kernel's general mode (the one that
  // masks NaN, Inf and zero references lane by lane); the results are the
  // same bits either way.
  bool general_mode_only = false;
  // The output's dtype decides the ULP format and the allclose defaults;
  // when the output is an integer type the reference's floating type does.
  static MetricParams For(DType out, DType ref);
};

struct Metrics {
  uint64_t elements = 0;      // positions compared
  uint64_t finite_pairs = 0;  // positions where both values are finite
  uint64_t nan_mismatch = 0;
  uint64_t inf_mismatch = 0;
  double cosine = 0;  // NaN when exactly one side is all zeros; 1 when both are
  double max_abs_err = 0;
  double max_rel_err = 0;
  double mean_abs_err = 0;
  double mean_rel_err = 0;
  double rmse = 0;
  double euclidean_distance = 0;
  double one_thousandth_ratio = 0;            // share of finite pairs with rel err < 0.001
  double five_thousandth_ratio = 0;           // ... < 0.005
  std::optional<double> max_ulp_err;          // unset for integer outputs
  std::optional<double> ulp_above_one_ratio;  // share with ULP error > 1
  double allclose_rtol = 0, allclose_atol = 0;
  uint64_t allclose_violations = 0;
  bool allclose = true;
  // Polygraphy-style: the smallest tolerance that would pass with the other at 0.
  double required_atol = 0;
  double required_rtol = 0;
  // Summary statistics of each side over its finite values (msprobe's Max,
  // Min, Mean, Norm).
  double out_max = 0, out_min = 0, out_mean = 0, out_norm = 0;
  double ref_max = 0, ref_min = 0, ref_mean = 0, ref_norm = 0;
};

// How the kernel ran the blocks it was given (a block is 2048 elements; the
// last n % 16 elements of each call run in the general mode, uncounted):
// in its fast mode (all finite, no zero reference), its zeros mode (some zero
// references) or its general mode (NaN or Inf); retries counts the runs
// that found their mode's preconditions broken, after which the block ran
// again in a later mode;
// recounted blocks had a deferred threshold count that their extremes did
// not settle. For benchmarks and tests: the metrics never depend on it.
struct KernelStats {
  uint64_t fast_blocks = 0, zeros_blocks = 0, general_blocks = 0, retries = 0, recounted_blocks = 0;
  KernelStats& operator+=(const KernelStats& o) {
    fast_blocks += o.fast_blocks;
    zeros_blocks += o.zeros_blocks;
    general_blocks += o.general_blocks;
    retries += o.retries;
    recounted_blocks += o.recounted_blocks;
    return *this;
  }
};

class MetricAccumulator {
 public:
  // Adds n pairs (out[i], ref[i]).
  void Add(const MetricParams& params, const double* out, const double* ref, size_t n);
  // Adds n pairs stored contiguously in their own dtypes, little-endian
  // (swap_* for big-endian data). Results are bit-identical to converting
  // both sides with ConvertToDouble and calling the overload above.
  void Add(const MetricParams& params, DType out_dtype, const void* out, DType ref_dtype,
           const void* ref, size_t n, bool swap_out = false, bool swap_ref = false);
  // Adds another accumulator's pairs (sums add, maxima combine).
  void Merge(const MetricAccumulator& other);
  Metrics Finish(const MetricParams& params) const;
  KernelStats Stats() const;

 private:
  kernel::Sums s_;
};

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_TENSOR_METRICS_H_
