// The metric kernel for avx512 (compile flags in CMakeLists.txt).
#define ANXIN_KERNEL_ENTRY RunAvx512
#include "anxin/compare/metrics_kernel_impl.h"
