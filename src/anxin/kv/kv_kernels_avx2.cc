// The KV row kernels for avx2 (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS avx2
#define ANXIN_KV_ISA ::anxin::kv::KvIsa::kAvx2
#include "anxin/kv/kv_kernels_impl.h"

namespace anxin::kv::internal {
const KvKernels& Avx2Kernels() { return avx2::kKernels; }
}  // namespace anxin::kv::internal
