#include "anxin/serve/sim/time_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "anxin/base/config.h"
#include "anxin/base/file.h"

namespace anxin::serve::sim {
namespace {

double Interpolate(const TimeModel::Table& t, double x) {
  if (t.empty() || x <= 0) return 0;
  if (x <= t.front().first) return t.front().second * x / t.front().first;
  for (size_t i = 1; i < t.size(); ++i) {
    if (x <= t[i].first) {
      const auto& [x0, y0] = t[i - 1];
      const auto& [x1, y1] = t[i];
      return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
    }
  }
  if (t.size() == 1) return t.front().second * x / t.front().first;
  const auto& [x0, y0] = t[t.size() - 2];
  const auto& [x1, y1] = t.back();
  return y1 + (y1 - y0) * (x - x1) / (x1 - x0);
}

Result<TimeModel::Table> ReadTable(const ConfigNode& root, std::string_view key) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode node, root.Child(key));
  ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> rows, node.Elements());
  if (rows.empty()) return std::unexpected(node.MakeError("needs at least one [x, ms] row"));
  TimeModel::Table t;
  for (const ConfigNode& row : rows) {
    ANXIN_ASSIGN_OR_RETURN(std::vector<double> v, row.As<std::vector<double>>());
    if (v.size() != 2 || !(v[0] > 0) || !(v[1] >= 0)) {
      return std::unexpected(row.MakeError("each row is [x > 0, milliseconds >= 0]"));
    }
    if (!t.empty() && v[0] <= t.back().first) {
      return std::unexpected(row.MakeError("rows must be in increasing order of x"));
    }
    t.emplace_back(v[0], v[1]);
  }
  return t;
}

}  // namespace

TimeModel TimeModel::Default() {
  TimeModel m;
  // Decode: max(weights read, compute) per step; prefill: the same roofline
  // over the prompt's tokens (2 x 8e9 FLOP per token at 400 TFLOP/s).
  m.decode_ms = {{1, 8.0}, {200, 8.0}, {256, 10.24}, {512, 20.48}, {1024, 40.96}};
  m.prefill_ms = {{1, 8.0}, {200, 8.0}, {512, 20.48}, {2048, 81.92}, {8192, 327.68}};
  m.kv_read_gbps = 2000;
  m.step_overhead_ms = 1.0;
  return m;
}

Result<TimeModel> TimeModel::Parse(std::string_view yaml, const std::string& source) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(yaml, source));
  ANXIN_TRY(root.CheckKeys({"prefill", "decode", "kv_read_gbps", "step_overhead_ms"}));
  TimeModel m;
  m.source = source;
  ANXIN_ASSIGN_OR_RETURN(m.prefill_ms, ReadTable(root, "prefill"));
  ANXIN_ASSIGN_OR_RETURN(m.decode_ms, ReadTable(root, "decode"));
  ANXIN_ASSIGN_OR_RETURN(m.kv_read_gbps, root.GetInRange<double>("kv_read_gbps", 0, 1e6, 0));
  ANXIN_ASSIGN_OR_RETURN(m.step_overhead_ms,
                         root.GetInRange<double>("step_overhead_ms", 0, 1e5, 0));
  return m;
}

Result<TimeModel> TimeModel::LoadFile(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

double TimeModel::StepSeconds(const StepWork& w) const {
  if (w.prefill_tokens <= 0 && w.decode_batch <= 0) return 0;
  double ms = step_overhead_ms;
  // One forward pass serves both: the weights are read once, so the step
  // takes the larger of the two plus the KV reads.
  ms += std::max(Interpolate(prefill_ms, w.prefill_tokens + w.decode_batch),
                 Interpolate(decode_ms, w.decode_batch));
  if (kv_read_gbps > 0) ms += w.kv_bytes_read / (kv_read_gbps * 1e9) * 1e3;
  return ms / 1e3;
}

std::string TimeModel::Describe() const {
  auto row = [](const Table& t) {
    std::string s;
    for (const auto& [x, y] : t) s += fmt::format("{}{:g}:{:g}ms", s.empty() ? "" : " ", x, y);
    return s;
  };
  return fmt::format("{}: prefill {}; decode {}; KV read {:g} GB/s; overhead {:g} ms", source,
                     row(prefill_ms), row(decode_ms), kv_read_gbps, step_overhead_ms);
}

}  // namespace anxin::serve::sim
