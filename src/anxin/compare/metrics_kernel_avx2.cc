// The metric kernel for avx2 (compile flags in CMakeLists.txt).
#define ANXIN_KERNEL_ENTRY RunAvx2
#include "anxin/compare/metrics_kernel_impl.h"
