#include "anxin/compare/metrics.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

namespace anxin::compare {
namespace {}  // namespace

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
  constexpr double kMax = DBL_MAX;
  constexpr double kEps = DBL_EPSILON;
  constexpr uint64_t kExponentBits = 0x7ff0000000000000ull;
  const double rtol = params.rtol, atol = params.atol;
  // ULP scale 2^(mant - eb) as a division by 2^eb: 2^eb is the reference's
  // exponent bits alone (0 for zeros and subnormals), raised to 2^min_eb.
  // Scaling by powers of two is exact, so this equals NumPy's ldexp.
  const double min_pow = std::ldexp(1.0, params.ulp_min_exponent);
  const double mant_pow = std::ldexp(1.0, params.ulp_mantissa_bits);

  double s_ab = 0, s_aa = 0, s_bb = 0, s_abs = 0, s_sq = 0, s_rel = 0, s_a = 0, s_b = 0, s_a2 = 0,
         s_b2 = 0;
  double m_abs = 0, m_rel = 0, m_relnz = 0, m_ulp = 0;
  double mx_a = -HUGE_VAL, mn_a = HUGE_VAL, mx_b = -HUGE_VAL, mn_b = HUGE_VAL;
  int64_t c_fin = 0, c_nan = 0, c_inf = 0, c_r3 = 0, c_r5 = 0, c_ulp = 0, c_viol = 0, c_zr = 0,
          c_a = 0, c_b = 0;

  // One pass, no branches: every quantity is computed for every element and
  // masked. `omp simd` (-fopenmp-simd, no runtime) lets the compiler keep
  // vector lanes of partial sums; the order is fixed by the build, so results
  // do not depend on threads or chunking beyond the documented merge order.
  // No value entering a max/min is NaN (non-finite inputs are masked to 0).
#pragma omp simd reduction(+ : s_ab, s_aa, s_bb, s_abs, s_sq, s_rel, s_a, s_b, s_a2, s_b2, c_fin, \
                               c_nan, c_inf, c_r3, c_r5, c_ulp, c_viol, c_zr, c_a, c_b)        \
    reduction(max : m_abs, m_rel, m_relnz, m_ulp, mx_a, mx_b) reduction(min : mn_a, mn_b)
  for (size_t i = 0; i < n; ++i) {
    const double a = out[i], b = ref[i];
    const bool fa = std::fabs(a) <= kMax, fb = std::fabs(b) <= kMax;
    const bool na = a != a, nb = b != b;
    const bool both = fa & fb;
    c_nan += na != nb;
    c_inf += ((!fa & !na) | (!fb & !nb)) & !na & !nb & (a != b);
    // Per-side statistics over finite values.
    const double ax = fa ? a : 0.0, bx = fb ? b : 0.0;
    c_a += fa;
    c_b += fb;
    s_a += ax;
    s_b += bx;
    s_a2 += ax * ax;
    s_b2 += bx * bx;
    mx_a = std::max(mx_a, fa ? a : -HUGE_VAL);
    mn_a = std::min(mn_a, fa ? a : HUGE_VAL);
    mx_b = std::max(mx_b, fb ? b : -HUGE_VAL);
    mn_b = std::min(mn_b, fb ? b : HUGE_VAL);
    // Pair metrics over positions where both are finite.
    const double x = both ? a : 0.0, y = both ? b : 0.0;
    c_fin += both;
    const double d = x - y, ad = std::fabs(d);
    s_ab += x * y;
    s_aa += x * x;
    s_bb += y * y;
    s_abs += ad;
    s_sq += d * d;
    m_abs = std::max(m_abs, ad);
    const bool yz = y == 0.0;
    const double yy = yz ? kEps : y, xx = yz ? x + kEps : x;
    const double rel = std::fabs((xx - yy) / yy);
    s_rel += rel;
    m_rel = std::max(m_rel, rel);
    m_relnz = std::max(m_relnz, yz ? 0.0 : rel);
    c_zr += yz & (ad != 0.0);
    c_r3 += both & (rel < 0.001);
    c_r5 += both & (rel < 0.005);
    const double eb_pow =
        std::max(std::bit_cast<double>(std::bit_cast<uint64_t>(y) & kExponentBits), min_pow);
    const double ulp = ad / eb_pow * mant_pow;
    m_ulp = std::max(m_ulp, ulp);
    c_ulp += ulp > 1.0;
    // allclose: non-finite positions pass only when identical infinities.
    c_viol += !(both ? (ad <= atol + rtol * std::fabs(y)) : (a == b));
  }

  sum_ab_ += s_ab;
  sum_aa_ += s_aa;
  sum_bb_ += s_bb;
  sum_abs_ += s_abs;
  sum_sq_ += s_sq;
  sum_rel_ += s_rel;
  max_abs_ = std::fmax(max_abs_, m_abs);
  max_rel_ = std::fmax(max_rel_, m_rel);
  max_rel_nonzero_ref_ = std::fmax(max_rel_nonzero_ref_, m_relnz);
  max_ulp_ = std::fmax(max_ulp_, m_ulp);
  out_sum_ += s_a;
  ref_sum_ += s_b;
  out_sumsq_ += s_a2;
  ref_sumsq_ += s_b2;
  out_max_ = std::fmax(out_max_, mx_a);
  out_min_ = std::fmin(out_min_, mn_a);
  ref_max_ = std::fmax(ref_max_, mx_b);
  ref_min_ = std::fmin(ref_min_, mn_b);
  finite_ += c_fin;
  nan_mismatch_ += c_nan;
  inf_mismatch_ += c_inf;
  rel_1e3_ += c_r3;
  rel_5e3_ += c_r5;
  ulp_gt1_ += c_ulp;
  allclose_viol_ += c_viol;
  zero_ref_mismatch_ += c_zr;
  out_count_ += c_a;
  ref_count_ += c_b;
  n_ += n;
}

