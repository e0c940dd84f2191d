#include "anxin/kv/kv_kernels.h"

#include "anxin/base/cpu_dispatch.h"

namespace anxin::kv {
namespace {

CpuIsa IsaOf(KvIsa isa) { return static_cast<CpuIsa>(isa); }
static_assert(static_cast<int>(KvIsa::kAvx512) == static_cast<int>(CpuIsa::kAvx512) &&
              static_cast<int>(KvIsa::kAvx2) == static_cast<int>(CpuIsa::kAvx2) &&
              static_cast<int>(KvIsa::kAuto) == static_cast<int>(CpuIsa::kAuto));

}  // namespace

std::string_view KvIsaName(KvIsa isa) { return CpuIsaName(IsaOf(isa)); }

std::vector<KvIsa> AvailableKvIsas() {
  std::vector<KvIsa> isas{KvIsa::kBaseline};
  for (KvIsa i : {KvIsa::kAvx2, KvIsa::kAvx512})
    if (CpuSupports(IsaOf(i))) isas.push_back(i);
  return isas;
}

namespace internal {

const KvKernels& KernelsFor(KvIsa isa) {
  switch (ResolveCpuIsa(IsaOf(isa))) {
    case CpuIsa::kAvx512:
      return Avx512Kernels();
    case CpuIsa::kAvx2:
      return Avx2Kernels();
    default:
      return BaselineKernels();
  }
}

}  // namespace internal
}  // namespace anxin::kv
