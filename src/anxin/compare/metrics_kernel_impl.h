// The metric kernel, included once by each metrics_kernel_<isa>.cc after it
// defines ANXIN_KERNEL_ENTRY (the entry point's name). Each includer is built
// for one instruction set; everything but the entry point has internal
// linkage, so code built for AVX-512 can never be linked into a caller that
// runs on a lesser CPU. For the same reason only builtins and the compiler's
// intrinsics (always inlined, never emitted on their own) are used here: an
// inline std:: template could be merged with another unit's copy.
//
// Conventions (tensor_metrics.h): error metrics over positions where both values
// are finite; NaN/Inf compared by position; msprobe's zero-reference rule for
// the relative error; ULP error in the output's format.
//
// How it is fast. Elements are read straight from the tensors in their own
// formats, 16 at a time, and widened to float64 in registers. The work is cut
// into blocks of kFold elements; each block runs in one of three modes:
//   kFast     every value finite, no reference zero (most blocks of most
//             dumps): no masks, no selects;
//   kZeros    every value finite, some reference zeros (ReLU outputs,
//             padding): adds msprobe's eps rule for those positions;
//   kGeneral  anything, NaN and Inf included.
// A block is tried in the mode that suited the block before it. The fast
// modes check their own preconditions from the block's sums: a NaN or an
// infinity makes a sum of squares non-finite, so does a value of magnitude
// 2^512 or more, and a zero reference makes the sum of relative errors
// non-finite (x/0). A block that fails is run again in the next mode. On a
// block where a mode's preconditions hold, every mode computes the same values
// with the same operations, so the choice never changes a result.
#include <immintrin.h>

#include <cfloat>
#include <cstring>
#include <type_traits>

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
// Elements per loop iteration: two passes over the eight lanes. Narrow
// formats are decoded into float32 registers of 2 * kW lanes (kGroups of
// them per iteration), which are exact for float32/float16/bfloat16 values.
constexpr size_t kChunk = 2 * kLanes;
// Lane partial results are folded into the scalar sums every kFold elements,
// counted from the start of a call; a block is kFold elements.
constexpr size_t kFold = 2048;
// Bytes ahead of the loads that each side is prefetched.
constexpr size_t kPrefetch = 2048;

using V = double __attribute__((vector_size(kW * sizeof(double))));
using M = int64_t __attribute__((vector_size(kW * sizeof(int64_t))));
using U64 = uint64_t __attribute__((vector_size(kW * sizeof(uint64_t))));
using F = float __attribute__((vector_size(2 * kW * sizeof(float))));
using UF = uint32_t __attribute__((vector_size(2 * kW * sizeof(uint32_t))));
using IF = int32_t __attribute__((vector_size(2 * kW * sizeof(int32_t))));
using HF = uint16_t __attribute__((vector_size(2 * kW * sizeof(uint16_t))));

constexpr int64_t kExponentBits = 0x7ff0000000000000ll;

inline V Splat(double x) { return V{} + x; }
inline F SplatF(float x) { return F{} + x; }
inline V Abs(V x) { return reinterpret_cast<V>(reinterpret_cast<M>(x) & 0x7fffffffffffffffll); }
// Same as std::max / std::min for operands that are not NaN (the
// instructions, so that the compiler never turns them into compare-and-blend).
// On AVX-512 the zero-masked forms with every lane selected: they compile to
// the plain instructions, and g++ 12 warns about the plain intrinsics'
// deliberately undefined pass-through operand (GCC bug 105593).
#if defined(__AVX512F__)
inline V Max(V a, V b) { return _mm512_maskz_max_pd(0xff, a, b); }
inline V Min(V a, V b) { return _mm512_maskz_min_pd(0xff, a, b); }
inline F MaxF(F a, F b) { return _mm512_maskz_max_ps(0xffff, a, b); }
inline F MinF(F a, F b) { return _mm512_maskz_min_ps(0xffff, a, b); }
#elif defined(__AVX2__)
inline V Max(V a, V b) { return _mm256_max_pd(a, b); }
inline V Min(V a, V b) { return _mm256_min_pd(a, b); }
inline F MaxF(F a, F b) { return _mm256_max_ps(a, b); }
inline F MinF(F a, F b) { return _mm256_min_ps(a, b); }
#else
inline V Max(V a, V b) { return _mm_max_pd(a, b); }
inline V Min(V a, V b) { return _mm_min_pd(a, b); }
inline F MaxF(F a, F b) { return _mm_max_ps(a, b); }
inline F MinF(F a, F b) { return _mm_min_ps(a, b); }
#endif
inline double FMax(double a, double b) { return __builtin_fmax(a, b); }
inline double FMin(double a, double b) { return __builtin_fmin(a, b); }

// a * b + c, rounded once, on every path (the baseline path has no FMA
// instruction and calls the C library's exact fma, which is slow but gives
// the same bits).
inline V Fma(V a, V b, V c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_pd(a, b, c);
#elif defined(__AVX2__)
  return _mm256_fmadd_pd(a, b, c);
#else
  V r;
  for (size_t w = 0; w < kW; ++w) r[w] = __builtin_fma(a[w], b[w], c[w]);
  return r;
#endif
}

