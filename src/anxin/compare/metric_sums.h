// The running sums of the metric kernel: what a MetricAccumulator
// (tensor_metrics.h) holds between Add calls and what each instruction set's
// kernel adds to. Plain integers and doubles only, so that the per-ISA units
// can include it without pulling in any inline code built for another
// instruction set.
#ifndef ANXIN_COMPARE_METRIC_SUMS_H_
#define ANXIN_COMPARE_METRIC_SUMS_H_

#include <cstdint>

namespace anxin::compare::kernel {

struct Sums {
  uint64_t n = 0, finite = 0, nan_mismatch = 0, inf_mismatch = 0;
  uint64_t rel_1e3 = 0, rel_5e3 = 0, ulp_gt1 = 0, allclose_viol = 0;
  uint64_t zero_ref_mismatch = 0;  // B == 0 and N != B: required rtol is infinite
  uint64_t out_count = 0, ref_count = 0;
  double sum_ab = 0, sum_aa = 0, sum_bb = 0, sum_abs = 0, sum_sq = 0, sum_rel = 0;
  double max_abs = 0, max_rel = 0, max_rel_nonzero_ref = 0, max_ulp = 0;
  double out_max = -__builtin_huge_val(), out_min = __builtin_huge_val(), out_sum = 0,
         out_sumsq = 0;
  double ref_max = -__builtin_huge_val(), ref_min = __builtin_huge_val(), ref_sum = 0,
         ref_sumsq = 0;
  // How the blocks ran (tensor_metrics.h, KernelStats).
  uint64_t blocks_fast = 0, blocks_zeros = 0, blocks_general = 0, blocks_retried = 0,
           blocks_recounted = 0;
};

}  // namespace anxin::compare::kernel

#endif  // ANXIN_COMPARE_METRIC_SUMS_H_
