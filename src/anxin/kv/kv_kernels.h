// Internal to the KV cache: the row kernels (quantise, dequantise, dot,
// axpy), compiled once per instruction set from kv_kernels_impl.h and chosen
// at run time, like compare's metric kernel.
//
//   std::vector<float> x(128, 0.5f), out(128);
//   uint8_t data[128];                       // room for one row of 128 values
//   uint16_t params[8];                      // per group: scale (and zero point)
//   const internal::KvKernels& k = internal::KernelsFor(KvIsa::kAuto);
//   k.quantize_row(x.data(), 128, 32, KvDType::kInt4, KvScheme::kSymmetric, data, params);
//   k.dequant_row(data, params, 128, 32, KvDType::kInt4, KvScheme::kSymmetric, out.data());
//
// Row layouts (one token of one head, d values):
// - data: fp16 words, int8 bytes, or int4 nibbles in pairs (byte i holds
//   element 2i in its low and 2i+1 in its high nibble); int4 symmetric stores
//   q + 8, int8 symmetric stores q as a signed byte.
// - params (per-token groups): per group, the fp16 scale then, when
//   asymmetric, the fp16 zero point.
// Every path makes the same quantised bytes (same float operations in the
// same order, no fused multiply-add); dot products use 16 lanes folded in the
// same order, so they agree bit for bit too.
#ifndef ANXIN_KV_KV_KERNELS_H_
#define ANXIN_KV_KV_KERNELS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "anxin/kv/kv_format.h"

namespace anxin::kv {

// Instruction set of the KV kernels. kAuto: the best this CPU supports.
enum class KvIsa : uint8_t { kAuto, kBaseline, kAvx2, kAvx512 };
std::string_view KvIsaName(KvIsa isa);  // "auto", "baseline", "avx2", "avx512"
// The sets this CPU can run, baseline first; the last is kAuto's choice.
std::vector<KvIsa> AvailableKvIsas();

namespace internal {

struct KvKernels {
  KvIsa isa;
  // Quantises one row of d values in groups of `group` (per token).
  void (*quantize_row)(const float* x, int d, int group, KvDType dtype, KvScheme scheme,
                       uint8_t* data, uint16_t* params);
  void (*dequant_row)(const uint8_t* data, const uint16_t* params, int d, int group, KvDType dtype,
                      KvScheme scheme, float* out);
  // Per-channel keys: `rows` rows of d values (row-major) quantised together,
  // one scale (and zero point) per channel: params holds d entries of
  // ParamsPerGroup words each.
  void (*quantize_rows_per_channel)(const float* x, int rows, int d, KvDType dtype, KvScheme scheme,
                                    uint8_t* data, uint16_t* params);
  // One row with per-channel scale and zero (decoded to float by the caller;
  // zero is ignored when symmetric).
  void (*dequant_row_per_channel)(const uint8_t* data, const float* scale, const float* zero, int d,
                                  KvDType dtype, KvScheme scheme, float* out);
  float (*dot)(const float* a, const float* b, int n);
  void (*axpy)(float a, const float* x, float* y, int n);  // y += a * x
  void (*scale)(float a, float* y, int n);                 // y *= a
};

// REQUIRES: d a multiple of 16; group a multiple of 16 dividing d.
const KvKernels& KernelsFor(KvIsa isa);

const KvKernels& BaselineKernels();
const KvKernels& Avx2Kernels();
const KvKernels& Avx512Kernels();

}  // namespace internal
}  // namespace anxin::kv

#endif  // ANXIN_KV_KV_KERNELS_H_
