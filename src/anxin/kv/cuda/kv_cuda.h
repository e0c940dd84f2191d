// The KV cache's quantisation and decode attention as CUDA kernels, for the
// same formats and layouts as the CPU cache (kv_cache.h, kv_kernels.h): rows
// of one token and head, per-token groups, q4_0-style int4 and int8,
// symmetric and asymmetric. Built only when nvcc is found; run on a GPU by
// kv_cuda_check (bench/serve/cuda-check). Not run on a GPU yet.
//
//   ANXIN_ASSIGN_OR_RETURN(KvFormat format, ParseKvFormat("int4"));
//   int rows = 64;                                   // tokens x heads, 128 values each
//   std::vector<float> x(rows * 128, 0.5f);
//   std::vector<uint8_t> data; std::vector<uint16_t> params;
//   ANXIN_TRY(cuda::QuantizeRows(x.data(), rows, 128, format, &data, &params));
//   // One layer of a paged cache (as KvCache stores it): 2 KV heads, blocks of 16 tokens.
//   int q_heads = 8, kv_heads = 2, block_tokens = 16, length = 32;
//   std::vector<int> block_table = {0, 1};
//   std::vector<uint8_t> k_data = data, v_data = data;
//   std::vector<uint16_t> k_params = params, v_params = params;
//   std::vector<float> q(q_heads * 128, 0.1f);
//   std::vector<float> out(q_heads * 128);
//   ANXIN_TRY(cuda::Attend(q.data(), q_heads, kv_heads, 128, block_tokens, format, k_data,
//                          k_params, v_data, v_params, block_table, length, out.data()));
//
// Host memory in and out; each call copies to the device and back (a check,
// not a serving path). Errors: no device or a CUDA failure -> kUnavailable
// naming the CUDA error.
#ifndef ANXIN_KV_CUDA_KV_CUDA_H_
#define ANXIN_KV_CUDA_KV_CUDA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/kv/kv_format.h"

namespace anxin::kv::cuda {

// "NVIDIA H100 80GB HBM3 (compute 9.0)", or kUnavailable.
[[nodiscard]] Result<std::string> DeviceName();

// Per-token groups along each row of d values (kv_kernels.h layout).
[[nodiscard]] Status QuantizeRows(const float* x, int rows, int d, const KvFormat& format,
                                  std::vector<uint8_t>* data, std::vector<uint16_t>* params);

// Decode attention of q_heads queries over a paged cache laid out as
// KvCache stores one layer: rows [block][kv_head][slot] of row bytes, and
// their parameters alongside. REQUIRES: per-token key groups (no :kivi).
[[nodiscard]] Status Attend(const float* q, int q_heads, int kv_heads, int d, int block_tokens,
                            const KvFormat& format, const std::vector<uint8_t>& k_data,
                            const std::vector<uint16_t>& k_params,
                            const std::vector<uint8_t>& v_data,
                            const std::vector<uint16_t>& v_params,
                            const std::vector<int>& block_table, int length, float* out);

}  // namespace anxin::kv::cuda

#endif  // ANXIN_KV_CUDA_KV_CUDA_H_
