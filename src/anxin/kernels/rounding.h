// Rounding float32 to float16 and bfloat16 (round to nearest, ties to even),
// for kernels that store half-precision values and for emulating half-precision
// arithmetic on the CPU. Decoding lives in compare/dtype.h (HalfToDouble,
// BFloat16ToDouble); HalfBitsToFloat and BFloat16BitsToFloat here are the same
// decoders inline, for inner loops.
//
//   uint16_t h = FloatToHalfBits(1.0f / 3);        // 0x3555
//   float r = RoundToHalf(70000.0f);               // inf: past float16's 65504
//   float b = RoundToBFloat16(1.0f + 1.0f / 512);  // 1.0: below half a bfloat16 ULP
//
// Thread safety: all functions are pure.
#ifndef ANXIN_KERNELS_ROUNDING_H_
#define ANXIN_KERNELS_ROUNDING_H_

#include <bit>
#include <cstdint>

namespace anxin::kernels {

inline uint16_t FloatToHalfBits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value / 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the least subnormal
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline uint16_t FloatToBFloat16Bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float BFloat16BitsToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline float RoundToHalf(float f) { return HalfBitsToFloat(FloatToHalfBits(f)); }
inline float RoundToBFloat16(float f) { return BFloat16BitsToFloat(FloatToBFloat16Bits(f)); }

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_ROUNDING_H_