void MetricAccumulator::Merge(const MetricAccumulator& o) {
  n_ += o.n_;
  finite_ += o.finite_;
  nan_mismatch_ += o.nan_mismatch_;
  inf_mismatch_ += o.inf_mismatch_;
  rel_1e3_ += o.rel_1e3_;
  rel_5e3_ += o.rel_5e3_;
  ulp_gt1_ += o.ulp_gt1_;
  allclose_viol_ += o.allclose_viol_;
  zero_ref_mismatch_ += o.zero_ref_mismatch_;
  sum_ab_ += o.sum_ab_;
  sum_aa_ += o.sum_aa_;
  sum_bb_ += o.sum_bb_;
  sum_abs_ += o.sum_abs_;
  sum_sq_ += o.sum_sq_;
  sum_rel_ += o.sum_rel_;
  max_abs_ = std::fmax(max_abs_, o.max_abs_);
  max_rel_ = std::fmax(max_rel_, o.max_rel_);
  max_rel_nonzero_ref_ = std::fmax(max_rel_nonzero_ref_, o.max_rel_nonzero_ref_);
  max_ulp_ = std::fmax(max_ulp_, o.max_ulp_);
  out_count_ += o.out_count_;
  ref_count_ += o.ref_count_;
  out_sum_ += o.out_sum_;
  ref_sum_ += o.ref_sum_;
  out_sumsq_ += o.out_sumsq_;
  ref_sumsq_ += o.ref_sumsq_;
  out_max_ = std::fmax(out_max_, o.out_max_);
  out_min_ = std::fmin(out_min_, o.out_min_);
  ref_max_ = std::fmax(ref_max_, o.ref_max_);
  ref_min_ = std::fmin(ref_min_, o.ref_min_);
}

Metrics MetricAccumulator::Finish(const MetricParams& params) const {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  Metrics m;
  m.elements = n_;
  m.finite_pairs = finite_;
  m.nan_mismatch = nan_mismatch_;
  m.inf_mismatch = inf_mismatch_;
  const double fin = static_cast<double>(finite_);
  if (sum_aa_ == 0 && sum_bb_ == 0) {
    m.cosine = 1.0;
  } else if (sum_aa_ == 0 || sum_bb_ == 0) {
    m.cosine = kNaN;
  } else {
    m.cosine = sum_ab_ / (std::sqrt(sum_aa_) * std::sqrt(sum_bb_));
  }
  m.max_abs_err = max_abs_;
  m.max_rel_err = max_rel_;
  m.mean_abs_err = finite_ ? sum_abs_ / fin : kNaN;
  m.mean_rel_err = finite_ ? sum_rel_ / fin : kNaN;
  m.rmse = finite_ ? std::sqrt(sum_sq_ / fin) : kNaN;
  m.euclidean_distance = std::sqrt(sum_sq_);
  m.one_thousandth_ratio = finite_ ? static_cast<double>(rel_1e3_) / fin : kNaN;
  m.five_thousandth_ratio = finite_ ? static_cast<double>(rel_5e3_) / fin : kNaN;
  if (params.ulp_enabled) {
    m.max_ulp_err = max_ulp_;
    m.ulp_above_one_ratio = finite_ ? static_cast<double>(ulp_gt1_) / fin : kNaN;
  }
  m.allclose_rtol = params.rtol;
  m.allclose_atol = params.atol;
  m.allclose_violations = allclose_viol_;
  m.allclose = allclose_viol_ == 0;
  const bool nonfinite_mismatch = nan_mismatch_ + inf_mismatch_ > 0;
  m.required_atol = nonfinite_mismatch ? HUGE_VAL : max_abs_;
  m.required_rtol = nonfinite_mismatch || zero_ref_mismatch_ > 0 ? HUGE_VAL : max_rel_nonzero_ref_;
  auto side = [&](uint64_t c, double mx, double mn, double s, double& omax, double& omin,
                  double& omean) {
    omax = c ? mx : kNaN;
    omin = c ? mn : kNaN;
    omean = c ? s / static_cast<double>(c) : kNaN;
  };
  side(out_count_, out_max_, out_min_, out_sum_, m.out_max, m.out_min, m.out_mean);
  side(ref_count_, ref_max_, ref_min_, ref_sum_, m.ref_max, m.ref_min, m.ref_mean);
  m.out_norm = std::sqrt(out_sumsq_);
  m.ref_norm = std::sqrt(ref_sumsq_);
  return m;
}

}  // namespace anxin::compare
