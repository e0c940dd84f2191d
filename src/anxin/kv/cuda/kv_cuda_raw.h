// Internal: the entry points kv_cuda.cu exports in plain C++17 (nvcc's
// dialect here), wrapped into Result/Status by kv_cuda.cc. Each returns ""
// on success, else a description of the CUDA failure.
#ifndef ANXIN_KV_CUDA_KV_CUDA_RAW_H_
#define ANXIN_KV_CUDA_KV_CUDA_RAW_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace anxin::kv::cuda::raw {

std::string DeviceName(std::string* name);
// dtype: 1 int8, 2 int4; asym: 0 or 1; groups of 32.
std::string QuantizeRows(const float* x, int rows, int d, int dtype, int asym, uint8_t* data,
                         uint16_t* params);

struct AttendArgs {
  const float* q;
  int q_heads, kv_heads, d, block_tokens, group;
  int dtype;  // 0 fp16, 1 int8, 2 int4
  int asym;
  const uint8_t* k_data;
  const uint8_t* v_data;
  size_t data_bytes;
  const uint16_t* k_params;
  const uint16_t* v_params;
  size_t param_words;
  const int* table;
  size_t table_len;
  int length;
};
std::string Attend(const AttendArgs& args, float* out);

}  // namespace anxin::kv::cuda::raw

#endif  // ANXIN_KV_CUDA_KV_CUDA_RAW_H_
