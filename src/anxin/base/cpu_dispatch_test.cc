#include "anxin/base/cpu_dispatch.h"

#include <gtest/gtest.h>

namespace anxin {
namespace {

TEST(CpuDispatch, AutoPicksTheLastSupportedLevel) {
  const std::vector<CpuIsa> here = SupportedCpuIsas();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(here.front(), CpuIsa::kBaseline);
  EXPECT_EQ(ResolveCpuIsa(CpuIsa::kAuto), here.back());
  for (CpuIsa isa : here) {
    EXPECT_TRUE(CpuSupports(isa)) << CpuIsaName(isa);
    EXPECT_EQ(ResolveCpuIsa(isa), isa) << CpuIsaName(isa);
  }
}

TEST(CpuDispatch, AnUnsupportedLevelFallsBackToTheBest) {
  EXPECT_EQ(ResolveCpuIsa(CpuIsa::kBaseline), CpuIsa::kBaseline);
  if (CpuSupports(CpuIsa::kAvx512)) GTEST_SKIP() << "this CPU runs every level";
  EXPECT_EQ(ResolveCpuIsa(CpuIsa::kAvx512), SupportedCpuIsas().back());
  // AVX-512 builds need what AVX2 builds need.
  EXPECT_FALSE(!CpuSupports(CpuIsa::kAvx2) && CpuSupports(CpuIsa::kAvx512));
}

TEST(CpuDispatch, Names) {
  EXPECT_EQ(CpuIsaName(CpuIsa::kAuto), "auto");
  EXPECT_EQ(CpuIsaName(CpuIsa::kAvx512), "avx512");
}

}  // namespace
}  // namespace anxin
