// Internal: the fused attention kernel, written once over GCC vector types of
// kW float lanes and compiled once per instruction set. The including file
// defines ANXIN_ATTN_NS (its namespace), ANXIN_ATTN_WIDTH (lanes: 4 for the
// x86-64 baseline's SSE2, 8 for AVX2, 16 for AVX-512) and
// ANXIN_ATTN_ENTRY (the KernelEntry function), with its flags from CMake.
//
// Forward: each worker takes a contiguous run of (batch, head, query block)
// tasks. For a block of kBr queries it walks K and V once in blocks of kBc
// keys: S = Q K^T (register-blocked 4 x 2 vectors), the masks, the online
// softmax (running max m and sum l per row, rescaling O when m grows), then
// O += P V. K is packed transposed per block and V as float32 once per
// (batch, kv head) a worker meets, so the inner loops read float32 rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "anxin/kernels/attention_kernel.h"
#include "anxin/kernels/rounding.h"

namespace anxin::kernels::internal::ANXIN_ATTN_NS {
namespace {

constexpr int kW = ANXIN_ATTN_WIDTH;
typedef float V __attribute__((vector_size(kW * 4)));
typedef int32_t VI __attribute__((vector_size(kW * 4)));

constexpr int kBr = 64;  // queries per block
constexpr int kBc = 64;  // keys per block
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
inline V Splat(float x) { return V{} + x; }
inline float HSum(V v) {
  float s = 0;
  for (int i = 0; i < kW; ++i) s += v[i];
  return s;
}
inline float HMax(V v) {
  float s = v[0];
  for (int i = 1; i < kW; ++i) s = std::max(s, v[i]);
  return s;
}

// 2^x for x <= 0 (and -inf): round to n, 2^f by a degree-6 polynomial on
// [-0.5, 0.5] (relative error ~1.2e-7), times 2^n from the exponent bits.
// Below -126 the result is 0.
inline V Exp2(V x) {
  const V lo = Splat(-126.0f);
  V xc = x < lo ? lo : x;
  VI n = __builtin_convertvector(xc + 128.5f, VI) - 128;
  V f = xc - __builtin_convertvector(n, V);
  V p = Splat(1.5403530393381606e-4f);
  p = p * f + 1.3333558146428443e-3f;
  p = p * f + 9.618129107628477e-3f;
  p = p * f + 5.550410866482158e-2f;
  p = p * f + 2.402265069591007e-1f;
  p = p * f + 6.931471805599453e-1f;
  p = p * f + 1.0f;
  V scale = (V)((n + 127) << 23);
  V r = p * scale;
  return x < lo ? V{} : r;
}

// n elements of type t at src (element offset) -> float32 dst, times mul.
inline void LoadRow(ElementType t, const void* src, size_t offset, int n, float mul, float* dst) {
  switch (t) {
    case ElementType::kFloat32: {
      const float* s = static_cast<const float*>(src) + offset;
      for (int i = 0; i < n; ++i) dst[i] = s[i] * mul;
      return;
    }
    case ElementType::kBFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      for (int i = 0; i < n; ++i) {
        uint32_t bits = static_cast<uint32_t>(s[i]) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        dst[i] = f * mul;
      }
      return;
    }
    case ElementType::kFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      int i = 0;
#if defined(__F16C__)
      for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(f, _mm256_set1_ps(mul)));
      }
#endif
      for (; i < n; ++i) dst[i] = HalfBitsToFloat(s[i]) * mul;
      return;
    }
  }
}

inline void StoreRow(ElementType t, const float* src, int n, void* dst, size_t offset) {
  switch (t) {
    case ElementType::kFloat32:
      std::memcpy(static_cast<float*>(dst) + offset, src, static_cast<size_t>(n) * 4);
      return;
    case ElementType::kBFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      for (int i = 0; i < n; ++i) d[i] = FloatToBFloat16Bits(src[i]);
      return;
    }
    case ElementType::kFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      for (int i = 0; i < n; ++i) d[i] = FloatToHalfBits(src[i]);
      return;
    }
  }
}

// One worker's buffers, sized for one (batch, kv head) of K and V.
struct Scratch {
  std::vector<float> kt;  // [kv blocks][D][kBc]: K transposed per block, zero past kv_len
  std::vector<float> vp;  // [kv blocks * kBc][D], zero past kv_len
  std::vector<float> qs;  // [kBr][D]
  std::vector<float> s;   // [kBr][kBc] scores, then probabilities
  std::vector<float> o;   // [kBr][D]
  std::vector<float> m, l;
  long packed = -1;  // b * kv_heads + kvh now in kt / vp
};

