// The fused attention kernel for baseline (compile flags in CMakeLists.txt).
#define ANXIN_ATTN_NS baseline
#define ANXIN_ATTN_WIDTH 4
#define ANXIN_ATTN_ENTRY BaselineKernel
#include "anxin/kernels/attention_kernel_impl.h"
