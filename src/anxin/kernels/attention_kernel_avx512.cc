// The fused attention kernel for avx512 (compile flags in CMakeLists.txt).
#define ANXIN_ATTN_NS avx512
#define ANXIN_ATTN_WIDTH 16
#define ANXIN_ATTN_ENTRY Avx512Kernel
#include "anxin/kernels/attention_kernel_impl.h"