void PackKv(const AttentionArgs& a, const void* k, const void* v, int b, int kvh, Scratch& sc) {
  const int d = a.shape.head_dim, lk = a.shape.kv_len;
  const int nkb = (lk + kBc - 1) / kBc;
  sc.kt.assign(static_cast<size_t>(nkb) * d * kBc, 0.0f);
  sc.vp.assign(static_cast<size_t>(nkb) * kBc * d, 0.0f);
  std::vector<float> row(static_cast<size_t>(d));
  const size_t base = (static_cast<size_t>(b) * a.shape.kv_heads + kvh) * lk * d;
  for (int j = 0; j < lk; ++j) {
    LoadRow(a.dtype, k, base + static_cast<size_t>(j) * d, d, 1.0f, row.data());
    float* blk = sc.kt.data() + static_cast<size_t>(j / kBc) * d * kBc;
    for (int x = 0; x < d; ++x) blk[static_cast<size_t>(x) * kBc + j % kBc] = row[x];
    LoadRow(a.dtype, v, base + static_cast<size_t>(j) * d, d, 1.0f,
            sc.vp.data() + static_cast<size_t>(j) * d);
  }
}

// s[r][c] = sum_x qs[r][x] * kt[x][c] for rows [0, rows4) (a multiple of 4).
void ScoresBlock(const float* qs, const float* kt, int d, int rows4, float* s) {
  for (int r0 = 0; r0 < rows4; r0 += 4) {
    for (int c0 = 0; c0 < kBc; c0 += 2 * kW) {
      V acc[4][2] = {};
      const float* q0 = qs + static_cast<size_t>(r0) * d;
      for (int x = 0; x < d; ++x) {
        V k0 = Load(kt + static_cast<size_t>(x) * kBc + c0);
        V k1 = Load(kt + static_cast<size_t>(x) * kBc + c0 + kW);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          V qb = Splat(q0[static_cast<size_t>(r) * d + x]);
          acc[r][0] += qb * k0;
          acc[r][1] += qb * k1;
        }
      }
      for (int r = 0; r < 4; ++r) {
        Store(s + static_cast<size_t>(r0 + r) * kBc + c0, acc[r][0]);
        Store(s + static_cast<size_t>(r0 + r) * kBc + c0 + kW, acc[r][1]);
      }
    }
  }
}

// o[r][:] += sum_c p[r][c] * vp[c][:] for rows [0, rows4).
void AccumulateBlock(const float* p, const float* vp, int d, int rows4, float* o) {
  for (int r0 = 0; r0 < rows4; r0 += 4) {
    for (int x0 = 0; x0 < d; x0 += 2 * kW) {
      V acc[4][2];
      for (int r = 0; r < 4; ++r) {
        acc[r][0] = Load(o + static_cast<size_t>(r0 + r) * d + x0);
        acc[r][1] = Load(o + static_cast<size_t>(r0 + r) * d + x0 + kW);
      }
      const float* p0 = p + static_cast<size_t>(r0) * kBc;
      for (int c = 0; c < kBc; ++c) {
        V v0 = Load(vp + static_cast<size_t>(c) * d + x0);
        V v1 = Load(vp + static_cast<size_t>(c) * d + x0 + kW);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          V pb = Splat(p0[static_cast<size_t>(r) * kBc + c]);
          acc[r][0] += pb * v0;
          acc[r][1] += pb * v1;
        }
      }
      for (int r = 0; r < 4; ++r) {
        Store(o + static_cast<size_t>(r0 + r) * d + x0, acc[r][0]);
        Store(o + static_cast<size_t>(r0 + r) * d + x0 + kW, acc[r][1]);
      }
    }
  }
}

