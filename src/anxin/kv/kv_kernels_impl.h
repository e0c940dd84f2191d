// The KV row kernels, written once and compiled per instruction set by
// kv_kernels_{baseline,avx2,avx512}.cc (flags in CMakeLists.txt: -O3 so the
// 16-element loops vectorise, -ffp-contract=off so every path rounds alike).
// Each including file defines ANXIN_KV_ISA_NS (its namespace) and
// ANXIN_KV_ISA (its KvIsa) first.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "anxin/base/half.h"
#include "anxin/kv/kv_kernels.h"

namespace anxin::kv::internal::ANXIN_KV_ISA_NS {
namespace {

constexpr int kLanes = 16;

inline void HalfsToFloats(const uint16_t* h, int n, float* out) {
#if defined(__AVX512F__)
  for (int i = 0; i < n; i += 16) {
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
#elif defined(__F16C__)
  for (int i = 0; i < n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
#else
  for (int i = 0; i < n; ++i) out[i] = HalfToFloat(h[i]);
#endif
}

inline void FloatsToHalfs(const float* x, int n, uint16_t* h) {
#if defined(__AVX512F__)
  for (int i = 0; i < n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
#elif defined(__F16C__)
  for (int i = 0; i < n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
#else
  for (int i = 0; i < n; ++i) h[i] = FloatToHalf(x[i]);
#endif
}

// Round to nearest even for |t| < 2^22 without a rounding instruction (the
// baseline has none), so that every path rounds the same way.
inline float RoundEven(float t) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (t + kMagic) - kMagic;
}

struct GroupParams {
  uint16_t scale_h = 0, zero_h = 0;
  float inv = 0, zero = 0, lo = 0, hi = 0;
};

// Scale, zero point and clamp range of a group from its extremes.
inline GroupParams ParamsFor(float mx, float mn, KvDType dtype, KvScheme scheme) {
  GroupParams p;
  const bool int4 = dtype == KvDType::kInt4;
  if (scheme == KvScheme::kSymmetric) {
    float d;
    if (int4) {
      const float extreme = mx >= -mn ? mx : mn;  // q4_0: the extreme maps to -8
      d = extreme / -8.0f;
      p.lo = -8;
      p.hi = 7;
    } else {
      d = std::max(mx, -mn) / 127.0f;
      p.lo = -127;
      p.hi = 127;
    }
    p.scale_h = FloatToHalfAwayFromZero(d);
    const float s = HalfToFloat(p.scale_h);
    p.inv = s != 0.0f ? 1.0f / s : 0.0f;
  } else {
    const float levels = int4 ? 15.0f : 255.0f;
    p.zero_h = FloatToHalfDown(mn);
    p.zero = HalfToFloat(p.zero_h);
    p.scale_h = FloatToHalfAwayFromZero((mx - p.zero) / levels);
    const float s = HalfToFloat(p.scale_h);
    p.inv = s != 0.0f ? 1.0f / s : 0.0f;
    p.lo = 0;
    p.hi = levels;
  }
  return p;
}

// Quantised integer of x (before the int4 symmetric +8 offset).
inline int QuantOne(float x, const GroupParams& p) {
  float t = (x - p.zero) * p.inv;
  t = std::min(std::max(t, p.lo), p.hi);
  return static_cast<int>(RoundEven(t));
}

inline void MinMax(const float* x, int n, float* mx_out, float* mn_out) {
  float mx[kLanes], mn[kLanes];
  for (int l = 0; l < kLanes; ++l) mx[l] = mn[l] = x[l];
  for (int i = kLanes; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      mx[l] = std::max(mx[l], x[i + l]);
      mn[l] = std::min(mn[l], x[i + l]);
    }
  }
  float a = mx[0], b = mn[0];
  for (int l = 1; l < kLanes; ++l) {
    a = std::max(a, mx[l]);
    b = std::min(b, mn[l]);
  }
  *mx_out = a;
  *mn_out = b;
}

// Stores n quantised values (n a multiple of 16) at element offset `first`
// of a row's data.
inline void StoreQuantised(const int* q, int n, int first, KvDType dtype, KvScheme scheme,
                           uint8_t* data) {
  if (dtype == KvDType::kInt8) {
    uint8_t* out = data + first;
    for (int i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(q[i]);
  } else {
    const int offset = scheme == KvScheme::kSymmetric ? 8 : 0;
    uint8_t* out = data + first / 2;
    for (int i = 0; i < n / 2; ++i) {
      out[i] = static_cast<uint8_t>((q[2 * i] + offset) | ((q[2 * i + 1] + offset) << 4));
    }
  }
}

// The n stored integers (as float, int4 symmetric already minus 8) at element
// offset `first`.
inline void LoadQuantised(const uint8_t* data, int n, int first, KvDType dtype, KvScheme scheme,
                          float* out) {
  if (dtype == KvDType::kInt8) {
    const uint8_t* in = data + first;
    if (scheme == KvScheme::kSymmetric) {
      for (int i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(in[i]));
    } else {
      for (int i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
    }
  } else {
    const float offset = scheme == KvScheme::kSymmetric ? 8.0f : 0.0f;
    const uint8_t* in = data + first / 2;
    for (int i = 0; i < n / 2; ++i) {
      out[2 * i] = static_cast<float>(in[i] & 0x0f) - offset;
      out[2 * i + 1] = static_cast<float>(in[i] >> 4) - offset;
    }
  }
}

void QuantizeRow(const float* x, int d, int group, KvDType dtype, KvScheme scheme, uint8_t* data,
                 uint16_t* params) {
  if (dtype == KvDType::kFp16) {
    FloatsToHalfs(x, d, reinterpret_cast<uint16_t*>(data));
    return;
  }
  const int per_group = scheme == KvScheme::kSymmetric ? 1 : 2;
  int q[4096];
  for (int g0 = 0; g0 < d; g0 += group) {
    float mx, mn;
    MinMax(x + g0, group, &mx, &mn);
    const GroupParams p = ParamsFor(mx, mn, dtype, scheme);
    uint16_t* gp = params + (g0 / group) * per_group;
    gp[0] = p.scale_h;
    if (per_group == 2) gp[1] = p.zero_h;
    for (int i = 0; i < group; ++i) q[i] = QuantOne(x[g0 + i], p);
    StoreQuantised(q, group, g0, dtype, scheme, data);
  }
}

void DequantRow(const uint8_t* data, const uint16_t* params, int d, int group, KvDType dtype,
                KvScheme scheme, float* out) {
  if (dtype == KvDType::kFp16) {
    HalfsToFloats(reinterpret_cast<const uint16_t*>(data), d, out);
    return;
  }
  LoadQuantised(data, d, 0, dtype, scheme, out);
  const int per_group = scheme == KvScheme::kSymmetric ? 1 : 2;
  for (int g0 = 0; g0 < d; g0 += group) {
    const uint16_t* gp = params + (g0 / group) * per_group;
    const float s = HalfToFloat(gp[0]);
    if (per_group == 1) {
      for (int i = 0; i < group; ++i) out[g0 + i] *= s;
    } else {
      const float z = HalfToFloat(gp[1]);
      for (int i = 0; i < group; ++i) out[g0 + i] = out[g0 + i] * s + z;
    }
  }
}

void QuantizeRowsPerChannel(const float* x, int rows, int d, KvDType dtype, KvScheme scheme,
                            uint8_t* data, uint16_t* params) {
  if (dtype == KvDType::kFp16) {
    for (int r = 0; r < rows; ++r) {
      FloatsToHalfs(x + static_cast<size_t>(r) * d, d,
                    reinterpret_cast<uint16_t*>(data) + static_cast<size_t>(r) * d);
    }
    return;
  }
  const int per_group = scheme == KvScheme::kSymmetric ? 1 : 2;
  const size_t row_bytes = static_cast<size_t>(d) * (dtype == KvDType::kInt8 ? 8 : 4) / 8;
  float mx[4096], mn[4096];
  GroupParams p[4096];
  std::memcpy(mx, x, sizeof(float) * d);
  std::memcpy(mn, x, sizeof(float) * d);
  for (int r = 1; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * d;
    for (int c = 0; c < d; ++c) {
      mx[c] = std::max(mx[c], row[c]);
      mn[c] = std::min(mn[c], row[c]);
    }
  }
  for (int c = 0; c < d; ++c) {
    p[c] = ParamsFor(mx[c], mn[c], dtype, scheme);
    params[c * per_group] = p[c].scale_h;
    if (per_group == 2) params[c * per_group + 1] = p[c].zero_h;
  }
  int q[4096];
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * d;
    for (int c = 0; c < d; ++c) q[c] = QuantOne(row[c], p[c]);
    StoreQuantised(q, d, 0, dtype, scheme, data + r * row_bytes);
  }
}

void DequantRowPerChannel(const uint8_t* data, const float* scale, const float* zero, int d,
                          KvDType dtype, KvScheme scheme, float* out) {
  if (dtype == KvDType::kFp16) {
    HalfsToFloats(reinterpret_cast<const uint16_t*>(data), d, out);
    return;
  }
  LoadQuantised(data, d, 0, dtype, scheme, out);
  if (scheme == KvScheme::kSymmetric) {
    for (int c = 0; c < d; ++c) out[c] *= scale[c];
  } else {
    for (int c = 0; c < d; ++c) out[c] = out[c] * scale[c] + zero[c];
  }
}

float Dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0];
}

void Axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

void Scale(float a, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] *= a;
}

}  // namespace

const KvKernels kKernels = {
    ANXIN_KV_ISA,         QuantizeRow, DequantRow, QuantizeRowsPerChannel,
    DequantRowPerChannel, Dot,         Axpy,       Scale,
};

}  // namespace anxin::kv::internal::ANXIN_KV_ISA_NS
