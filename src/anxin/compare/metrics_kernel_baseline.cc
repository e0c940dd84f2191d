// The metric kernel for baseline (compile flags in CMakeLists.txt).
#define ANXIN_KERNEL_ENTRY RunBaseline
#include "anxin/compare/metrics_kernel_impl.h"