inline size_t FormatSize(Format f) { return f == Format::kF64 ? 8 : f == Format::kF32 ? 4 : 2; }

// Loaders: 2 * kW elements of a narrow format at p into one float32
// register, exactly.
template <Format Fm>
struct Narrow;
template <>
struct Narrow<Format::kF32> {
  static F Load(const uint8_t* p) {
    F f;
    std::memcpy(&f, p, sizeof(f));
    return f;
  }
};
template <>
struct Narrow<Format::kBF16> {
  // bfloat16 is the top half of a float32.
  static F Load(const uint8_t* p) {
#if defined(__AVX512F__)
    // (One zero extension; the generic conversion below compiles to four.)
    const __m512i w = _mm512_maskz_cvtepu16_epi32(
        0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return reinterpret_cast<F>(reinterpret_cast<UF>(w) << 16);
#else
    HF h;
    std::memcpy(&h, p, sizeof(h));
    return reinterpret_cast<F>(__builtin_convertvector(h, UF) << 16);
#endif
  }
};
template <>
struct Narrow<Format::kF16> {
  static F Load(const uint8_t* p) {
#if defined(__AVX512F__)
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX2__)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    // Exponent and mantissa moved to the top of a float32 (a subnormal for
    // half subnormals) and scaled by 2^(127 - 15): exact for every finite
    // half. Exponent 31 is Inf (mantissa 0) or NaN.
    HF h;
    std::memcpy(&h, p, sizeof(h));
    const UF w = __builtin_convertvector(h, UF);
    const IF em = reinterpret_cast<IF>(w & 0x7fff);
    F v = reinterpret_cast<F>(em << 13) * 0x1p112f;
    v = em >= 0x7c00 ? (em == 0x7c00 ? SplatF(__builtin_huge_valf()) : SplatF(__builtin_nanf("")))
                     : v;
    return reinterpret_cast<F>(reinterpret_cast<UF>(v) | ((w & 0x8000) << 16));
#endif
  }
};

// The two float64 halves of a float32 register: lanes [0, kW) and [kW, 2kW).
inline void Widen(F f, V& lo, V& hi) {
#if defined(__AVX512F__)
  __m256 low;  // the register's low half (the cast intrinsic has the same warning)
  std::memcpy(&low, &f, sizeof(low));
  lo = _mm512_maskz_cvtps_pd(0xff, low);
  hi = _mm512_maskz_cvtps_pd(
      0xff, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(f), 1)));
#elif defined(__AVX2__)
  lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
  hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
#else
  lo = _mm_cvtps_pd(f);
  hi = _mm_cvtps_pd(_mm_movehl_ps(f, f));
#endif
}

inline V LoadV(const uint8_t* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// A side's running maximum and minimum: in float32 lanes for the narrow
// formats (exact for their values, half the instructions), float64 otherwise.
template <typename T>
struct ExtremesOf {
  static constexpr size_t kN = sizeof(T) / sizeof(T{}[0]);
  T mx, mn;
  void Reset() {
    mx = T{} - __builtin_huge_val();
    mn = T{} + __builtin_huge_val();
  }
  double Max() const {
    auto m = mx[0];
    for (size_t w = 1; w < kN; ++w) m = m < mx[w] ? mx[w] : m;
    return m;
  }
  double Min() const {
    auto m = mn[0];
    for (size_t w = 1; w < kN; ++w) m = mn[w] < m ? mn[w] : m;
    return m;
  }
};

template <Format Fm>
using Extremes = ExtremesOf<std::conditional_t<Fm == Format::kF64, V, F>>;

// Loads the chunk at p into v, tracking the extremes in mx and mn when
// kTrack (passed as plain values, so that they stay in registers).
template <Format Fm, bool kTrack, typename T>
__attribute__((always_inline)) inline void LoadChunk(const uint8_t* p, V (&v)[2 * kGroups], T& mx,
                                                     T& mn) {
  if constexpr (Fm == Format::kF64) {
    for (size_t j = 0; j < 2 * kGroups; ++j) {
      v[j] = LoadV(p + j * kW * 8);
      if constexpr (kTrack) {
        mx = Max(mx, v[j]);
        mn = Min(mn, v[j]);
      }
    }
  } else {
    constexpr size_t kSize = Fm == Format::kF32 ? 4 : 2;
    for (size_t r = 0; r < kGroups; ++r) {
      const uint8_t* q = p + r * 2 * kW * kSize;
      const F f = Narrow<Fm>::Load(q);
      if constexpr (kTrack) {
        mx = MaxF(mx, f);
        mn = MinF(mn, f);
      }
#if defined(__AVX512F__)
      if constexpr (Fm == Format::kF32) {
        // Converted straight from memory: no extraction of the upper half.
        v[2 * r] = _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(reinterpret_cast<const float*>(q)));
        v[2 * r + 1] =
            _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(reinterpret_cast<const float*>(q) + 8));
        continue;
      }
#endif
      Widen(f, v[2 * r], v[2 * r + 1]);
    }
  }
}

