// Run-time choice among per-instruction-set builds of a kernel. A module that
// compiles its hot loops once per level (baseline x86-64; AVX2 with FMA and
// F16C; AVX-512 F/BW/VL/DQ) asks here which one this CPU runs, so that every
// module detects the CPU the same way, once.
//
//   switch (ResolveCpuIsa(CpuIsa::kAuto)) {   // or a level a user asked for
//     case CpuIsa::kAvx512: /* the AVX-512 build */ break;
//     case CpuIsa::kAvx2: /* the AVX2 build */ break;
//     default: /* the baseline build */ break;
//   }
//   std::vector<CpuIsa> here = SupportedCpuIsas();   // baseline first
//
// Thread safety: pure functions (the detection runs once, thread-safely).
#ifndef ANXIN_BASE_CPU_DISPATCH_H_
#define ANXIN_BASE_CPU_DISPATCH_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace anxin {

// Modules keep their own enums of the same layout (compare::KernelPath,
// kv::KvIsa) and convert with static_cast.
enum class CpuIsa : uint8_t { kAuto, kBaseline, kAvx2, kAvx512 };
std::string_view CpuIsaName(CpuIsa isa);  // "auto", "baseline", "avx2", "avx512"

// Whether this CPU runs the level's builds: kAvx2 needs avx2, fma, f16c and
// popcnt; kAvx512 those and avx512f, avx512bw, avx512vl and avx512dq. kAuto
// and kBaseline: always.
bool CpuSupports(CpuIsa isa);
// requested when this CPU supports it and it is not kAuto; else the best
// level it supports.
CpuIsa ResolveCpuIsa(CpuIsa requested);
// The levels this CPU runs, kBaseline first; the last is kAuto's choice.
std::vector<CpuIsa> SupportedCpuIsas();

}  // namespace anxin

#endif  // ANXIN_BASE_CPU_DISPATCH_H_
