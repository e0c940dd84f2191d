// pass / warn / fail for one compared pair, from thresholds that can be set
// per dtype and per op.
//
//   ANXIN_ASSIGN_OR_RETURN(ThresholdRules rules, ThresholdRules::LoadYaml("thr.yaml"));
//   Thresholds t = rules.For("Functional.softmax.0.forward.output.0", DType::kBFloat16);
//   Metrics metrics;   // of the pair, from MetricAccumulator::Finish (tensor_metrics.h)
//   VerdictResult v = Decide(metrics, t);   // v.verdict, v.reasons
//
// Defaults follow reference.md: pass needs cosine > 0.99 and MaxAbsErr < 0.001;
// fail is cosine <= 0.9, MaxAbsErr >= 1, or NaN/Inf at different positions.
// Everything between warns. A threshold file looks like
//
//   [yaml]
//   default:   {pass_cosine: 0.99, pass_max_abs_err: 0.001, fail_cosine: 0.9}
//   dtypes:
//     bfloat16: {pass_max_abs_err: 0.01}
//   ops:                             # applied in order; later rules win
//     - match: "*softmax*"           # glob on the tensor name
//       pass_cosine: 0.999
//   statistics: {pass_rel_diff: 0.005, fail_rel_diff: 0.5}
//
// and may also be the `compare:` section of anxin's --config file.
#ifndef ANXIN_COMPARE_VERDICT_H_
#define ANXIN_COMPARE_VERDICT_H_

#include <optional>
#include <string>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/compare/dtype.h"
#include "anxin/compare/tensor.h"
#include "anxin/compare/tensor_metrics.h"

namespace anxin::compare {

enum class Verdict { kPass, kWarn, kFail };
std::string_view VerdictName(Verdict v);  // "pass", "warn", "fail"
// 0 pass, 1 warn, 2 fail: for ordering pairs worst first.
inline int VerdictRank(Verdict v) { return v == Verdict::kFail ? 2 : v == Verdict::kWarn ? 1 : 0; }

struct Thresholds {
  double pass_cosine = 0.99;        // pass needs cosine > this
  double pass_max_abs_err = 0.001;  // ... and MaxAbsErr < this
  double fail_cosine = 0.9;         // fail when cosine <= this
  double fail_max_abs_err = 1.0;    // ... or MaxAbsErr >= this
  // Statistics mode: relative difference |o-r| / max(|o|, |r|) of Max, Min,
  // Mean and Norm (msprobe's magnitude check fails above 0.5).
  double pass_stat_rel_diff = 0.005;
  double fail_stat_rel_diff = 0.5;
};

class ThresholdRules {
 public:
  ThresholdRules() = default;
  // Reads a threshold document (see above) already parsed, e.g. the
  // `compare:` section of the global configuration (FindSection). Errors
  // read "file:line:col: key.path: problem".
  static Result<ThresholdRules> FromConfig(const ConfigNode& root);
  // Parses a threshold document; source names it in messages.
  static Result<ThresholdRules> ParseYaml(std::string_view text, const std::string& source);
  static Result<ThresholdRules> LoadYaml(const std::string& path);
  // Reads the `compare:` section of a config file; no section -> defaults.
  static Result<ThresholdRules> LoadConfigSection(const std::string& path);

  // Defaults, then the dtype's rule, then every matching op rule in order. A
  // pattern matches the whole name or the part after its last '/'.
  Thresholds For(const std::string& name, std::optional<DType> dtype) const;

 private:
  struct Override {
    std::optional<double> pass_cosine, pass_max_abs_err, fail_cosine, fail_max_abs_err,
        pass_stat_rel_diff, fail_stat_rel_diff;
    void ApplyTo(Thresholds& t) const;
  };
  Override default_;
  std::vector<std::pair<DType, Override>> dtypes_;
  std::vector<std::pair<std::string, Override>> ops_;
};

struct VerdictResult {
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;  // why not pass, e.g. "cosine 0.95 <= 0.99"
};

VerdictResult Decide(const Metrics& m, const Thresholds& t);

// Statistics-mode differences: |o-r| / max(|o|, |r|), 0 when both are 0.
struct StatDiffs {
  double max = 0, min = 0, mean = 0, norm = 0;
  double Worst() const;
};
StatDiffs DiffStats(const TensorStats& out, const TensorStats& ref);
VerdictResult DecideStats(const StatDiffs& d, const Thresholds& t);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_VERDICT_H_
