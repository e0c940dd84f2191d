// The KV row kernels for avx512 (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS avx512
#define ANXIN_KV_ISA ::anxin::kv::KvIsa::kAvx512
#include "anxin/kv/kv_kernels_impl.h"

namespace anxin::kv::internal {
const KvKernels& Avx512Kernels() { return avx512::kKernels; }
}  // namespace anxin::kv::internal
