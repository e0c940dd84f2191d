// `anxin precision check`: reads an msprobe dump and flags what breaks the
// FP32-master / BF16-gradient / FP16-activation policy (docs/kernels.md,
// "Precision check"):
//   fp16-overflow    a float16 tensor whose largest magnitude passes 65504
//                    (or whose statistics are already inf/NaN)
//   fp16-underflow   a float16 tensor whose typical magnitude (RMS) is below
//                    float16's smallest normal, 6.1e-5, or, with the data at
//                    hand, more than 1% of whose non-zero values are
//   update-lost      a weight gradient whose SGD update (lr x RMS of the
//                    gradient) is below half a bfloat16 ULP of the weight's RMS
//                    (2^-9 relative) while the weight is not float32: the
//                    update rounds away
//   master-not-fp32  a module parameter that is not float32
// With as_half, float32 tensors are judged as if the run used the policy's
// half formats (activations and gradients float16, weights bfloat16): what
// switching would break.
//
//   ANXIN_ASSIGN_OR_RETURN(PrecisionReport r, CheckPrecision("dump/step0/rank0", {}));
//   std::printf("%s", PrecisionText(r).c_str());
//   int exit_code = r.findings.empty() ? 0 : 1;  // what the command exits with
//
// Thread safety: all functions are pure.
#ifndef ANXIN_KERNELS_PRECISION_H_
#define ANXIN_KERNELS_PRECISION_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/dump.h"

namespace anxin::kernels {

struct PrecisionOptions {
  double learning_rate = 1e-4;
  bool as_half = false;
  double underflow_share = 0.01;  // share of non-zero values below 6.1e-5 that flags a tensor
};

struct PrecisionFinding {
  std::string kind;    // "fp16-overflow", "fp16-underflow", "update-lost", "master-not-fp32"
  std::string tensor;  // the dump's tensor name
  std::string dtype;   // as dumped
  std::string detail;  // the numbers behind it and what to do
};

struct PrecisionReport {
  std::string path;
  uint64_t tensors = 0, activations = 0, gradients = 0, weights = 0;
  std::vector<PrecisionFinding> findings;
};

// Checks a dump already loaded (compare::LoadDump).
PrecisionReport CheckDumpPrecision(const compare::Dump& dump, const PrecisionOptions& options);
// Loads the msprobe dump directory at path and checks it. A path that is
// not an msprobe dump -> kInvalidArgument.
[[nodiscard]] Result<PrecisionReport> CheckPrecision(const std::string& path,
                                                     const PrecisionOptions& options);

std::string PrecisionText(const PrecisionReport& report);
nlohmann::json PrecisionJson(const PrecisionReport& report);

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_PRECISION_H_
