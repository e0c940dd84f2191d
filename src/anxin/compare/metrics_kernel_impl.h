// The metric kernel, included once by each metrics_kernel_<isa>.cc after it
// defines ANXIN_KERNEL_ENTRY (the entry point's name). Each includer is built
// for one instruction set; everything but the entry point has internal
// linkage, so code built for AVX-512 can never be linked into a caller that
// runs on a lesser CPU. For the same reason only builtins and the compiler's
// intrinsics (always inlined, never emitted on their own) are used here: an
// inline std:: template could be merged with another unit's copy.
//
// Conventions (metrics.h): error metrics over positions where both values
// are finite; NaN/Inf compared by position; msprobe's zero-reference rule for
// the relative error; ULP error in the output's format.
#include <immintrin.h>

#include <cfloat>
#include <cstring>

#include "anxin/compare/metrics_kernel.h"

#ifndef ANXIN_KERNEL_ENTRY
#error "define ANXIN_KERNEL_ENTRY before including metrics_kernel_impl.h"
#endif

namespace anxin::compare::kernel {
namespace {

// Eight logical float64 lanes on every path, which fix the summation order:
// element i belongs to lane i % 8. They are held in native vectors of kW
// lanes: one AVX-512 register, two AVX2 ones or four SSE2 ones (kGroups),
// each group with its own accumulators.
constexpr size_t kLanes = 8;
#if defined(__AVX512F__)
constexpr size_t kW = 8;
#elif defined(__AVX2__)
constexpr size_t kW = 4;
#else
constexpr size_t kW = 2;
#endif
constexpr size_t kGroups = kLanes / kW;
using V = double __attribute__((vector_size(kW * sizeof(double))));
using M = int64_t __attribute__((vector_size(kW * sizeof(int64_t))));
using U64 = uint64_t __attribute__((vector_size(kW * sizeof(uint64_t))));
using F32 = float __attribute__((vector_size(kW * sizeof(float))));
using U32 = uint32_t __attribute__((vector_size(kW * sizeof(uint32_t))));
using U16 = uint16_t __attribute__((vector_size(kW * sizeof(uint16_t))));

constexpr int64_t kExponentBits = 0x7ff0000000000000ll;

inline V Splat(double x) { return V{} + x; }
inline V Abs(V x) { return reinterpret_cast<V>(reinterpret_cast<M>(x) & 0x7fffffffffffffffll); }
// Same as std::max / std::min for operands that are not NaN.
inline V Max(V a, V b) { return a < b ? b : a; }
inline V Min(V a, V b) { return b < a ? b : a; }
inline double FMax(double a, double b) { return __builtin_fmax(a, b); }
inline double FMin(double a, double b) { return __builtin_fmin(a, b); }

// Decoders: kW elements at p to kW float64 lanes, exactly.
template <Format F>
struct Decode;
template <>
struct Decode<Format::kF64> {
  static constexpr size_t kSize = 8;
  static V Load(const uint8_t* p) {
    V v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
};
template <>
struct Decode<Format::kF32> {
  static constexpr size_t kSize = 4;
  static V Load(const uint8_t* p) {
    F32 f;
    std::memcpy(&f, p, sizeof(f));
    return __builtin_convertvector(f, V);
  }
};
template <>
struct Decode<Format::kBF16> {
  static constexpr size_t kSize = 2;
  // bfloat16 is the top half of a float32.
  static V Load(const uint8_t* p) {
    U16 h;
    std::memcpy(&h, p, sizeof(h));
    const U32 w = __builtin_convertvector(h, U32) << 16;
    return __builtin_convertvector(reinterpret_cast<F32>(w), V);
  }
};
template <>
struct Decode<Format::kF16> {
  static constexpr size_t kSize = 2;
  static V Load(const uint8_t* p) {
#if defined(__F16C__) && defined(__AVX512F__)
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return __builtin_convertvector(reinterpret_cast<F32>(f), V);
#elif defined(__F16C__)
    const __m128 f = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return __builtin_convertvector(reinterpret_cast<F32>(f), V);
#else
    // Exponent and mantissa moved to the top of a float64 (a subnormal for
    // half subnormals) and scaled by 2^(1023 - 15): exact for every finite
    // half. Exponent 31 is Inf (mantissa 0) or NaN.
    U16 h;
    std::memcpy(&h, p, sizeof(h));
    const U64 w = __builtin_convertvector(h, U64);
    const U64 em = w & 0x7fff;
    V v = reinterpret_cast<V>(em << 42) * 0x1p1008;
    v = em >= 0x7c00 ? (em == 0x7c00 ? Splat(__builtin_huge_val()) : Splat(__builtin_nan(""))) : v;
    return reinterpret_cast<V>(reinterpret_cast<U64>(v) | ((w & 0x8000) << 48));
#endif
  }
};

constexpr size_t kSub = 512, kFold = 2048;

inline V LoadV(const double* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline size_t FormatSize(Format f) { return f == Format::kF64 ? 8 : f == Format::kF32 ? 4 : 2; }

// Decodes count (a multiple of kW, at most kSub) elements into buf and
// returns where the float64 values are (float64 input is used in place).
// probe accumulates the values: finite when they all are (a finite sum may
// overflow; that block then takes the general path, which is always right).
template <Format F>
const double* DecodeBlockAs(const uint8_t* src, size_t count, double* buf, V& probe) {
  V p = Splat(0.0);
  if constexpr (F == Format::kF64) {
    for (size_t k = 0; k < count; k += kW) p += LoadV(reinterpret_cast<const double*>(src) + k);
    probe += p;
    return reinterpret_cast<const double*>(src);
  } else {
    for (size_t k = 0; k < count; k += kW) {
      const V v = Decode<F>::Load(src + k * Decode<F>::kSize);
      p += v;
      std::memcpy(buf + k, &v, sizeof(v));
    }
    probe += p;
    return buf;
  }
}

inline const double* DecodeBlock(Format f, const uint8_t* src, size_t count, double* buf,
                                 V& probe) {
  switch (f) {
    case Format::kF32:
      return DecodeBlockAs<Format::kF32>(src, count, buf, probe);
    case Format::kF16:
      return DecodeBlockAs<Format::kF16>(src, count, buf, probe);
    case Format::kBF16:
      return DecodeBlockAs<Format::kBF16>(src, count, buf, probe);
    default:
      return DecodeBlockAs<Format::kF64>(src, count, buf, probe);
  }
}

// One element, for the tail of a call.
inline double DecodeOne(Format f, const uint8_t* src) {
  uint8_t b[8 * kW] = {};
  std::memcpy(b, src, FormatSize(f));
  V dummy = Splat(0.0);
  double out[kW];
  return DecodeBlock(f, b, kW, out, dummy)[0];
}

// Lane masks: AVX-512 mask registers, else vectors of -1 / 0 lanes. Counts
// are taken in general registers (the vector ports are the bottleneck).
#if defined(__AVX512F__)
using Mask = __mmask8;
inline Mask Lt(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
inline Mask Le(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
inline Mask Eq(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
inline Mask Ne(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_NEQ_UQ); }  // true for NaN
inline V Select(Mask m, V yes, V no) { return _mm512_mask_blend_pd(m, no, yes); }
inline uint64_t Pop(Mask m) { return static_cast<uint64_t>(__builtin_popcount(m)); }
constexpr Mask kAll = 0xff;
#else
using Mask = M;
inline Mask Lt(V a, V b) { return a < b; }
inline Mask Le(V a, V b) { return a <= b; }
inline Mask Eq(V a, V b) { return a == b; }
inline Mask Ne(V a, V b) { return a != b; }
inline V Select(Mask m, V yes, V no) { return m ? yes : no; }
inline uint64_t Pop(Mask m) {
#if defined(__AVX2__)
  return static_cast<uint64_t>(
      __builtin_popcount(_mm256_movemask_pd(reinterpret_cast<__m256d>(m))));
#else
  const int bits = _mm_movemask_pd(reinterpret_cast<__m128d>(m));
  return static_cast<uint64_t>((bits & 1) + (bits >> 1));
#endif
}
constexpr Mask kAll = M{} - 1;
#endif
inline Mask And(Mask a, Mask b) { return static_cast<Mask>(a & b); }
inline Mask Or(Mask a, Mask b) { return static_cast<Mask>(a | b); }
inline Mask Xor(Mask a, Mask b) { return static_cast<Mask>(a ^ b); }
inline Mask Not(Mask a) { return static_cast<Mask>(~a); }

// Counters: in general registers where a mask moves there cheaply (AVX2,
// AVX-512); on SSE2 as vector lanes that subtract the -1 of each mask.
#if defined(__AVX512F__) || defined(__AVX2__)
using Counter = uint64_t;
inline void Tally(Counter& c, Mask m) { c += Pop(m); }
inline uint64_t Total(Counter c) { return c; }
#else
using Counter = M;
inline void Tally(Counter& c, Mask m) { c -= m; }
inline uint64_t Total(Counter c) {
  uint64_t t = 0;
  for (size_t w = 0; w < kW; ++w) t += static_cast<uint64_t>(c[w]);
  return t;
}
#endif

// One group's partial results (kW lanes).
struct Acc {
  V s_ab, s_aa, s_bb, s_abs, s_sq, s_rel, s_a, s_b, s_a2, s_b2;
  V m_abs, m_rel, m_relnz, m_ulp, mx_a, mn_a, mx_b, mn_b;
  // Sums of squares: s_a2f / s_b2f in all-finite blocks (where they serve as
  // both the per-side and the pair sums), the other four elsewhere.
  V s_a2f, s_b2f;
  Counter c_fin, c_nan, c_inf, c_r3, c_r5, c_ulp, c_viol, c_zr, c_a, c_b;
};

// The eight logical lanes of field f, in lane order.
struct Lanes {
  double v[kLanes];
};
inline Lanes Gather(const Acc (&acc)[kGroups], V Acc::*f) {
  Lanes l;
  for (size_t g = 0; g < kGroups; ++g)
    for (size_t w = 0; w < kW; ++w) l.v[g * kW + w] = (acc[g].*f)[w];
  return l;
}
// Lane reductions in one fixed order.
inline double Sum(const Acc (&acc)[kGroups], V Acc::*f) {
  const Lanes l = Gather(acc, f);
  const double* v = l.v;
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}
inline double HMax(const Acc (&acc)[kGroups], V Acc::*f) {
  const Lanes l = Gather(acc, f);
  double m = l.v[0];
  for (size_t k = 1; k < kLanes; ++k) m = m < l.v[k] ? l.v[k] : m;
  return m;
}
inline double HMin(const Acc (&acc)[kGroups], V Acc::*f) {
  const Lanes l = Gather(acc, f);
  double m = l.v[0];
  for (size_t k = 1; k < kLanes; ++k) m = l.v[k] < m ? l.v[k] : m;
  return m;
}
inline uint64_t Count(const Acc (&acc)[kGroups], Counter Acc::*f) {
  uint64_t s = 0;
  for (size_t g = 0; g < kGroups; ++g) s += Total(acc[g].*f);
  return s;
}

// The constants of one call, kept in registers across a block.
struct Consts {
  V kMax, kEps, kZero, kOne, kInf, kNegInf, k1e3, k5e3, rtol, atol;
  V min_pow, top_pow, mant_pow, mant_pow_half;
  M kInvBias;
};

// Every quantity is computed for all lanes and masked, with no branches;
// comparisons give lane masks, which counters count. No value entering a
// max/min is NaN (non-finite inputs are masked to 0), so compare-and-select
// is exact. With kFinite the finiteness bookkeeping drops out; the caller
// counts those lanes.
template <bool kFinite>
__attribute__((always_inline)) inline void Step(Acc& c, const Consts& k, V a, V b) {
  const V kMax = k.kMax, kEps = k.kEps, kZero = k.kZero, kOne = k.kOne, kInf = k.kInf,
          kNegInf = k.kNegInf, k1e3 = k.k1e3, k5e3 = k.k5e3, rtol = k.rtol, atol = k.atol;
  const M kInvBias = k.kInvBias;
  const V min_pow = k.min_pow, top_pow = k.top_pow, mant_pow = k.mant_pow,
          mant_pow_half = k.mant_pow_half;
  const Mask fa = kFinite ? kAll : Le(Abs(a), kMax), fb = kFinite ? kAll : Le(Abs(b), kMax);
  const Mask both = And(fa, fb);
  if constexpr (!kFinite) {
    const Mask na = Ne(a, a), nb = Ne(b, b);
    Tally(c.c_nan, Xor(na, nb));
    // An infinity against anything else (NaN excluded).
    Tally(c.c_inf, And(And(Or(Not(Or(fa, na)), Not(Or(fb, nb))), Not(Or(na, nb))), Ne(a, b)));
    Tally(c.c_a, fa);
    Tally(c.c_b, fb);
    Tally(c.c_fin, both);
  }
  // Per-side statistics over finite values.
  const V ax = kFinite ? a : Select(fa, a, kZero), bx = kFinite ? b : Select(fb, b, kZero);
  c.s_a += ax;
  c.s_b += bx;
  const V aa = ax * ax, bb = bx * bx;
  if constexpr (kFinite) {
    c.s_a2f += aa;
    c.s_b2f += bb;
  } else {
    c.s_a2 += aa;
    c.s_b2 += bb;
  }
  c.mx_a = Max(c.mx_a, kFinite ? a : Select(fa, a, kNegInf));
  c.mn_a = Min(c.mn_a, kFinite ? a : Select(fa, a, kInf));
  c.mx_b = Max(c.mx_b, kFinite ? b : Select(fb, b, kNegInf));
  c.mn_b = Min(c.mn_b, kFinite ? b : Select(fb, b, kInf));
  // Pair metrics over positions where both are finite.
  const V x = kFinite ? a : Select(both, a, kZero), y = kFinite ? b : Select(both, b, kZero);
  const V d = x - y, ad = Abs(d);
  c.s_ab += x * y;
  if constexpr (!kFinite) {
    c.s_aa += x * x;
    c.s_bb += y * y;
  }
  c.s_abs += ad;
  c.s_sq += d * d;
  c.m_abs = Max(c.m_abs, ad);
  const Mask yz = Eq(y, kZero);
  const V yy = Select(yz, kEps, y), xx = Select(yz, x + kEps, x);
  const V rel = Abs((xx - yy) / yy);
  c.s_rel += rel;
  c.m_rel = Max(c.m_rel, rel);
  c.m_relnz = Max(c.m_relnz, Select(yz, kZero, rel));
  Tally(c.c_zr, And(yz, Ne(ad, kZero)));
  Tally(c.c_r3, And(both, Lt(rel, k1e3)));
  Tally(c.c_r5, And(both, Lt(rel, k5e3)));
  const V ey = reinterpret_cast<V>(reinterpret_cast<M>(y) & kExponentBits);
  const V eb_pow = Min(Max(ey, min_pow), top_pow);
  const V inv = reinterpret_cast<V>(kInvBias - reinterpret_cast<M>(eb_pow));
  const V ulp = ad * inv * Select(Lt(top_pow, ey), mant_pow_half, mant_pow);
  c.m_ulp = Max(c.m_ulp, ulp);
  Tally(c.c_ulp, Lt(kOne, ulp));
  // allclose: non-finite positions pass only when identical infinities.
  const Mask close = Le(ad, atol + rtol * Abs(y));
  Tally(c.c_viol, Not(kFinite ? close : Or(And(both, close), And(Not(both), Eq(a, b)))));
}

// Adds count (a multiple of kLanes) pairs from float64 buffers. The
// accumulators are copied into locals so that they live in registers.
template <bool kFinite>
void Block(Acc (&acc)[kGroups], const Consts& k, const double* a, const double* b, size_t count) {
  Acc c[kGroups];
  for (size_t g = 0; g < kGroups; ++g) c[g] = acc[g];
  for (size_t i = 0; i < count; i += kLanes) {
    // Group g takes lanes [g * kW, (g + 1) * kW) of each kLanes pairs.
    for (size_t g = 0; g < kGroups; ++g)
      Step<kFinite>(c[g], k, LoadV(a + i + g * kW), LoadV(b + i + g * kW));
  }
  for (size_t g = 0; g < kGroups; ++g) acc[g] = c[g];
}

// Adds args.n pairs to s. Lane partial sums are folded into s every kFold
// elements, counted from the start of the call.
void Run(const Args& args, Sums& s) {
  const uint8_t* out = static_cast<const uint8_t*>(args.out);
  const uint8_t* ref = static_cast<const uint8_t*>(args.ref);
  const size_t n = args.n;

  const V kMax = Splat(DBL_MAX), kEps = Splat(DBL_EPSILON), kZero = Splat(0.0), kOne = Splat(1.0);
  const V kInf = Splat(__builtin_huge_val()), kNegInf = -kInf;
  const V k1e3 = Splat(0.001), k5e3 = Splat(0.005);
  const V rtol = Splat(args.rtol), atol = Splat(args.atol);
  // ULP scale 2^(mant - eb), eb = max(floor(log2|B|), min_eb). 2^eb is the
  // reference's exponent bits alone, raised to 2^min_eb; its inverse 2^-eb is
  // built from the bits ((2046 - E) << 52 for biased exponent E), so
  // |N-B| * 2^-eb * 2^mant equals NumPy's |N-B| / 2^eb * 2^mant exactly (both
  // scalings are by powers of two). 2^-1023 is subnormal: for E = 2046 the
  // inverse of 2^1022 is used and the mantissa factor halved; |N-B| is then 0
  // or >= 2^970, so neither product rounds.
  auto pow2 = [](int64_t e) { return reinterpret_cast<V>(M{} + ((e + 1023) << 52)); };
  const V min_pow = pow2(args.ulp_min_exponent), top_pow = pow2(1022);
  const V mant_pow = pow2(args.ulp_mantissa_bits), mant_pow_half = pow2(args.ulp_mantissa_bits - 1);
  const M kInvBias = M{} + (2046ll << 52);
  const Consts consts{kMax, kEps, kZero,   kOne,    kInf,     kNegInf,       k1e3,    k5e3,
                      rtol, atol, min_pow, top_pow, mant_pow, mant_pow_half, kInvBias};

  Acc acc[kGroups];
  auto reset = [&] {
    for (Acc& c : acc) {
      c.s_ab = c.s_aa = c.s_bb = c.s_abs = c.s_sq = c.s_rel = c.s_a = c.s_b = c.s_a2 = c.s_b2 =
          c.s_a2f = c.s_b2f = kZero;
      c.m_abs = c.m_rel = c.m_relnz = c.m_ulp = kZero;
      c.mx_a = c.mx_b = kNegInf;
      c.mn_a = c.mn_b = kInf;
      c.c_fin = c.c_nan = c.c_inf = c.c_r3 = c.c_r5 = c.c_ulp = c.c_viol = c.c_zr = c.c_a = c.c_b =
          Counter{};
    }
  };
  auto fold = [&] {
    s.sum_ab += Sum(acc, &Acc::s_ab);
    s.sum_aa += Sum(acc, &Acc::s_a2f);
    s.sum_aa += Sum(acc, &Acc::s_aa);
    s.sum_bb += Sum(acc, &Acc::s_b2f);
    s.sum_bb += Sum(acc, &Acc::s_bb);
    s.sum_abs += Sum(acc, &Acc::s_abs);
    s.sum_sq += Sum(acc, &Acc::s_sq);
    s.sum_rel += Sum(acc, &Acc::s_rel);
    s.out_sum += Sum(acc, &Acc::s_a);
    s.ref_sum += Sum(acc, &Acc::s_b);
    s.out_sumsq += Sum(acc, &Acc::s_a2f);
    s.out_sumsq += Sum(acc, &Acc::s_a2);
    s.ref_sumsq += Sum(acc, &Acc::s_b2f);
    s.ref_sumsq += Sum(acc, &Acc::s_b2);
    s.max_abs = FMax(s.max_abs, HMax(acc, &Acc::m_abs));
    s.max_rel = FMax(s.max_rel, HMax(acc, &Acc::m_rel));
    s.max_rel_nonzero_ref = FMax(s.max_rel_nonzero_ref, HMax(acc, &Acc::m_relnz));
    s.max_ulp = FMax(s.max_ulp, HMax(acc, &Acc::m_ulp));
    s.out_max = FMax(s.out_max, HMax(acc, &Acc::mx_a));
    s.out_min = FMin(s.out_min, HMin(acc, &Acc::mn_a));
    s.ref_max = FMax(s.ref_max, HMax(acc, &Acc::mx_b));
    s.ref_min = FMin(s.ref_min, HMin(acc, &Acc::mn_b));
    s.finite += Count(acc, &Acc::c_fin);
    s.nan_mismatch += Count(acc, &Acc::c_nan);
    s.inf_mismatch += Count(acc, &Acc::c_inf);
    s.rel_1e3 += Count(acc, &Acc::c_r3);
    s.rel_5e3 += Count(acc, &Acc::c_r5);
    s.ulp_gt1 += Count(acc, &Acc::c_ulp);
    s.allclose_viol += Count(acc, &Acc::c_viol);
    s.zero_ref_mismatch += Count(acc, &Acc::c_zr);
    s.out_count += Count(acc, &Acc::c_a);
    s.ref_count += Count(acc, &Acc::c_b);
    reset();
  };
  reset();

  // Sub-blocks are decoded into float64 buffers that stay in L1 (float64
  // input is read in place); the decoder also probes for non-finite values.
  alignas(64) double buf_a[kSub], buf_b[kSub];
  const size_t so = FormatSize(args.out_format), sr = FormatSize(args.ref_format);
  const size_t full = n / kLanes * kLanes;
  uint64_t finite_lanes = 0;
  for (size_t i = 0; i < full;) {
    const size_t fold_end = i + kFold < full ? i + kFold : full;
    while (i < fold_end) {
      const size_t count = i + kSub < fold_end ? kSub : fold_end - i;
      V probe = kZero;
      const double* a = DecodeBlock(args.out_format, out + i * so, count, buf_a, probe);
      const double* b = DecodeBlock(args.ref_format, ref + i * sr, count, buf_b, probe);
      double p = 0;
      for (size_t w = 0; w < kW; ++w) p += probe[w];
      if (p - p == 0.0) {
        finite_lanes += count;
        Block<true>(acc, consts, a, b, count);
      } else {
        Block<false>(acc, consts, a, b, count);
      }
      i += count;
    }
    fold();
  }
  int64_t padding = 0;
  if (full < n) {
    // Padding lanes are NaN on both sides: they add nothing but one allclose
    // violation each (NaN is never equal), taken back below.
    double a[kLanes], b[kLanes];
    for (size_t k = 0; k < kLanes; ++k) a[k] = b[k] = __builtin_nan("");
    for (size_t k = 0; full + k < n; ++k) {
      a[k] = DecodeOne(args.out_format, out + (full + k) * so);
      b[k] = DecodeOne(args.ref_format, ref + (full + k) * sr);
    }
    Block<false>(acc, consts, a, b, kLanes);
    padding = static_cast<int64_t>(full + kLanes - n);
    fold();
  }
  s.finite += finite_lanes;
  s.out_count += finite_lanes;
  s.ref_count += finite_lanes;
  s.allclose_viol -= static_cast<uint64_t>(padding);
  s.n += n;
}

}  // namespace

void ANXIN_KERNEL_ENTRY(const Args& a, Sums& s) { Run(a, s); }

}  // namespace anxin::compare::kernel
