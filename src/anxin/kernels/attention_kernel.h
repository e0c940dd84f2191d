// Internal: the per-instruction-set entry points of the fused attention
// kernel (attention_kernel_impl.h, compiled once per path with its own flags
// in attention_kernel_{baseline,avx2,avx512}.cc; attention.cc picks one).
#ifndef ANXIN_KERNELS_ATTENTION_KERNEL_H_
#define ANXIN_KERNELS_ATTENTION_KERNEL_H_

#include "anxin/kernels/attention.h"

namespace anxin::kernels::internal {

// Runs this worker's share (worker of workers) of the forward pass.
// REQUIRES: ValidateAttention(a) is ok.
using ForwardFn = void (*)(const AttentionArgs& a, const void* q, const void* k, const void* v,
                           void* out, float* lse, int worker, int workers);
// This worker's share of the backward pass: whole (batch, kv head) groups.
using BackwardFn = void (*)(const AttentionArgs& a, const void* q, const void* k, const void* v,
                            const void* out, const void* dout, const float* lse, float* dq,
                            float* dk, float* dv, int worker, int workers);

struct KernelEntry {
  ForwardFn forward;
  BackwardFn backward;
};

KernelEntry BaselineKernel();
KernelEntry Avx2Kernel();
KernelEntry Avx512Kernel();

}  // namespace anxin::kernels::internal

#endif  // ANXIN_KERNELS_ATTENTION_KERNEL_H_
