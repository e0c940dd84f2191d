// The fused attention kernel for avx2 (compile flags in CMakeLists.txt).
#define ANXIN_ATTN_NS avx2
#define ANXIN_ATTN_WIDTH 8
#define ANXIN_ATTN_ENTRY Avx2Kernel
#include "anxin/kernels/attention_kernel_impl.h"
