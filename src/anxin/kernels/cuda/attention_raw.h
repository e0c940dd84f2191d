// Internal: the C++-free interface between attention_cuda.cc and the kernel
// in attention.cu (nvcc compiles the .cu without the project's C++23 flags).
#ifndef ANXIN_KERNELS_CUDA_ATTENTION_RAW_H_
#define ANXIN_KERNELS_CUDA_ATTENTION_RAW_H_

#include <stddef.h>

namespace anxin::kernels::cuda::raw {

struct Shape {
  int batch, heads, kv_heads, q_len, kv_len, head_dim;
  int dtype;  // 0 float32, 1 bfloat16, 2 float16
  int causal;
  float scale;  // already 1/sqrt(d) when the caller gave 0
};

// Empty on success, else the CUDA error text.
const char* DeviceName(char* buf, size_t size);
// Device pointers; kv_valid may be null. Returns the CUDA error text or null;
// *ms receives the best time of reps launches.
const char* Forward(const Shape& s, const void* q, const void* k, const void* v, void* out,
                    const int* kv_valid, int reps, float* ms);
// Copies and allocations, for attention_cuda.cc.
const char* Malloc(void** p, size_t bytes);
const char* Free(void* p);
const char* ToDevice(void* dst, const void* src, size_t bytes);
const char* ToHost(void* dst, const void* src, size_t bytes);

}  // namespace anxin::kernels::cuda::raw

#endif  // ANXIN_KERNELS_CUDA_ATTENTION_RAW_H_
