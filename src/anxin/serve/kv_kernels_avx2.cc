// The KV row kernels for avx2 (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS avx2
#define ANXIN_KV_ISA ::anxin::serve::KvIsa::kAvx2
#include "anxin/serve/kv_kernels_impl.h"

namespace anxin::serve::internal {
const KvKernels& Avx2Kernels() { return avx2::kKernels; }
}  // namespace anxin::serve::internal
