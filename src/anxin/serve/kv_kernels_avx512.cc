// The KV row kernels for avx512 (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS avx512
#define ANXIN_KV_ISA ::anxin::serve::KvIsa::kAvx512
#include "anxin/serve/kv_kernels_impl.h"

namespace anxin::serve::internal {
const KvKernels& Avx512Kernels() { return avx512::kKernels; }
}  // namespace anxin::serve::internal
