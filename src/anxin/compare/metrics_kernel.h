// Internal to tensor_metrics.cc: the metric kernel's per-ISA entry points
// (the sums they add to are in metric_sums.h). metrics_kernel_impl.h holds
// the kernel; metrics_kernel_{baseline,avx2,avx512}.cc compile it for one
// instruction set each, and tensor_metrics.cc picks one at run time.
//
// Every path works on the same eight float64 lanes with the same operations
// in the same order (no FMA contraction), and folds lanes into the sums at the
// same element offsets, so every path gives bit-identical results.
#ifndef ANXIN_COMPARE_METRICS_KERNEL_H_
#define ANXIN_COMPARE_METRICS_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "anxin/compare/metric_sums.h"

namespace anxin::compare::kernel {

// Element formats the kernel decodes itself (little-endian, contiguous).
// Anything else is converted to float64 first and passed as kF64.
enum class Format : uint8_t { kF64, kF32, kF16, kBF16 };

struct Args {
  const void* out;
  const void* ref;
  Format out_format, ref_format;
  size_t n;
  double rtol, atol;
  int ulp_mantissa_bits, ulp_min_exponent;
  // Every block through the general (masked) mode; for tests, which hold the
  // faster modes to its results bit for bit.
  bool general_only = false;
};

// Whether ULP parameters (mantissa bits, minimum exponent) allow the scale
// 2^(mant - eb) to be built in one step: every format but float64. The kernel
// decodes a narrow output format (kF32, kF16, kBF16) only with such
// parameters; callers convert other outputs to kF64 first. (static: each
// instruction set's unit keeps its own copy.)
static inline bool NarrowUlp(int mantissa_bits, int min_exponent) {
  return mantissa_bits >= 1 && mantissa_bits - min_exponent <= 1023;
}

// REQUIRES: out_format is kF64 or NarrowUlp(ulp_mantissa_bits, ulp_min_exponent).
void RunBaseline(const Args& args, Sums& sums);
void RunAvx2(const Args& args, Sums& sums);
void RunAvx512(const Args& args, Sums& sums);

}  // namespace anxin::compare::kernel

#endif  // ANXIN_COMPARE_METRICS_KERNEL_H_
