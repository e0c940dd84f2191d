// The KV row kernels for baseline (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS baseline
#define ANXIN_KV_ISA ::anxin::serve::KvIsa::kBaseline
#include "anxin/serve/kv_kernels_impl.h"

namespace anxin::serve::internal {
const KvKernels& BaselineKernels() { return baseline::kKernels; }
}  // namespace anxin::serve::internal
