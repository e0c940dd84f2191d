// The KV row kernels for baseline (compile flags in CMakeLists.txt).
#define ANXIN_KV_ISA_NS baseline
#define ANXIN_KV_ISA ::anxin::kv::KvIsa::kBaseline
#include "anxin/kv/kv_kernels_impl.h"

namespace anxin::kv::internal {
const KvKernels& BaselineKernels() { return baseline::kKernels; }
}  // namespace anxin::kv::internal
