// Element types of tensor dumps and their conversion to float64.
//
// Every reader maps its file's type names onto DType. The metric kernel
// decodes float32, float16 and bfloat16 itself (tensor_metrics.h); every other type,
// and byte-swapped data, reaches it as float64 from ConvertToDouble, which
// decodes half-precision and fp8 formats in software.
//
//   std::vector<uint8_t> bytes(512);   // 256 bfloat16 values, little-endian
//   double buf[256];
//   ConvertToDouble(DType::kBFloat16, bytes.data(), /*swap_bytes=*/false, 256, buf);
//
// Thread safety: all functions are pure.
#ifndef ANXIN_COMPARE_DTYPE_H_
#define ANXIN_COMPARE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace anxin::compare {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat8E4M3,  // float8_e4m3fn: no infinities, 0x7f/0xff are NaN
  kFloat8E5M2,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

// "float16", "bfloat16", "int32", ... (the NumPy / ml_dtypes spelling).
std::string_view DTypeName(DType dtype);
// Accepts the NumPy, torch ("torch.bfloat16") and safetensors ("BF16") spellings.
std::optional<DType> ParseDTypeName(std::string_view name);
// Bytes per element.
size_t DTypeSize(DType dtype);
bool IsFloating(DType dtype);

// Format parameters for the ULP error (reference.md): mantissa bits and the
// smallest normal exponent. Only meaningful when IsFloating(dtype).
struct UlpFormat {
  int mantissa_bits;
  int min_exponent;
};
UlpFormat UlpFormatOf(DType dtype);

// torch.testing.assert_close defaults for dtype: rtol, atol. Integer types
// compare exactly (0, 0).
struct Tolerance {
  double rtol;
  double atol;
};
Tolerance DefaultTolerance(DType dtype);

// Decodes one value (exact: every listed format is a subset of float64).
double HalfToDouble(uint16_t bits);
double BFloat16ToDouble(uint16_t bits);
double Float8E4M3ToDouble(uint8_t bits);
double Float8E5M2ToDouble(uint8_t bits);

// Converts count elements stored contiguously at src into out. swap_bytes is
// set for big-endian data on this little-endian host.
void ConvertToDouble(DType dtype, const uint8_t* src, bool swap_bytes, size_t count, double* out);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_DTYPE_H_
