#include "anxin/compare/metrics.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

namespace anxin::compare {
namespace {

// Lanes of independent partial sums: lets the compiler use SIMD without
// -ffast-math, and shortens the summation chains (better rounding).
constexpr size_t kLanes = 8;

inline double Pow2(int64_t e) {  // REQUIRES: -1022 <= e <= 1023
  return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
}

}  // namespace

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
  const double rtol = params.rtol, atol = params.atol;
  const int64_t mant = params.ulp_mantissa_bits, min_eb = params.ulp_min_exponent;

  double s_ab[kLanes] = {}, s_aa[kLanes] = {}, s_bb[kLanes] = {}, s_abs[kLanes] = {},
         s_sq[kLanes] = {}, s_rel[kLanes] = {}, m_abs[kLanes] = {}, m_rel[kLanes] = {},
         m_relnz[kLanes] = {}, m_ulp[kLanes] = {}, s_a[kLanes] = {}, s_b[kLanes] = {},
         s_a2[kLanes] = {}, s_b2[kLanes] = {};
  double mx_a[kLanes], mn_a[kLanes], mx_b[kLanes], mn_b[kLanes];
  int64_t c_fin[kLanes] = {}, c_nan[kLanes] = {}, c_inf[kLanes] = {}, c_r3[kLanes] = {},
          c_r5[kLanes] = {}, c_ulp[kLanes] = {}, c_viol[kLanes] = {}, c_zr[kLanes] = {},
          c_a[kLanes] = {}, c_b[kLanes] = {};
  for (size_t j = 0; j < kLanes; ++j) {
    mx_a[j] = mx_b[j] = -HUGE_VAL;
    mn_a[j] = mn_b[j] = HUGE_VAL;
  }

  auto step = [&](size_t j, double a, double b) {
    const bool fa = std::fabs(a) <= kMax, fb = std::fabs(b) <= kMax;
    const bool na = a != a, nb = b != b;
    const bool both = fa & fb;
    c_nan[j] += na != nb;
    c_inf[j] += (!fa & !na) | (!fb & !nb) ? (!na & !nb & (a != b)) : 0;
    // Per-side statistics over finite values.
    const double ax = fa ? a : 0.0, bx = fb ? b : 0.0;
    c_a[j] += fa;
    c_b[j] += fb;
    s_a[j] += ax;
    s_b[j] += bx;
    s_a2[j] += ax * ax;
    s_b2[j] += bx * bx;
    const double a_hi = fa ? a : -HUGE_VAL, a_lo = fa ? a : HUGE_VAL;
    const double b_hi = fb ? b : -HUGE_VAL, b_lo = fb ? b : HUGE_VAL;
    mx_a[j] = a_hi > mx_a[j] ? a_hi : mx_a[j];
    mn_a[j] = a_lo < mn_a[j] ? a_lo : mn_a[j];
    mx_b[j] = b_hi > mx_b[j] ? b_hi : mx_b[j];
    mn_b[j] = b_lo < mn_b[j] ? b_lo : mn_b[j];
    // Pair metrics over positions where both are finite.
    const double x = both ? a : 0.0, y = both ? b : 0.0;
    c_fin[j] += both;
    const double d = x - y, ad = std::fabs(d);
    s_ab[j] += x * y;
    s_aa[j] += x * x;
    s_bb[j] += y * y;
    s_abs[j] += ad;
    s_sq[j] += d * d;
    m_abs[j] = ad > m_abs[j] ? ad : m_abs[j];
    const bool yz = y == 0.0;
    const double yy = yz ? kEps : y, xx = yz ? x + kEps : x;
    const double rel = std::fabs((xx - yy) / yy);
    s_rel[j] += rel;
    m_rel[j] = rel > m_rel[j] ? rel : m_rel[j];
    const double relnz = yz ? 0.0 : rel;
    m_relnz[j] = relnz > m_relnz[j] ? relnz : m_relnz[j];
    c_zr[j] += yz & (ad != 0.0);
    c_r3[j] += both & (rel < 0.001);
    c_r5[j] += both & (rel < 0.005);
    // ULP: eb from the exponent bits of the reference (0 and subnormals
    // clamp to min_eb, as floor(log2|B|) < min_eb there).
    const int64_t raw = static_cast<int64_t>((std::bit_cast<uint64_t>(y) >> 52) & 0x7ff) - 1023;
    const int64_t eb = raw > min_eb ? raw : min_eb;
    const int64_t k = mant - eb;
    const int64_t k1 = k > 1023 ? 1023 : (k < -1022 ? -1022 : k);
    const double ulp = ad * Pow2(k1) * Pow2(k - k1);
    m_ulp[j] = ulp > m_ulp[j] ? ulp : m_ulp[j];
    c_ulp[j] += ulp > 1.0;
    // allclose: non-finite positions pass only when identical infinities.
    const bool close = both ? (ad <= atol + rtol * std::fabs(y)) : (a == b);
    c_viol[j] += !close;
  };

  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) step(j, out[i + j], ref[i + j]);
  for (size_t j = 0; i < n; ++i, ++j) step(j, out[i], ref[i]);

  for (size_t j = 0; j < kLanes; ++j) {
    sum_ab_ += s_ab[j];
    sum_aa_ += s_aa[j];
    sum_bb_ += s_bb[j];
    sum_abs_ += s_abs[j];
    sum_sq_ += s_sq[j];
    sum_rel_ += s_rel[j];
    max_abs_ = std::fmax(max_abs_, m_abs[j]);
    max_rel_ = std::fmax(max_rel_, m_rel[j]);
    max_rel_nonzero_ref_ = std::fmax(max_rel_nonzero_ref_, m_relnz[j]);
    max_ulp_ = std::fmax(max_ulp_, m_ulp[j]);
    out_sum_ += s_a[j];
    ref_sum_ += s_b[j];
    out_sumsq_ += s_a2[j];
    ref_sumsq_ += s_b2[j];
    out_max_ = std::fmax(out_max_, mx_a[j]);
    out_min_ = std::fmin(out_min_, mn_a[j]);
    ref_max_ = std::fmax(ref_max_, mx_b[j]);
    ref_min_ = std::fmin(ref_min_, mn_b[j]);
    finite_ += c_fin[j];
    nan_mismatch_ += c_nan[j];
    inf_mismatch_ += c_inf[j];
    rel_1e3_ += c_r3[j];
    rel_5e3_ += c_r5[j];
    ulp_gt1_ += c_ulp[j];
    allclose_viol_ += c_viol[j];
    zero_ref_mismatch_ += c_zr[j];
    out_count_ += c_a[j];
    ref_count_ += c_b[j];
  }
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
