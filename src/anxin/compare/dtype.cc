#include "anxin/compare/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "anxin/base/half.h"

namespace anxin::compare {
namespace {

struct Names {
  DType dtype;
  std::string_view numpy;
  std::string_view torch;
  std::string_view safetensors;
};

constexpr Names kNames[] = {
    {DType::kBool, "bool", "torch.bool", "BOOL"},
    {DType::kInt8, "int8", "torch.int8", "I8"},
    {DType::kUInt8, "uint8", "torch.uint8", "U8"},
    {DType::kInt16, "int16", "torch.int16", "I16"},
    {DType::kUInt16, "uint16", "torch.uint16", "U16"},
    {DType::kInt32, "int32", "torch.int32", "I32"},
    {DType::kUInt32, "uint32", "torch.uint32", "U32"},
    {DType::kInt64, "int64", "torch.int64", "I64"},
    {DType::kUInt64, "uint64", "torch.uint64", "U64"},
    {DType::kFloat8E4M3, "float8_e4m3fn", "torch.float8_e4m3fn", "F8_E4M3"},
    {DType::kFloat8E5M2, "float8_e5m2", "torch.float8_e5m2", "F8_E5M2"},
    {DType::kFloat16, "float16", "torch.float16", "F16"},
    {DType::kBFloat16, "bfloat16", "torch.bfloat16", "BF16"},
    {DType::kFloat32, "float32", "torch.float32", "F32"},
    {DType::kFloat64, "float64", "torch.float64", "F64"},
};

template <typename T>
T Load(const uint8_t* p, bool swap) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (sizeof(T) > 1) {
    if (swap) v = std::byteswap(v);
  }
  return v;
}

template <typename T>
void ConvertInts(const uint8_t* src, bool swap, size_t n, double* out) {
  if (!swap) {
    // memcpy per element keeps unaligned input legal and still vectorises.
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, src + i * sizeof(T), sizeof(T));
      out[i] = static_cast<double>(v);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(Load<T>(src + i * sizeof(T), true));
}

// Table of all 65536 half values: one lookup per element beats bit twiddling.
struct HalfTable {
  double half[65536];
  double bf16[65536];
  HalfTable() {
    for (uint32_t i = 0; i < 65536; ++i) {
      half[i] = HalfToFloat(static_cast<uint16_t>(i));  // exact in float, so in double
      uint32_t f = i << 16;
      bf16[i] = static_cast<double>(std::bit_cast<float>(f));
    }
  }
};

const HalfTable& Tables() {
  static const HalfTable* table = new HalfTable();
  return *table;
}

void ConvertHalf(const double* table, const uint8_t* src, bool swap, size_t n, double* out) {
  for (size_t i = 0; i < n; ++i) out[i] = table[Load<uint16_t>(src + 2 * i, swap)];
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.numpy;
  return "unknown";
}

std::optional<DType> ParseDTypeName(std::string_view name) {
  for (const auto& n : kNames)
    if (name == n.numpy || name == n.torch || name == n.safetensors) return n.dtype;
  if (name == "half" || name == "torch.half") return DType::kFloat16;
  if (name == "float" || name == "torch.float") return DType::kFloat32;
  if (name == "double" || name == "torch.double") return DType::kFloat64;
  if (name == "float8_e4m3" || name == "e4m3") return DType::kFloat8E4M3;
  return std::nullopt;
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 1;
}

bool IsFloating(DType dtype) {
  switch (dtype) {
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    default:
      return false;
  }
}

UlpFormat UlpFormatOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat8E4M3:
      return {3, -6};
    case DType::kFloat8E5M2:
      return {2, -14};
    case DType::kFloat16:
      return {10, -14};
    case DType::kBFloat16:
      return {7, -126};
    case DType::kFloat32:
      return {23, -126};
    default:
      return {52, -1022};
  }
}

Tolerance DefaultTolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return {1e-3, 1e-5};
    case DType::kBFloat16:
      return {1.6e-2, 1e-5};
    case DType::kFloat32:
      return {1.3e-6, 1e-5};
    case DType::kFloat64:
      return {1e-7, 1e-7};
    // torch.testing has no fp8 defaults; one step of the format (2^-3, 2^-2)
    // is the smallest tolerance that does not flag every rounding.
    case DType::kFloat8E4M3:
      return {0.125, 1e-5};
    case DType::kFloat8E5M2:
      return {0.25, 1e-5};
    default:
      return {0.0, 0.0};
  }
}

double HalfToDouble(uint16_t bits) { return Tables().half[bits]; }
double BFloat16ToDouble(uint16_t bits) { return Tables().bf16[bits]; }

double Float8E4M3ToDouble(uint8_t bits) {
  uint32_t sign = bits >> 7, exp = (bits >> 3) & 0xf, mant = bits & 7;
  double v;
  if (exp == 0xf && mant == 7) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -9);
  } else {
    v = std::ldexp(static_cast<double>(mant | 8), static_cast<int>(exp) - 10);
  }
  return sign ? -v : v;
}

double Float8E5M2ToDouble(uint8_t bits) {
  // E5M2 is the top byte of an IEEE half.
  return HalfToDouble(static_cast<uint16_t>(bits) << 8);
}

void ConvertToDouble(DType dtype, const uint8_t* src, bool swap, size_t n, double* out) {
  switch (dtype) {
    case DType::kBool:
      for (size_t i = 0; i < n; ++i) out[i] = src[i] != 0 ? 1.0 : 0.0;
      return;
    case DType::kInt8:
      return ConvertInts<int8_t>(src, false, n, out);
    case DType::kUInt8:
      return ConvertInts<uint8_t>(src, false, n, out);
    case DType::kInt16:
      return ConvertInts<int16_t>(src, swap, n, out);
    case DType::kUInt16:
      return ConvertInts<uint16_t>(src, swap, n, out);
    case DType::kInt32:
      return ConvertInts<int32_t>(src, swap, n, out);
    case DType::kUInt32:
      return ConvertInts<uint32_t>(src, swap, n, out);
    case DType::kInt64:
      return ConvertInts<int64_t>(src, swap, n, out);
    case DType::kUInt64:
      return ConvertInts<uint64_t>(src, swap, n, out);
    case DType::kFloat8E4M3:
      for (size_t i = 0; i < n; ++i) out[i] = Float8E4M3ToDouble(src[i]);
      return;
    case DType::kFloat8E5M2:
      for (size_t i = 0; i < n; ++i) out[i] = Tables().half[static_cast<uint16_t>(src[i]) << 8];
      return;
    case DType::kFloat16:
      return ConvertHalf(Tables().half, src, swap, n, out);
    case DType::kBFloat16:
      return ConvertHalf(Tables().bf16, src, swap, n, out);
    case DType::kFloat32:
      if (!swap) {
        for (size_t i = 0; i < n; ++i) {
          float v;
          std::memcpy(&v, src + 4 * i, 4);
          out[i] = v;
        }
      } else {
        for (size_t i = 0; i < n; ++i)
          out[i] = std::bit_cast<float>(Load<uint32_t>(src + 4 * i, true));
      }
      return;
    case DType::kFloat64:
      if (!swap) {
        std::memcpy(out, src, n * 8);
      } else {
        for (size_t i = 0; i < n; ++i)
          out[i] = std::bit_cast<double>(Load<uint64_t>(src + 8 * i, true));
      }
      return;
  }
}

}  // namespace anxin::compare
