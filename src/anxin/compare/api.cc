#include "anxin/compare/api.h"

#include <fmt/format.h>

#include "anxin/compare/dump_compare.h"

namespace anxin::compare {

std::string BufferComparison::Summary() const {
  std::string s = fmt::format(
      "{}: cosine {:.9g}, MaxAbsErr {:.6g}, MaxRelErr {:.6g}, RMSE {:.6g}, 1/1000 ratio {:.6f}",
      VerdictName(verdict), metrics.cosine, metrics.max_abs_err, metrics.max_rel_err, metrics.rmse,
      metrics.one_thousandth_ratio);
  if (metrics.max_ulp_err) s += fmt::format(", max ULP {:.6g}", *metrics.max_ulp_err);
  s += fmt::format(", required atol {:.6g} / rtol {:.6g}", metrics.required_atol,
                   metrics.required_rtol);
  for (const auto& r : reasons) s += "; " + r;
  return s;
}

BufferComparison CompareBuffers(DType out_dtype, const void* out, DType ref_dtype, const void* ref,
                                size_t count, const Thresholds& thresholds, unsigned threads) {
  Tensor a, b;
  a.dtype = out_dtype;
  b.dtype = ref_dtype;
  a.shape = b.shape = {static_cast<int64_t>(count)};
  a.data = static_cast<const uint8_t*>(out);
  b.data = static_cast<const uint8_t*>(ref);
  BufferComparison r;
  r.metrics = ComputePairMetrics(a, b, threads);
  VerdictResult v = Decide(r.metrics, thresholds);
  r.verdict = v.verdict;
  r.reasons = std::move(v.reasons);
  return r;
}

}  // namespace anxin::compare