void Forward(const AttentionArgs& a, const void* q, const void* k, const void* v, void* out,
             float* lse, int worker, int workers) {
  const AttentionShape& sh = a.shape;
  const int d = sh.head_dim, lq = sh.q_len, lk = sh.kv_len;
  const int nqb = (lq + kBr - 1) / kBr;
  const int group = sh.heads / sh.kv_heads;
  const long tasks = static_cast<long>(sh.batch) * sh.heads * nqb;
  const long first = tasks * worker / workers, last = tasks * (worker + 1) / workers;
  const float scale = (a.scale != 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d))) * kLog2e;
  const int offset = lk - lq;  // causal: query i sees keys j <= i + offset

  Scratch sc;
  sc.qs.assign(static_cast<size_t>(kBr) * d, 0.0f);
  sc.s.assign(static_cast<size_t>(kBr) * kBc, 0.0f);
  sc.o.assign(static_cast<size_t>(kBr) * d, 0.0f);
  sc.m.assign(kBr, kNegInf);
  sc.l.assign(kBr, 0.0f);
  for (long task = first; task < last; ++task) {
    const int qb = static_cast<int>(task % nqb);
    const long bh = task / nqb;
    const int b = static_cast<int>(bh / sh.heads), h = static_cast<int>(bh % sh.heads);
    const int kvh = h / group;
    const long kv_id = static_cast<long>(b) * sh.kv_heads + kvh;
    if (sc.packed != kv_id) {
      PackKv(a, k, v, b, kvh, sc);
      sc.packed = kv_id;
    }
    const int valid = a.kv_valid.empty() ? lk : a.kv_valid[static_cast<size_t>(b)];
    const int q0 = qb * kBr;
    const int rows = std::min(kBr, lq - q0);
    const int rows4 = (rows + 3) / 4 * 4;
    const size_t qbase = (static_cast<size_t>(b) * sh.heads + h) * lq * d;
    for (int r = 0; r < kBr; ++r) {
      float* dst = sc.qs.data() + static_cast<size_t>(r) * d;
      if (r < rows) {
        LoadRow(a.dtype, q, qbase + static_cast<size_t>(q0 + r) * d, d, scale, dst);
      } else {
        std::fill(dst, dst + d, 0.0f);
      }
    }
    std::fill(sc.o.begin(), sc.o.end(), 0.0f);
    std::fill(sc.m.begin(), sc.m.end(), kNegInf);
    std::fill(sc.l.begin(), sc.l.end(), 0.0f);
    // Keys any row of this block can see.
    int kend = std::min(valid, lk);
    if (a.causal) kend = std::min(kend, q0 + rows - 1 + offset + 1);
    for (int k0 = 0; k0 < kend; k0 += kBc) {
      const int kb = k0 / kBc;
      float* s = sc.s.data();
      ScoresBlock(sc.qs.data(), sc.kt.data() + static_cast<size_t>(kb) * d * kBc, d, rows4, s);
      const bool partial = k0 + kBc > kend || (a.causal && k0 + kBc - 1 > q0 + offset);
      for (int r = 0; r < rows; ++r) {
        float* sr = s + static_cast<size_t>(r) * kBc;
        if (partial) {
          int lim = std::min(valid, lk);
          if (a.causal) lim = std::min(lim, q0 + r + offset + 1);
          for (int c = std::max(0, lim - k0); c < kBc; ++c) sr[c] = kNegInf;
        }
        V mx = Load(sr);
        for (int c = kW; c < kBc; c += kW) {
          V x = Load(sr + c);
          mx = mx > x ? mx : x;
        }
        const float m_new = std::max(sc.m[r], HMax(mx));
        if (m_new == kNegInf) {
          std::fill(sr, sr + kBc, 0.0f);
          continue;
        }
        const float alpha = sc.m[r] == kNegInf ? 0.0f : std::exp2(sc.m[r] - m_new);
        V sum{};
        const V mv = Splat(m_new);
        for (int c = 0; c < kBc; c += kW) {
          V p = Exp2(Load(sr + c) - mv);
          Store(sr + c, p);
          sum += p;
        }
        sc.l[r] = sc.l[r] * alpha + HSum(sum);
        if (alpha != 1.0f) {
          float* orow = sc.o.data() + static_cast<size_t>(r) * d;
          const V av = Splat(alpha);
          for (int x = 0; x < d; x += kW) Store(orow + x, Load(orow + x) * av);
        }
        sc.m[r] = m_new;
      }
      // Rows past `rows` hold scores of zero queries: zero their weights.
      for (int r = rows; r < rows4; ++r)
        std::fill(s + static_cast<size_t>(r) * kBc, s + static_cast<size_t>(r + 1) * kBc, 0.0f);
      AccumulateBlock(s, sc.vp.data() + static_cast<size_t>(k0) * d, d, rows4, sc.o.data());
    }
    for (int r = 0; r < rows; ++r) {
      float* orow = sc.o.data() + static_cast<size_t>(r) * d;
      const float inv = sc.l[r] > 0 ? 1.0f / sc.l[r] : 0.0f;
      for (int x = 0; x < d; ++x) orow[x] *= inv;
      StoreRow(a.dtype, orow, d, out, qbase + static_cast<size_t>(q0 + r) * d);
      if (lse != nullptr) {
        lse[(static_cast<size_t>(b) * sh.heads + h) * lq + q0 + r] =
            sc.l[r] > 0 ? (sc.m[r] + std::log2(sc.l[r])) * kLn2 : kNegInf;
      }
    }
  }
}

