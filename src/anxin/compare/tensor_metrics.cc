#include "anxin/compare/tensor_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "anxin/base/cpu_dispatch.h"
#include "anxin/compare/metrics_kernel.h"

namespace anxin::compare {
namespace {

CpuIsa IsaOf(KernelPath path) { return static_cast<CpuIsa>(path); }
static_assert(static_cast<int>(KernelPath::kAvx512) == static_cast<int>(CpuIsa::kAvx512) &&
              static_cast<int>(KernelPath::kAvx2) == static_cast<int>(CpuIsa::kAvx2) &&
              static_cast<int>(KernelPath::kAuto) == static_cast<int>(CpuIsa::kAuto));

void RunKernel(KernelPath path, const kernel::Args& args, kernel::Sums& sums) {
  switch (ResolveCpuIsa(IsaOf(path))) {
    case CpuIsa::kAvx512:
      return kernel::RunAvx512(args, sums);
    case CpuIsa::kAvx2:
      return kernel::RunAvx2(args, sums);
    default:
      return kernel::RunBaseline(args, sums);
  }
}

// The formats the kernel decodes itself; false for the others. (A plain
// flag: g++ 12 gives a false maybe-uninitialized on std::optional here at -O2.)
bool FormatOf(DType dtype, bool swapped, kernel::Format* f) {
  if (swapped) return false;
  switch (dtype) {
    case DType::kFloat64:
      *f = kernel::Format::kF64;
      return true;
    case DType::kFloat32:
      *f = kernel::Format::kF32;
      return true;
    case DType::kFloat16:
      *f = kernel::Format::kF16;
      return true;
    case DType::kBFloat16:
      *f = kernel::Format::kBF16;
      return true;
    default:
      return false;
  }
}

kernel::Args ArgsFor(const MetricParams& p, size_t n) {
  kernel::Args a{};
  a.n = n;
  a.rtol = p.rtol;
  a.atol = p.atol;
  a.ulp_mantissa_bits = p.ulp_mantissa_bits;
  a.ulp_min_exponent = p.ulp_min_exponent;
  a.general_only = p.general_mode_only;
  a.out_format = a.ref_format = kernel::Format::kF64;
  return a;
}

}  // namespace

std::string_view KernelPathName(KernelPath path) { return CpuIsaName(IsaOf(path)); }

std::vector<KernelPath> AvailableKernelPaths() {
  std::vector<KernelPath> paths{KernelPath::kBaseline};
  for (KernelPath p : {KernelPath::kAvx2, KernelPath::kAvx512})
    if (CpuSupports(IsaOf(p))) paths.push_back(p);
  return paths;
}

MetricParams MetricParams::For(DType out, DType ref) {
  MetricParams p;
  DType basis = IsFloating(out) ? out : ref;
  p.ulp_enabled = IsFloating(basis);
  UlpFormat f = UlpFormatOf(basis);
  p.ulp_mantissa_bits = f.mantissa_bits;
  p.ulp_min_exponent = f.min_exponent;
  Tolerance t = DefaultTolerance(basis);
  p.rtol = t.rtol;
  p.atol = t.atol;
  return p;
}

void MetricAccumulator::Add(const MetricParams& params, const double* out, const double* ref,
                            size_t n) {
  kernel::Args a = ArgsFor(params, n);
  a.out = out;
  a.ref = ref;
  RunKernel(params.path, a, s_);
}

void MetricAccumulator::Add(const MetricParams& params, DType out_dtype, const void* out,
                            DType ref_dtype, const void* ref, size_t n, bool swap_out,
                            bool swap_ref) {
  kernel::Format fo = kernel::Format::kF64, fr = kernel::Format::kF64;
  // A narrow output is decoded by the kernel only with narrow ULP parameters
  // (metrics_kernel.h); with others (a float64 ULP asked through this API for
  // a float32 output, say) it is converted first, like any other dtype.
  const bool fused_out = FormatOf(out_dtype, swap_out, &fo) &&
                         (fo == kernel::Format::kF64 ||
                          kernel::NarrowUlp(params.ulp_mantissa_bits, params.ulp_min_exponent));
  const bool fused_ref = FormatOf(ref_dtype, swap_ref, &fr);
  kernel::Args a = ArgsFor(params, n);
  if (fused_out && fused_ref) {
    a.out = out;
    a.ref = ref;
    a.out_format = fo;
    a.ref_format = fr;
    RunKernel(params.path, a, s_);
    return;
  }
  // Other dtypes (and byte-swapped data) go through float64 in blocks of
  // 2048 elements: the kernel folds its lanes every 2048 elements, so the
  // sums are the same as in one call.
  constexpr size_t kBlock = 2048;
  double a_buf[kBlock], b_buf[kBlock];
  const auto* po = static_cast<const uint8_t*>(out);
  const auto* pr = static_cast<const uint8_t*>(ref);
  const size_t so = DTypeSize(out_dtype), sr = DTypeSize(ref_dtype);
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    a.n = m;
    if (fused_out) {
      a.out = po + i * so;
      a.out_format = fo;
    } else {
      ConvertToDouble(out_dtype, po + i * so, swap_out, m, a_buf);
      a.out = a_buf;
      a.out_format = kernel::Format::kF64;
    }
    if (fused_ref) {
      a.ref = pr + i * sr;
      a.ref_format = fr;
    } else {
      ConvertToDouble(ref_dtype, pr + i * sr, swap_ref, m, b_buf);
      a.ref = b_buf;
      a.ref_format = kernel::Format::kF64;
    }
    RunKernel(params.path, a, s_);
  }
}

