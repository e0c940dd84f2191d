#include "anxin/serve/kv_kernels.h"

namespace anxin::serve {
namespace {

bool CpuHas(KvIsa isa) {
  switch (isa) {
    case KvIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
    case KvIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("fma");
    default:
      return true;
  }
}

}  // namespace

std::string_view KvIsaName(KvIsa isa) {
  switch (isa) {
    case KvIsa::kAuto:
      return "auto";
    case KvIsa::kBaseline:
      return "baseline";
    case KvIsa::kAvx2:
      return "avx2";
    case KvIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<KvIsa> AvailableKvIsas() {
  std::vector<KvIsa> isas{KvIsa::kBaseline};
  for (KvIsa i : {KvIsa::kAvx2, KvIsa::kAvx512})
    if (CpuHas(i)) isas.push_back(i);
  return isas;
}

namespace internal {

const KvKernels& KernelsFor(KvIsa isa) {
  if (isa == KvIsa::kAuto || !CpuHas(isa)) {
    static const KvKernels& best = CpuHas(KvIsa::kAvx512) ? Avx512Kernels()
                                   : CpuHas(KvIsa::kAvx2) ? Avx2Kernels()
                                                          : BaselineKernels();
    return best;
  }
  switch (isa) {
    case KvIsa::kAvx512:
      return Avx512Kernels();
    case KvIsa::kAvx2:
      return Avx2Kernels();
    default:
      return BaselineKernels();
  }
}

}  // namespace internal
}  // namespace anxin::serve