inline float Dot(const float* x, const float* y, int d) {
  V acc{};
  for (int i = 0; i < d; i += kW) acc += Load(x + i) * Load(y + i);
  return HSum(acc);
}
inline void Axpy(float alpha, const float* x, float* y, int d) {
  const V av = Splat(alpha);
  for (int i = 0; i < d; i += kW) Store(y + i, Load(y + i) + av * Load(x + i));
}

// Row by row: p_ij = exp(s_ij - lse_i), dV_j += p dO_i, dS = p (dO_i.v_j -
// D_i), dQ_i += dS k_j * scale, dK_j += dS q_i * scale, D_i = dO_i . O_i.
void Backward(const AttentionArgs& a, const void* q, const void* k, const void* v, const void* out,
              const void* dout, const float* lse, float* dq, float* dk, float* dv, int worker,
              int workers) {
  const AttentionShape& sh = a.shape;
  const int d = sh.head_dim, lq = sh.q_len, lk = sh.kv_len;
  const int group = sh.heads / sh.kv_heads;
  const long groups = static_cast<long>(sh.batch) * sh.kv_heads;
  const long first = groups * worker / workers, last = groups * (worker + 1) / workers;
  const float scale = a.scale != 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const int offset = lk - lq;
  std::vector<float> kf(static_cast<size_t>(lk) * d), vf(static_cast<size_t>(lk) * d);
  std::vector<float> qi(d), doi(d), oi(d);
  for (long g = first; g < last; ++g) {
    const int b = static_cast<int>(g / sh.kv_heads), kvh = static_cast<int>(g % sh.kv_heads);
    const size_t kvbase = (static_cast<size_t>(b) * sh.kv_heads + kvh) * lk * d;
    for (int j = 0; j < lk; ++j) {
      LoadRow(a.dtype, k, kvbase + static_cast<size_t>(j) * d, d, 1.0f,
              kf.data() + static_cast<size_t>(j) * d);
      LoadRow(a.dtype, v, kvbase + static_cast<size_t>(j) * d, d, 1.0f,
              vf.data() + static_cast<size_t>(j) * d);
    }
    float* dkg = dk + kvbase;
    float* dvg = dv + kvbase;
    std::fill(dkg, dkg + static_cast<size_t>(lk) * d, 0.0f);
    std::fill(dvg, dvg + static_cast<size_t>(lk) * d, 0.0f);
    const int valid = a.kv_valid.empty() ? lk : a.kv_valid[static_cast<size_t>(b)];
    for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
      const size_t qbase = (static_cast<size_t>(b) * sh.heads + h) * lq * d;
      for (int i = 0; i < lq; ++i) {
        const size_t row = qbase + static_cast<size_t>(i) * d;
        float* dqi = dq + row;
        std::fill(dqi, dqi + d, 0.0f);
        const float li = lse[(static_cast<size_t>(b) * sh.heads + h) * lq + i];
        if (li == kNegInf) continue;
        LoadRow(a.dtype, q, row, d, 1.0f, qi.data());
        LoadRow(a.dtype, dout, row, d, 1.0f, doi.data());
        LoadRow(a.dtype, out, row, d, 1.0f, oi.data());
        const float di = Dot(doi.data(), oi.data(), d);
        int lim = std::min(valid, lk);
        if (a.causal) lim = std::min(lim, i + offset + 1);
        for (int j = 0; j < lim; ++j) {
          const float* kj = kf.data() + static_cast<size_t>(j) * d;
          const float* vj = vf.data() + static_cast<size_t>(j) * d;
          const float p = std::exp(Dot(qi.data(), kj, d) * scale - li);
          Axpy(p, doi.data(), dvg + static_cast<size_t>(j) * d, d);
          const float ds = p * (Dot(doi.data(), vj, d) - di) * scale;
          Axpy(ds, kj, dqi, d);
          Axpy(ds, qi.data(), dkg + static_cast<size_t>(j) * d, d);
        }
      }
    }
  }
}

}  // namespace

KernelEntry Entry() { return {&Forward, &Backward}; }

}  // namespace anxin::kernels::internal::ANXIN_ATTN_NS

namespace anxin::kernels::internal {
KernelEntry ANXIN_ATTN_ENTRY() { return ANXIN_ATTN_NS::Entry(); }
}  // namespace anxin::kernels::internal
