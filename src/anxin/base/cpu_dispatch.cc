#include "anxin/base/cpu_dispatch.h"

namespace anxin {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto:
      return "auto";
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool CpuSupports(CpuIsa isa) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("popcnt");
  static const bool avx512 =
      avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case CpuIsa::kAvx512:
      return avx512;
    case CpuIsa::kAvx2:
      return avx2;
    default:
      return true;
  }
}

CpuIsa ResolveCpuIsa(CpuIsa requested) {
  if (requested != CpuIsa::kAuto && CpuSupports(requested)) return requested;
  return CpuSupports(CpuIsa::kAvx512) ? CpuIsa::kAvx512
         : CpuSupports(CpuIsa::kAvx2) ? CpuIsa::kAvx2
                                      : CpuIsa::kBaseline;
}

std::vector<CpuIsa> SupportedCpuIsas() {
  std::vector<CpuIsa> isas{CpuIsa::kBaseline};
  for (CpuIsa i : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuSupports(i)) isas.push_back(i);
  }
  return isas;
}

}  // namespace anxin