// Lane masks: AVX-512 mask registers, else vectors of -1 / 0 lanes.
#if defined(__AVX512F__)
using Mask = __mmask8;
inline Mask Lt(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
inline Mask Le(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
inline Mask Nle(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_NLE_UQ); }  // !(a <= b)
inline Mask Eq(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
inline Mask Ne(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_NEQ_UQ); }  // true for NaN
inline V Select(Mask m, V yes, V no) { return _mm512_mask_blend_pd(m, no, yes); }
#else
using Mask = M;
inline Mask Lt(V a, V b) { return a < b; }
inline Mask Le(V a, V b) { return a <= b; }
inline Mask Nle(V a, V b) { return ~(a <= b); }
inline Mask Eq(V a, V b) { return a == b; }
inline Mask Ne(V a, V b) { return a != b; }
inline V Select(Mask m, V yes, V no) { return m ? yes : no; }
#endif
inline Mask And(Mask a, Mask b) { return static_cast<Mask>(a & b); }
inline Mask Or(Mask a, Mask b) { return static_cast<Mask>(a | b); }
inline Mask Xor(Mask a, Mask b) { return static_cast<Mask>(a ^ b); }
inline Mask Not(Mask a) { return static_cast<Mask>(~a); }

// Per-lane counters of N events. On AVX-512 four counts share a 64-bit lane
// (16 bits each; a lane sees at most kFold / kLanes = 256 events per block)
// and a count is one masked add; elsewhere each count has its own vector
// that subtracts the -1 of each mask.
#if defined(__AVX512F__)
template <size_t N>
struct Tallies {
  __m512i v[(N + 3) / 4];
  void Reset() {
    for (auto& x : v) x = _mm512_setzero_si512();
  }
  template <size_t K>
  void Add(Mask m) {
    v[K / 4] = _mm512_mask_add_epi64(
        v[K / 4], m, v[K / 4], _mm512_set1_epi64(static_cast<long long>(1ull << (16 * (K % 4)))));
  }
  uint64_t Total(size_t k) const {
    const U64 x = reinterpret_cast<U64>(v[k / 4]) >> (16 * (k % 4)) & 0xffff;
    uint64_t t = 0;
    for (size_t w = 0; w < kW; ++w) t += x[w];
    return t;
  }
};
#else
template <size_t N>
struct Tallies {
  M v[N];
  void Reset() {
    for (auto& x : v) x = M{};
  }
  template <size_t K>
  void Add(Mask m) {
    v[K] -= m;
  }
  uint64_t Total(size_t k) const {
    uint64_t t = 0;
    for (size_t w = 0; w < kW; ++w) t += static_cast<uint64_t>(v[k][w]);
    return t;
  }
};
#endif

enum class Mode : uint8_t { kFast, kZeros, kGeneral };

// Counter indices.
enum : size_t { kR3, kR5, kUlp, kViol, kZr, kYz, kFin, kNan, kInf, kA, kB, kCounters };
constexpr size_t CountersFor(Mode m) {
  return m == Mode::kFast ? 4 : m == Mode::kZeros ? 6 : size_t{kCounters};
}

// The constants of one call.
struct Consts {
  V rtol, atol;
  // ULP scale 2^(mant - eb), eb = max(floor(log2|B|), min_eb). 2^eb is the
  // reference's exponent bits alone, raised to 2^min_eb (min_pow) and, for
  // the wide form, capped at 2^1022 (cap); the scale is built from bits
  // (inv_bias - bits of 2^eb) and multiplied by a power of two after:
  //   narrow (mant - min_eb <= 1023, every format but float64):
  //     inv_bias = (mant + 2046) << 52 gives 2^(mant - eb) at once; factor 1;
  //   wide (float64): inv_bias = 2046 << 52 gives 2^-eb, factor 2^mant;
  //     for eb = 1023 (2^-1023 is subnormal) the cap gives 2^-1022 and the
  //     factor is halved.
  // Multiplications by powers of two are exact, so |N-B| * scale * factor
  // equals NumPy's ldexp(|N-B|, mant - eb).
  V min_pow, cap, factor, factor_half;
  U64 inv_bias;  // unsigned: (mant + 2046) << 52 does not fit in int64
  bool general_only;
};

// One group's partial results (kW lanes).
template <Mode kMode>
struct Acc {
  V s_a, s_b, s_aa, s_bb, s_ab, s_abs, s_sq, s_rel;
  V m_abs, m_rel, m_ulp;
  V m_relnz;                 // kZeros, kGeneral
  V s_a2, s_b2;              // kGeneral: per-side sums of squares (finite values)
  V mx_a, mn_a, mx_b, mn_b;  // kGeneral: per-side extremes (finite values)
  Tallies<CountersFor(kMode)> c;
  void Reset() {
    s_a = s_b = s_aa = s_bb = s_ab = s_abs = s_sq = s_rel = s_a2 = s_b2 = Splat(0.0);
    m_abs = m_rel = m_ulp = m_relnz = Splat(0.0);
    mx_a = mx_b = Splat(-__builtin_huge_val());
    mn_a = mn_b = Splat(__builtin_huge_val());
    c.Reset();
  }
};

// ULP error of |N-B| = ad against reference magnitude ay (finite).
template <Mode kMode, bool kNarrowUlp>
inline V Ulp(const Consts& k, V ad, V ay) {
  const V ey = reinterpret_cast<V>(reinterpret_cast<M>(ay) & kExponentBits);
  if constexpr (kMode != Mode::kGeneral) {
    // No reference of magnitude 2^512 or more here, so no cap.
    const V eb = Max(ey, k.min_pow);
    const V scale = reinterpret_cast<V>(k.inv_bias - reinterpret_cast<U64>(eb));
    if constexpr (kNarrowUlp) return ad * scale;
    return ad * scale * k.factor;
  } else {
    const V eb = Min(Max(ey, k.min_pow), k.cap);
    const V scale = reinterpret_cast<V>(k.inv_bias - reinterpret_cast<U64>(eb));
    return ad * scale * Select(Lt(k.cap, ey), k.factor_half, k.factor);
  }
}

// Threshold counts the fast mode may defer (a bit set per group): the
// thousandth ratios (rel < 0.001, rel < 0.005), and the ULP and allclose
// counts. A deferred count keeps the values it needs for the block and is
// settled after it from the block's extremes, or counted from the kept
// values when the extremes leave it open (CountKept). Deferring saves the
// comparisons when a block is clearly on one side of its thresholds (a close
// match) and costs the stores; which groups are deferred follows what the
// previous block needed.
enum : unsigned { kLazyRel = 1, kLazyTol = 2, kLazyAll = 3 };
struct Kept {
  double rel[kFold], ulp[kFold], ad[kFold], ay[kFold];
};

// Adds one kW-lane pair of vectors. Every quantity is computed for all lanes
// and masked, with no branches; comparisons give lane masks, which counters
// count. No value entering a max/min is NaN in a block that is kept
// (non-finite inputs are masked to 0 in kGeneral), so compare-and-select is
// exact.
template <Mode kMode, unsigned kLazy, bool kNarrowUlp>
__attribute__((always_inline)) inline void Step(Acc<kMode>& c, const Consts& k, V a, V b,
                                                Kept* kept, size_t at) {
  constexpr bool kFinite = kMode != Mode::kGeneral;
  Mask both{};
  V x = a, y = b;
  if constexpr (!kFinite) {
    const V kMax = Splat(DBL_MAX), kZero = Splat(0.0);
    const Mask fa = Le(Abs(a), kMax), fb = Le(Abs(b), kMax);
    both = And(fa, fb);
    const Mask na = Ne(a, a), nb = Ne(b, b);
    c.c.template Add<kNan>(Xor(na, nb));
    // An infinity against anything else (NaN excluded).
    c.c.template Add<kInf>(
        And(And(Or(Not(Or(fa, na)), Not(Or(fb, nb))), Not(Or(na, nb))), Ne(a, b)));
    c.c.template Add<kA>(fa);
    c.c.template Add<kB>(fb);
    c.c.template Add<kFin>(both);
    // Per-side statistics over finite values.
    const V ax = Select(fa, a, kZero), bx = Select(fb, b, kZero);
    c.s_a += ax;
    c.s_b += bx;
    c.s_a2 = Fma(ax, ax, c.s_a2);
    c.s_b2 = Fma(bx, bx, c.s_b2);
    const V kInf = Splat(__builtin_huge_val());
    c.mx_a = Max(c.mx_a, Select(fa, a, -kInf));
    c.mn_a = Min(c.mn_a, Select(fa, a, kInf));
    c.mx_b = Max(c.mx_b, Select(fb, b, -kInf));
    c.mn_b = Min(c.mn_b, Select(fb, b, kInf));
    // Pair metrics over positions where both are finite.
    x = Select(both, a, kZero);
    y = Select(both, b, kZero);
  } else {
    // Per-side sums (the extremes are tracked by the loader); the squares
    // double as the pair sums below.
    c.s_a += a;
    c.s_b += b;
  }
  const V d = x - y, ad = Abs(d), ay = Abs(y);
  c.s_ab = Fma(x, y, c.s_ab);
  c.s_aa = Fma(x, x, c.s_aa);
  c.s_bb = Fma(y, y, c.s_bb);
  c.s_abs += ad;
  c.s_sq = Fma(d, d, c.s_sq);
  c.m_abs = Max(c.m_abs, ad);
  V rel;
  if constexpr (kMode == Mode::kFast) {
    // |(N-B)/B| is |N-B|/|B|: IEEE division rounds the magnitude alike.
    rel = ad / ay;
  } else {
    // msprobe: B == 0 becomes eps and N becomes N + eps.
    const V kZero = Splat(0.0), kEps = Splat(DBL_EPSILON);
    const Mask yz = Eq(y, kZero);
    const V num = Select(yz, Abs((x + kEps) - kEps), ad);
    rel = num / Select(yz, kEps, ay);
    c.m_relnz = Max(c.m_relnz, Select(yz, kZero, rel));
    c.c.template Add<kZr>(And(yz, Ne(ad, kZero)));
    if constexpr (kFinite) {
      c.c.template Add<kYz>(yz);
    } else {
      c.c.template Add<kYz>(And(both, yz));
    }
  }
  c.s_rel += rel;
  c.m_rel = Max(c.m_rel, rel);
  const V ulp = Ulp<kMode, kNarrowUlp>(k, ad, ay);
  c.m_ulp = Max(c.m_ulp, ulp);
  if constexpr ((kLazy & kLazyRel) != 0) {
    std::memcpy(kept->rel + at, &rel, sizeof(V));
  } else if constexpr (kFinite) {
    c.c.template Add<kR3>(Lt(rel, Splat(0.001)));
    c.c.template Add<kR5>(Lt(rel, Splat(0.005)));
  } else {
    c.c.template Add<kR3>(And(both, Lt(rel, Splat(0.001))));
    c.c.template Add<kR5>(And(both, Lt(rel, Splat(0.005))));
  }
  if constexpr ((kLazy & kLazyTol) != 0) {
    std::memcpy(kept->ulp + at, &ulp, sizeof(V));
    std::memcpy(kept->ad + at, &ad, sizeof(V));
    std::memcpy(kept->ay + at, &ay, sizeof(V));
  } else {
    c.c.template Add<kUlp>(Lt(Splat(1.0), ulp));
    // allclose as NumPy computes it (no fused multiply-add); non-finite
    // positions pass only when identical infinities.
    const V thr = k.atol + k.rtol * ay;
    if constexpr (kFinite) {
      c.c.template Add<kViol>(Nle(ad, thr));
    } else {
      c.c.template Add<kViol>(Not(Or(And(both, Le(ad, thr)), And(Not(both), Eq(a, b)))));
    }
  }
}

// Settles the deferred counts of a fast block of n elements. Each is settled
// from the block's extremes when they put every element on one side, and
// otherwise counted from the kept values:
//   rel < t for all    when max rel < t;
//   ulp > 1 for none   when max ulp <= 1;
//   no allclose violation when max |N-B| <= atol (atol + rtol|B| >= atol as
//     rounded), or when max rel <= rtol (1 - 2^-50) and atol >= 2^-1022: then
//     |N-B| <= rel (1 + 2^-53) |B| stays below atol + rtol|B| after both
//     roundings of the threshold.
struct Counts {
  uint64_t r3, r5, ulp, viol;
};
inline uint64_t CountIf(const double* v, size_t n, double t, bool less) {
  M c = M{};
  for (size_t i = 0; i < n; i += kW) {
    V x;
    std::memcpy(&x, v + i, sizeof(x));
    c -= less ? (x < t) : (t < x);
  }
  uint64_t total = 0;
  for (size_t w = 0; w < kW; ++w) total += static_cast<uint64_t>(c[w]);
  return total;
}
// Whether the extremes settle each group.
inline bool RelSettled(double m_rel) { return m_rel < 0.001; }
inline bool UlpSettled(double m_ulp) { return m_ulp <= 1.0; }
inline bool ViolSettled(const Consts& k, double m_rel, double m_abs) {
  const double rtol = k.rtol[0], atol = k.atol[0];
  return m_abs <= atol || (atol >= 0x1p-1022 && m_rel <= rtol * (1 - 0x1p-50));
}
// Returns whether anything had to be counted.
inline bool CountKept(unsigned lazy, const Kept& kept, size_t n, const Consts& k, double m_rel,
                      double m_ulp, double m_abs, Counts& c) {
  bool counted = false;
  if (lazy & kLazyRel) {
    counted |= !(m_rel < 0.005);
    c.r3 = m_rel < 0.001 ? n : CountIf(kept.rel, n, 0.001, true);
    c.r5 = m_rel < 0.005 ? n : CountIf(kept.rel, n, 0.005, true);
  }
  if (!(lazy & kLazyTol)) return counted;
  counted |= !UlpSettled(m_ulp);
  c.ulp = UlpSettled(m_ulp) ? 0 : CountIf(kept.ulp, n, 1.0, false);
  if (ViolSettled(k, m_rel, m_abs)) {
    c.viol = 0;
  } else {
    counted = true;
    M v = M{};
    for (size_t i = 0; i < n; i += kW) {
      V ad, ay;
      std::memcpy(&ad, kept.ad + i, sizeof(ad));
      std::memcpy(&ay, kept.ay + i, sizeof(ay));
      v -= ~(ad <= k.atol + k.rtol * ay);
    }
    c.viol = 0;
    for (size_t w = 0; w < kW; ++w) c.viol += static_cast<uint64_t>(v[w]);
  }
  return counted;
}

// Lane reductions in one fixed order.
template <Mode kMode>
inline double Sum(const Acc<kMode> (&acc)[kGroups], V Acc<kMode>::*f) {
  double v[kLanes];
  for (size_t g = 0; g < kGroups; ++g)
    for (size_t w = 0; w < kW; ++w) v[g * kW + w] = (acc[g].*f)[w];
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}
template <Mode kMode>
inline double HMax(const Acc<kMode> (&acc)[kGroups], V Acc<kMode>::*f) {
  double m = (acc[0].*f)[0];
  for (size_t g = 0; g < kGroups; ++g)
    for (size_t w = 0; w < kW; ++w) m = m < (acc[g].*f)[w] ? (acc[g].*f)[w] : m;
  return m;
}
template <Mode kMode>
inline double HMin(const Acc<kMode> (&acc)[kGroups], V Acc<kMode>::*f) {
  double m = (acc[0].*f)[0];
  for (size_t g = 0; g < kGroups; ++g)
    for (size_t w = 0; w < kW; ++w) m = (acc[g].*f)[w] < m ? (acc[g].*f)[w] : m;
  return m;
}
template <Mode kMode>
inline uint64_t Count(const Acc<kMode> (&acc)[kGroups], size_t k) {
  uint64_t s = 0;
  for (size_t g = 0; g < kGroups; ++g) s += acc[g].c.Total(k);
  return s;
}

inline bool Finite(double x) { return x - x == 0.0; }

// How the next block is tried: its mode and, in kFast, the deferred groups.
struct State {
  Mode mode = Mode::kFast;
  unsigned lazy = kLazyAll;
};

// Runs one block of count elements (a multiple of kChunk) in kMode. Returns
// false, adding nothing, when the block breaks the mode's preconditions;
// otherwise adds the block to s and sets next for the block after.
template <Mode kMode, unsigned kLazy, Format FO, Format FR>
bool RunBlock(const uint8_t* out, const uint8_t* ref, size_t count, const Consts& k, Sums& s,
              State& next, Kept* kept) {
  constexpr bool kFinite = kMode != Mode::kGeneral;
  constexpr bool kNarrowUlp = FO != Format::kF64;
  constexpr size_t so = FO == Format::kF64 ? 8 : FO == Format::kF32 ? 4 : 2;
  constexpr size_t sr = FR == Format::kF64 ? 8 : FR == Format::kF32 ? 4 : 2;
  Acc<kMode> acc[kGroups];
  for (auto& c : acc) c.Reset();
  Extremes<FO> ea;
  Extremes<FR> eb;
  ea.Reset();
  eb.Reset();
  auto mxa = ea.mx, mna = ea.mn;
  auto mxb = eb.mx, mnb = eb.mn;
  for (size_t i = 0; i < count; i += kChunk) {
    // The hardware prefetcher alone falls behind while the loop is busy
    // (measured: 1.6 instead of 0.9 ns per float16 pair from memory).
    for (size_t line = 0; line < kChunk * so; line += 64)
      __builtin_prefetch(out + i * so + kPrefetch + line);
    for (size_t line = 0; line < kChunk * sr; line += 64)
      __builtin_prefetch(ref + i * sr + kPrefetch + line);
    V a[2 * kGroups], b[2 * kGroups];
    LoadChunk<FO, kFinite>(out + i * so, a, mxa, mna);
    LoadChunk<FR, kFinite>(ref + i * sr, b, mxb, mnb);
    // Group g takes lanes [g * kW, (g + 1) * kW) of each eight elements.
    for (size_t j = 0; j < 2 * kGroups; ++j)
      Step<kMode, kLazy, kNarrowUlp>(acc[j % kGroups], k, a[j], b[j], kept, i + j * kW);
  }
  ea.mx = mxa, ea.mn = mna, eb.mx = mxb, eb.mn = mnb;
  const double sum_aa = Sum(acc, &Acc<kMode>::s_aa), sum_bb = Sum(acc, &Acc<kMode>::s_bb);
  const double sum_rel = Sum(acc, &Acc<kMode>::s_rel);
  if constexpr (kMode == Mode::kFast) {
    if (!Finite(sum_aa + sum_bb + sum_rel)) {
      // Finite squares: only zero references (or a relative error past
      // DBL_MAX, which the zeros mode handles the same way).
      next.mode = Finite(sum_aa + sum_bb) ? Mode::kZeros : Mode::kGeneral;
      return false;
    }
  } else if constexpr (kMode == Mode::kZeros) {
    if (!Finite(sum_aa + sum_bb)) return false;
  }
  s.sum_ab += Sum(acc, &Acc<kMode>::s_ab);
  s.sum_aa += sum_aa;
  s.sum_bb += sum_bb;
  s.sum_abs += Sum(acc, &Acc<kMode>::s_abs);
  s.sum_sq += Sum(acc, &Acc<kMode>::s_sq);
  s.sum_rel += sum_rel;
  s.out_sum += Sum(acc, &Acc<kMode>::s_a);
  s.ref_sum += Sum(acc, &Acc<kMode>::s_b);
  const double m_abs = HMax(acc, &Acc<kMode>::m_abs), m_rel = HMax(acc, &Acc<kMode>::m_rel);
  const double m_ulp = HMax(acc, &Acc<kMode>::m_ulp);
  s.max_abs = FMax(s.max_abs, m_abs);
  s.max_rel = FMax(s.max_rel, m_rel);
  s.max_ulp = FMax(s.max_ulp, m_ulp);
  Counts c{Count(acc, kR3), Count(acc, kR5), Count(acc, kUlp), Count(acc, kViol)};
  if constexpr (kLazy != 0) {
    if (CountKept(kLazy, *kept, count, k, m_rel, m_ulp, m_abs, c)) ++s.blocks_recounted;
  }
  ++(kMode == Mode::kFast    ? s.blocks_fast
     : kMode == Mode::kZeros ? s.blocks_zeros
                             : s.blocks_general);
  s.rel_1e3 += c.r3;
  s.rel_5e3 += c.r5;
  s.ulp_gt1 += c.ulp;
  s.allclose_viol += c.viol;
  uint64_t zeros = 0;
  if constexpr (kMode == Mode::kFast) {
    s.max_rel_nonzero_ref = FMax(s.max_rel_nonzero_ref, m_rel);
  } else {
    s.max_rel_nonzero_ref = FMax(s.max_rel_nonzero_ref, HMax(acc, &Acc<kMode>::m_relnz));
    s.zero_ref_mismatch += Count(acc, kZr);
    zeros = Count(acc, kYz);
  }
  if constexpr (kFinite) {
    s.out_sumsq += sum_aa;
    s.ref_sumsq += sum_bb;
    s.out_max = FMax(s.out_max, ea.Max());
    s.out_min = FMin(s.out_min, ea.Min());
    s.ref_max = FMax(s.ref_max, eb.Max());
    s.ref_min = FMin(s.ref_min, eb.Min());
    s.finite += count;
    s.out_count += count;
    s.ref_count += count;
    next.mode = zeros ? Mode::kZeros : Mode::kFast;
    // Defer next time what this block's extremes settled.
    next.lazy = (RelSettled(m_rel) ? kLazyRel : 0u) |
                (UlpSettled(m_ulp) && ViolSettled(k, m_rel, m_abs) ? kLazyTol : 0u);
  } else {
    s.out_sumsq += Sum(acc, &Acc<kMode>::s_a2);
    s.ref_sumsq += Sum(acc, &Acc<kMode>::s_b2);
    s.out_max = FMax(s.out_max, HMax(acc, &Acc<kMode>::mx_a));
    s.out_min = FMin(s.out_min, HMin(acc, &Acc<kMode>::mn_a));
    s.ref_max = FMax(s.ref_max, HMax(acc, &Acc<kMode>::mx_b));
    s.ref_min = FMin(s.ref_min, HMin(acc, &Acc<kMode>::mn_b));
    const uint64_t fin = Count(acc, kFin);
    s.finite += fin;
    s.nan_mismatch += Count(acc, kNan);
    s.inf_mismatch += Count(acc, kInf);
    s.out_count += Count(acc, kA);
    s.ref_count += Count(acc, kB);
    next.mode = fin < count ? Mode::kGeneral : zeros ? Mode::kZeros : Mode::kFast;
    next.lazy = kLazyAll;
  }
  return true;
}

// Runs a block in the suggested mode, falling back as far as needed.
template <Format FO, Format FR>
void RunAdaptive(const uint8_t* out, const uint8_t* ref, size_t count, const Consts& k, Sums& s,
                 State& st, Kept* kept) {
  if (k.general_only) st.mode = Mode::kGeneral;
  if (st.mode == Mode::kFast) {
    bool done;
    switch (st.lazy) {
      case 0:
        done = RunBlock<Mode::kFast, 0, FO, FR>(out, ref, count, k, s, st, kept);
        break;
      case kLazyRel:
        done = RunBlock<Mode::kFast, kLazyRel, FO, FR>(out, ref, count, k, s, st, kept);
        break;
      case kLazyTol:
        done = RunBlock<Mode::kFast, kLazyTol, FO, FR>(out, ref, count, k, s, st, kept);
        break;
      default:
        done = RunBlock<Mode::kFast, kLazyAll, FO, FR>(out, ref, count, k, s, st, kept);
        break;
    }
    if (done) return;
    ++s.blocks_retried;
  }
  if (st.mode != Mode::kGeneral) {
    if (RunBlock<Mode::kZeros, 0, FO, FR>(out, ref, count, k, s, st, kept)) return;
    ++s.blocks_retried;
  }
  RunBlock<Mode::kGeneral, 0, FO, FR>(out, ref, count, k, s, st, kept);
}

template <Format FO, Format FR>
void RunFormats(const uint8_t* out, const uint8_t* ref, size_t full, const Consts& k, Sums& s,
                Kept* kept) {
  constexpr size_t so = FO == Format::kF64 ? 8 : FO == Format::kF32 ? 4 : 2;
  constexpr size_t sr = FR == Format::kF64 ? 8 : FR == Format::kF32 ? 4 : 2;
  State st;
  for (size_t i = 0; i < full; i += kFold) {
    const size_t count = i + kFold < full ? kFold : full - i;
    RunAdaptive<FO, FR>(out + i * so, ref + i * sr, count, k, s, st, kept);
  }
}

template <Format FO>
void DispatchRef(Format fr, const uint8_t* out, const uint8_t* ref, size_t full, const Consts& k,
                 Sums& s, Kept* kept) {
  switch (fr) {
    case Format::kF32:
      return RunFormats<FO, Format::kF32>(out, ref, full, k, s, kept);
    case Format::kF16:
      return RunFormats<FO, Format::kF16>(out, ref, full, k, s, kept);
    case Format::kBF16:
      return RunFormats<FO, Format::kBF16>(out, ref, full, k, s, kept);
    default:
      return RunFormats<FO, Format::kF64>(out, ref, full, k, s, kept);
  }
}

// One element of any format, as float64 (for the tail of a call).
inline double DecodeOne(Format f, const uint8_t* src) {
  if (f == Format::kF64) {
    double d;
    std::memcpy(&d, src, 8);
    return d;
  }
  uint8_t b[2 * kW * 4] = {};
  std::memcpy(b, src, FormatSize(f));
  F v;
  switch (f) {
    case Format::kF32:
      v = Narrow<Format::kF32>::Load(b);
      break;
    case Format::kF16:
      v = Narrow<Format::kF16>::Load(b);
      break;
    default:
      v = Narrow<Format::kBF16>::Load(b);
      break;
  }
  return v[0];
}

// Adds args.n pairs to s.
void Run(const Args& args, Sums& s) {
  const uint8_t* out = static_cast<const uint8_t*>(args.out);
  const uint8_t* ref = static_cast<const uint8_t*>(args.ref);
  const size_t n = args.n;
  auto pow2 = [](int64_t e) { return reinterpret_cast<V>(M{} + ((e + 1023) << 52)); };
  Consts k;
  k.rtol = Splat(args.rtol);
  k.atol = Splat(args.atol);
  k.min_pow = pow2(args.ulp_min_exponent);
  k.general_only = args.general_only;
  if (NarrowUlp(args.ulp_mantissa_bits, args.ulp_min_exponent)) {
    k.inv_bias = U64{} + (static_cast<uint64_t>(2046 + args.ulp_mantissa_bits) << 52);
    k.cap = pow2(1023);
    k.factor = k.factor_half = Splat(1.0);
  } else {
    k.inv_bias = U64{} + (uint64_t{2046} << 52);
    k.cap = pow2(1022);
    k.factor = pow2(args.ulp_mantissa_bits);
    k.factor_half = pow2(args.ulp_mantissa_bits - 1);
  }
  const Format fr = args.ref_format;
  const size_t full = n / kChunk * kChunk;
  if (full > 0) {
    // The fast mode's kept values (64 KiB, on this thread's stack).
    alignas(64) Kept kept_buffer;
    Kept* kept = &kept_buffer;
    switch (args.out_format) {
      case Format::kF32:
        DispatchRef<Format::kF32>(fr, out, ref, full, k, s, kept);
        break;
      case Format::kF16:
        DispatchRef<Format::kF16>(fr, out, ref, full, k, s, kept);
        break;
      case Format::kBF16:
        DispatchRef<Format::kBF16>(fr, out, ref, full, k, s, kept);
        break;
      default:
        DispatchRef<Format::kF64>(fr, out, ref, full, k, s, kept);
        break;
    }
  }
  int64_t padding = 0;
  if (full < n) {
    // Padding lanes are NaN on both sides: they add nothing but one allclose
    // violation each (NaN is never equal), taken back below.
    double a[kChunk], b[kChunk];
    for (size_t e = 0; e < kChunk; ++e) a[e] = b[e] = __builtin_nan("");
    for (size_t e = 0; full + e < n; ++e) {
      a[e] = DecodeOne(args.out_format, out + (full + e) * FormatSize(args.out_format));
      b[e] = DecodeOne(args.ref_format, ref + (full + e) * FormatSize(args.ref_format));
    }
    State st;
    RunBlock<Mode::kGeneral, 0, Format::kF64, Format::kF64>(reinterpret_cast<const uint8_t*>(a),
                                                            reinterpret_cast<const uint8_t*>(b),
                                                            kChunk, k, s, st, nullptr);
    --s.blocks_general;  // a tail, not a block: not in the statistics
    padding = static_cast<int64_t>(full + kChunk - n);
  }
  s.allclose_viol -= static_cast<uint64_t>(padding);
  s.n += n;
}

}  // namespace

void ANXIN_KERNEL_ENTRY(const Args& a, Sums& s) { Run(a, s); }

}  // namespace anxin::compare::kernel
