// IEEE fp16 <-> float conversions, portable, rounding to nearest even with
// the same results as the F16C instructions: the one place anxin converts
// half precision (the KV cache's storage, compare's float16 decoding).
//
//   uint16_t h = FloatToHalf(1.5f);   // 0x3e00
//   float f = HalfToFloat(h);         // 1.5f (exact for every half)
#ifndef ANXIN_BASE_HALF_H_
#define ANXIN_BASE_HALF_H_

#include <bit>
#include <cstdint>

namespace anxin {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = 0x7f800000u | ((em & 0x3ffu) << 13);  // Inf, NaN (payload kept)
  } else {
    // Normals and subnormals: shift into a float's fields and rescale the
    // exponent bias (15 -> 127) with one exact multiplication.
    bits = std::bit_cast<uint32_t>(std::bit_cast<float>(em << 13) * 0x1p112f);
  }
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // Inf or NaN
    return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow
  if (ax < 0x38800000u) {
    // Result is subnormal (or zero): add 0.5 (as a float) so the FPU rounds
    // the mantissa to the half's 2^-24 step, to nearest even.
    const float shifted = std::bit_cast<float>(ax) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  const uint32_t mant_odd = (ax >> 13) & 1u;
  const uint32_t rounded = ax + 0xc8000fffu + mant_odd;  // rebias (-112 << 23) and round
  return sign | static_cast<uint16_t>(rounded >> 13);
}

// The fp16 value nearest to f that is at least as far from zero (for scales,
// so that a group's largest value stays within range). Saturates at 65504.
inline uint16_t FloatToHalfAwayFromZero(float f) {
  uint16_t h = FloatToHalf(f);
  if ((h & 0x7fffu) >= 0x7c00u) return (h & 0x8000u) | 0x7bffu;
  const float back = HalfToFloat(h);
  if ((f > 0 && back < f) || (f < 0 && back > f)) {
    if ((h & 0x7fffu) != 0x7bffu) ++h;  // next magnitude up (same sign)
  }
  return h;
}

// The fp16 value nearest to f that is not above it. Saturates at -65504.
inline uint16_t FloatToHalfDown(float f) {
  uint16_t h = FloatToHalf(f);
  if ((h & 0x7fffu) >= 0x7c00u) return (h & 0x8000u) ? 0xfbffu : 0x7bffu;
  const float back = HalfToFloat(h);
  if (back > f) {
    if (h == 0x0000u) return 0x8001u;  // +0 -> smallest negative
    if (h & 0x8000u) {
      if ((h & 0x7fffu) != 0x7bffu) ++h;  // more negative
    } else {
      --h;  // less positive
    }
  }
  return h;
}

}  // namespace anxin

#endif  // ANXIN_BASE_HALF_H_
