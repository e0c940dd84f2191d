#include "anxin/compare/metrics.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace anxin::compare {
namespace {

// Two float64 lanes, one SSE2 register: wider vectors would be split into
// element-wise code on the baseline x86-64 target.
constexpr size_t kLanes = 2;
using V = double __attribute__((vector_size(kLanes * sizeof(double))));
using M = int64_t __attribute__((vector_size(kLanes * sizeof(int64_t))));
constexpr int64_t kExponentBits = 0x7ff0000000000000ll;

V Splat(double x) { return V{x, x}; }
V Abs(V x) { return reinterpret_cast<V>(reinterpret_cast<M>(x) & 0x7fffffffffffffffll); }
// Same as std::max / std::min for operands that are not NaN.
V Max(V a, V b) { return a < b ? b : a; }
V Min(V a, V b) { return b < a ? b : a; }
const M kTrue = {-1, -1};
V Load(const double* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
double Sum(V v) { return v[0] + v[1]; }
int64_t Count(M c) { return c[0] + c[1]; }
double HMax(V v) { return std::max(v[0], v[1]); }
double HMin(V v) { return std::min(v[0], v[1]); }

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
  const V kMax = Splat(DBL_MAX), kEps = Splat(DBL_EPSILON), kZero = Splat(0.0), kOne = Splat(1.0);
  const V kInf = Splat(HUGE_VAL), kNegInf = Splat(-HUGE_VAL), kNaN = Splat(std::nan(""));
  const V k1e3 = Splat(0.001), k5e3 = Splat(0.005);
  const V rtol = Splat(params.rtol), atol = Splat(params.atol);
  // ULP scale 2^(mant - eb) as a division by 2^eb: 2^eb is the reference's
  // exponent bits alone (0 for zeros and subnormals), raised to 2^min_eb.
  // Scaling by powers of two is exact, so this equals NumPy's ldexp.
  const V min_pow = Splat(std::ldexp(1.0, params.ulp_min_exponent));
  const V mant_pow = Splat(std::ldexp(1.0, params.ulp_mantissa_bits));

  V s_ab = kZero, s_aa = kZero, s_bb = kZero, s_abs = kZero, s_sq = kZero, s_rel = kZero;
  V s_a = kZero, s_b = kZero, s_a2 = kZero, s_b2 = kZero;
  V m_abs = kZero, m_rel = kZero, m_relnz = kZero, m_ulp = kZero;
  V mx_a = kNegInf, mn_a = kInf, mx_b = kNegInf, mn_b = kInf;
  M c_fin{}, c_nan{}, c_inf{}, c_r3{}, c_r5{}, c_ulp{}, c_viol{}, c_zr{}, c_a{}, c_b{};

  // Every quantity is computed for all lanes and masked, with no branches, so
  // the whole pass runs on vectors. Comparisons give lane masks of -1, hence
  // counters subtract them. No value entering a max/min is NaN (non-finite
  // inputs are masked to 0), so plain compare-and-select is exact. Lanes hold
  // partial sums in a fixed order, so results do not depend on the ISA.
  // With all_finite (a std::true_type) the finiteness masks are constants and
  // the compiler drops the non-finite bookkeeping: the common case runs about
  // half the instructions.
  auto step = [&](V a, V b, auto all_finite) {
    constexpr bool kFinite = decltype(all_finite)::value;
    const M fa = kFinite ? kTrue : M(Abs(a) <= kMax), fb = kFinite ? kTrue : M(Abs(b) <= kMax);
    const M na = kFinite ? M{} : M(a != a), nb = kFinite ? M{} : M(b != b);
    const M both = fa & fb;
    c_nan -= na ^ nb;
    c_inf -= ((~fa & ~na) | (~fb & ~nb)) & ~na & ~nb & (a != b);
    // Per-side statistics over finite values.
    const V ax = fa ? a : kZero, bx = fb ? b : kZero;
    c_a -= fa;
    c_b -= fb;
    s_a += ax;
    s_b += bx;
    s_a2 += ax * ax;
    s_b2 += bx * bx;
    mx_a = Max(mx_a, fa ? a : kNegInf);
    mn_a = Min(mn_a, fa ? a : kInf);
    mx_b = Max(mx_b, fb ? b : kNegInf);
    mn_b = Min(mn_b, fb ? b : kInf);
    // Pair metrics over positions where both are finite.
    const V x = both ? a : kZero, y = both ? b : kZero;
    c_fin -= both;
    const V d = x - y, ad = Abs(d);
    s_ab += x * y;
    s_aa += x * x;
    s_bb += y * y;
    s_abs += ad;
    s_sq += d * d;
    m_abs = Max(m_abs, ad);
    const M yz = y == kZero;
    const V yy = yz ? kEps : y, xx = yz ? x + kEps : x;
    const V rel = Abs((xx - yy) / yy);
    s_rel += rel;
    m_rel = Max(m_rel, rel);
    m_relnz = Max(m_relnz, yz ? kZero : rel);
    c_zr -= yz & (ad != kZero);
    c_r3 -= both & (rel < k1e3);
    c_r5 -= both & (rel < k5e3);
    const V eb_pow = Max(reinterpret_cast<V>(reinterpret_cast<M>(y) & kExponentBits), min_pow);
    const V ulp = ad / eb_pow * mant_pow;
    m_ulp = Max(m_ulp, ulp);
    c_ulp -= ulp > kOne;
    // allclose: non-finite positions pass only when identical infinities.
    c_viol -= ~(both ? (ad <= atol + rtol * Abs(y)) : (a == b));
  };
  // Sub-blocks small enough to stay in L1 between the finiteness check and
  // the metric pass.
  constexpr size_t kSub = 512;
  size_t i = 0;
  int64_t padding = 0;
  for (; i + kLanes <= n;) {
    const size_t end = i + std::min(kSub, (n - i) / kLanes * kLanes);
    // x * 0 is 0 for finite x and NaN otherwise.
    V probe = kZero;
    for (size_t k = i; k < end; k += kLanes) probe += Load(out + k) * kZero + Load(ref + k) * kZero;
    if (Sum(probe) == 0.0) {
      for (; i < end; i += kLanes) step(Load(out + i), Load(ref + i), std::true_type{});
    } else {
      for (; i < end; i += kLanes) step(Load(out + i), Load(ref + i), std::false_type{});
    }
  }
  if (i < n) {
    // Padding lanes are NaN on both sides: they add nothing but one allclose
    // violation each (NaN is never equal), taken back below.
    V a = kNaN, b = kNaN;
    for (size_t k = 0; i + k < n; ++k) {
      a[k] = out[i + k];
      b[k] = ref[i + k];
    }
    step(a, b, std::false_type{});
    padding = static_cast<int64_t>(i + kLanes - n);
  }

  sum_ab_ += Sum(s_ab);
  sum_aa_ += Sum(s_aa);
  sum_bb_ += Sum(s_bb);
  sum_abs_ += Sum(s_abs);
  sum_sq_ += Sum(s_sq);
  sum_rel_ += Sum(s_rel);
  max_abs_ = std::fmax(max_abs_, HMax(m_abs));
  max_rel_ = std::fmax(max_rel_, HMax(m_rel));
  max_rel_nonzero_ref_ = std::fmax(max_rel_nonzero_ref_, HMax(m_relnz));
  max_ulp_ = std::fmax(max_ulp_, HMax(m_ulp));
  out_sum_ += Sum(s_a);
  ref_sum_ += Sum(s_b);
  out_sumsq_ += Sum(s_a2);
  ref_sumsq_ += Sum(s_b2);
  out_max_ = std::fmax(out_max_, HMax(mx_a));
  out_min_ = std::fmin(out_min_, HMin(mn_a));
  ref_max_ = std::fmax(ref_max_, HMax(mx_b));
  ref_min_ = std::fmin(ref_min_, HMin(mn_b));
  finite_ += Count(c_fin);
  nan_mismatch_ += Count(c_nan);
  inf_mismatch_ += Count(c_inf);
  rel_1e3_ += Count(c_r3);
  rel_5e3_ += Count(c_r5);
  ulp_gt1_ += Count(c_ulp);
  allclose_viol_ += Count(c_viol) - padding;
  zero_ref_mismatch_ += Count(c_zr);
  out_count_ += Count(c_a);
  ref_count_ += Count(c_b);
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
