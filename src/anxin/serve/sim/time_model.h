// How long one scheduler step takes on the simulated device: prefill time by
// prefill tokens, decode time by batch size (both interpolated from a table),
// plus the time to read the batch's KV cache at a given bandwidth, which is
// what a smaller KV format saves. The serving simulator advances its clock by
// these figures: simulated time, not a measurement.
//
//   ANXIN_ASSIGN_OR_RETURN(TimeModel tm, TimeModel::LoadFile("examples/serve/time-model.yaml"));
//   double s = tm.StepSeconds({.prefill_tokens = 512, .decode_batch = 32,
//                              .kv_bytes_read = 2.1e9});
//
// File (YAML):
//   prefill: [[1, 9.0], [512, 21.5], [2048, 83.0]]   # [tokens, ms]
//   decode:  [[1, 9.0], [64, 9.0], [256, 11.2]]      # [batch, ms], weights and compute
//   kv_read_gbps: 2000                               # 0: KV reads cost nothing extra
//   step_overhead_ms: 0.5                            # scheduling, sampling, launch
//
// Between points the time is linear; beyond the last point it continues the
// last segment's slope; below the first it scales towards zero.
// Thread safety: immutable after construction.
#ifndef ANXIN_SERVE_SIM_TIME_MODEL_H_
#define ANXIN_SERVE_SIM_TIME_MODEL_H_

#include <string>
#include <utility>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::serve::sim {

struct StepWork {
  int prefill_tokens = 0;
  int decode_batch = 0;
  double kv_bytes_read = 0;  // K/V read by the decode batch (all layers)
};

class TimeModel {
 public:
  using Table = std::vector<std::pair<double, double>>;  // (x, milliseconds), x ascending

  // A roofline estimate for an 8B-parameter model in bf16 on one 80 GB
  // H100-class GPU (16 GB of weights read per step at 2 TB/s effective, 400
  // TFLOP/s effective): an example, not a measurement; see docs/serve.md.
  static TimeModel Default();
  [[nodiscard]] static Result<TimeModel> LoadFile(const std::string& path);
  [[nodiscard]] static Result<TimeModel> Parse(std::string_view yaml, const std::string& source);

  double StepSeconds(const StepWork& work) const;
  std::string Describe() const;

  Table prefill_ms, decode_ms;
  double kv_read_gbps = 0;
  double step_overhead_ms = 0;
  std::string source = "built-in roofline (8B bf16, H100-class)";
};

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_TIME_MODEL_H_
