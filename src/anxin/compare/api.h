// Accuracy checks for kernel authors: compare a kernel's output buffer with a
// reference buffer and get msprobe's metrics and a pass/warn/fail verdict.
//
//   // A kernel's bfloat16 output against a float32 reference of the same length.
//   std::vector<uint16_t> out(1024, 0x3f80);  // bfloat16 bits of 1.0
//   std::vector<float> ref(1024, 1.0f);
//   BufferComparison r = CompareBuffers(DType::kBFloat16, out.data(), DType::kFloat32,
//                                       ref.data(), out.size());
//   if (r.verdict == Verdict::kFail) std::printf("%s\n", r.Summary().c_str());
//
//   // Same dtype on both sides, typed spans of equal length (else an error):
//   std::vector<float> out_f32(ref);
//   ANXIN_ASSIGN_OR_RETURN(BufferComparison r2,
//                          CompareSpans<float>(out_f32, ref));
//   std::printf("%s\n", r2.Summary().c_str());
//
// Metrics and verdict rules are those of `anxin compare` (tensor_metrics.h,
// verdict.h); pass custom Thresholds to tighten them. Buffers are read in
// place (no copy); large buffers are split across threads.
// Thread safety: the functions may be called concurrently.
#ifndef ANXIN_COMPARE_API_H_
#define ANXIN_COMPARE_API_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/dtype.h"
#include "anxin/compare/tensor_metrics.h"
#include "anxin/compare/verdict.h"

namespace anxin::compare {

struct BufferComparison {
  Metrics metrics;
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;
  // One line for test failure messages: verdict, cosine, MaxAbsErr, ULP, reasons.
  std::string Summary() const;
};

// Compares count elements of out (of out_dtype) with ref (of ref_dtype), both
// little-endian and contiguous. threads 0: one per hardware thread.
BufferComparison CompareBuffers(DType out_dtype, const void* out, DType ref_dtype, const void* ref,
                                size_t count, const Thresholds& thresholds = {},
                                unsigned threads = 1);

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType DTypeOf<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType DTypeOf<int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType DTypeOf<uint32_t>() {
  return DType::kUInt32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType DTypeOf<uint64_t>() {
  return DType::kUInt64;
}

// Typed spans of the same C++ type. For float16/bfloat16 bits held in
// uint16_t, use CompareBuffers with the dtype. Spans of different lengths
// are an error (kInvalidArgument), never a comparison of the shorter prefix:
// a kernel that wrote too few or too many elements must not pass.
template <typename T>
Result<BufferComparison> CompareSpans(std::span<const T> out, std::span<const T> ref,
                                      const Thresholds& thresholds = {}) {
  if (out.size() != ref.size())
    return InvalidArgument("CompareSpans: the output has " + std::to_string(out.size()) +
                           " elements and the reference " + std::to_string(ref.size()) +
                           "; compare spans of one length");
  return CompareBuffers(DTypeOf<T>(), out.data(), DTypeOf<T>(), ref.data(), out.size(), thresholds);
}

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_API_H_