void MetricAccumulator::Merge(const MetricAccumulator& other) {
  const kernel::Sums& o = other.s_;
  kernel::Sums& s = s_;
  s.n += o.n;
  s.finite += o.finite;
  s.nan_mismatch += o.nan_mismatch;
  s.inf_mismatch += o.inf_mismatch;
  s.rel_1e3 += o.rel_1e3;
  s.rel_5e3 += o.rel_5e3;
  s.ulp_gt1 += o.ulp_gt1;
  s.allclose_viol += o.allclose_viol;
  s.zero_ref_mismatch += o.zero_ref_mismatch;
  s.sum_ab += o.sum_ab;
  s.sum_aa += o.sum_aa;
  s.sum_bb += o.sum_bb;
  s.sum_abs += o.sum_abs;
  s.sum_sq += o.sum_sq;
  s.sum_rel += o.sum_rel;
  s.max_abs = std::fmax(s.max_abs, o.max_abs);
  s.max_rel = std::fmax(s.max_rel, o.max_rel);
  s.max_rel_nonzero_ref = std::fmax(s.max_rel_nonzero_ref, o.max_rel_nonzero_ref);
  s.max_ulp = std::fmax(s.max_ulp, o.max_ulp);
  s.out_count += o.out_count;
  s.ref_count += o.ref_count;
  s.out_sum += o.out_sum;
  s.ref_sum += o.ref_sum;
  s.out_sumsq += o.out_sumsq;
  s.ref_sumsq += o.ref_sumsq;
  s.out_max = std::fmax(s.out_max, o.out_max);
  s.out_min = std::fmin(s.out_min, o.out_min);
  s.ref_max = std::fmax(s.ref_max, o.ref_max);
  s.ref_min = std::fmin(s.ref_min, o.ref_min);
  s.blocks_fast += o.blocks_fast;
  s.blocks_zeros += o.blocks_zeros;
  s.blocks_general += o.blocks_general;
  s.blocks_retried += o.blocks_retried;
  s.blocks_recounted += o.blocks_recounted;
}

KernelStats MetricAccumulator::Stats() const {
  return {s_.blocks_fast, s_.blocks_zeros, s_.blocks_general, s_.blocks_retried,
          s_.blocks_recounted};
}

Metrics MetricAccumulator::Finish(const MetricParams& params) const {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const kernel::Sums& s = s_;
  Metrics m;
  m.elements = s.n;
  m.finite_pairs = s.finite;
  m.nan_mismatch = s.nan_mismatch;
  m.inf_mismatch = s.inf_mismatch;
  const uint64_t finite_ = s.finite;
  const double fin = static_cast<double>(finite_);
  if (s.sum_aa == 0 && s.sum_bb == 0) {
    m.cosine = 1.0;
  } else if (s.sum_aa == 0 || s.sum_bb == 0) {
    m.cosine = kNaN;
  } else {
    m.cosine = s.sum_ab / (std::sqrt(s.sum_aa) * std::sqrt(s.sum_bb));
  }
  m.max_abs_err = s.max_abs;
  m.max_rel_err = s.max_rel;
  m.mean_abs_err = finite_ ? s.sum_abs / fin : kNaN;
  m.mean_rel_err = finite_ ? s.sum_rel / fin : kNaN;
  m.rmse = finite_ ? std::sqrt(s.sum_sq / fin) : kNaN;
  m.euclidean_distance = std::sqrt(s.sum_sq);
  m.one_thousandth_ratio = finite_ ? static_cast<double>(s.rel_1e3) / fin : kNaN;
  m.five_thousandth_ratio = finite_ ? static_cast<double>(s.rel_5e3) / fin : kNaN;
  if (params.ulp_enabled) {
    m.max_ulp_err = s.max_ulp;
    m.ulp_above_one_ratio = finite_ ? static_cast<double>(s.ulp_gt1) / fin : kNaN;
  }
  m.allclose_rtol = params.rtol;
  m.allclose_atol = params.atol;
  m.allclose_violations = s.allclose_viol;
  m.allclose = s.allclose_viol == 0;
  const bool nonfinite_mismatch = s.nan_mismatch + s.inf_mismatch > 0;
  m.required_atol = nonfinite_mismatch ? HUGE_VAL : s.max_abs;
  m.required_rtol =
      nonfinite_mismatch || s.zero_ref_mismatch > 0 ? HUGE_VAL : s.max_rel_nonzero_ref;
  auto side = [&](uint64_t c, double mx, double mn, double sum, double& omax, double& omin,
                  double& omean) {
    omax = c ? mx : kNaN;
    omin = c ? mn : kNaN;
    omean = c ? sum / static_cast<double>(c) : kNaN;
  };
  side(s.out_count, s.out_max, s.out_min, s.out_sum, m.out_max, m.out_min, m.out_mean);
  side(s.ref_count, s.ref_max, s.ref_min, s.ref_sum, m.ref_max, m.ref_min, m.ref_mean);
  m.out_norm = std::sqrt(s.out_sumsq);
  m.ref_norm = std::sqrt(s.ref_sumsq);
  return m;
}

}  // namespace anxin::compare
