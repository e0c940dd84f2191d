// The fused attention forward pass as a CUDA kernel: the same online softmax,
// masks, dtypes and layout as the CPU kernel (attention.h), float32
// accumulation. Built only when nvcc is found; run on a GPU by
// kernels_attention_cuda_check (bench/kernels/gpu-check).
//
//   AttentionArgs a;
//   a.shape = {.batch = 1, .heads = 8, .kv_heads = 8, .q_len = 4096, .kv_len = 4096,
//              .head_dim = 128};
//   a.dtype = ElementType::kBFloat16;
//   a.causal = true;
//   std::vector<uint16_t> q(a.shape.QElements()), k(q.size()), v(q.size()), out(q.size());
//   ANXIN_ASSIGN_OR_RETURN(double ms, cuda::AttentionForward(a, q.data(), k.data(), v.data(),
//                                                           out.data(), /*reps=*/3));
//
// Host memory in and out: each call copies to the device and back and
// returns the best kernel time of reps runs in milliseconds (a check and a
// benchmark, not a serving path). Errors: no device or a CUDA failure ->
// kUnavailable naming the CUDA error; a shape the kernel does not take ->
// kInvalidArgument.
#ifndef ANXIN_KERNELS_CUDA_ATTENTION_CUDA_H_
#define ANXIN_KERNELS_CUDA_ATTENTION_CUDA_H_

#include <string>

#include "anxin/base/error.h"
#include "anxin/kernels/attention.h"

namespace anxin::kernels::cuda {

// "NVIDIA H200 (compute 9.0)", or kUnavailable.
[[nodiscard]] Result<std::string> DeviceName();

[[nodiscard]] Result<double> AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                              const void* v, void* out, int reps);

}  // namespace anxin::kernels::cuda

#endif  // ANXIN_KERNELS_CUDA_ATTENTION_CUDA_H_
