#include "anxin/kernels/precision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

namespace anxin::kernels {
namespace {

constexpr double kHalfMax = 65504.0;
constexpr double kHalfMinNormal = 6.103515625e-05;
constexpr double kBf16HalfUlp = 1.0 / 512;  // half of bfloat16's 2^-8 relative spacing, at worst

// What the checks need of a tensor: from the dump's statistics, or from its data.
struct Summary {
  double max = 0, min = 0, rms = 0;
  bool finite = true;
  uint64_t elements = 0;
  std::optional<double> small_share;  // share of non-zero values below kHalfMinNormal
};

std::optional<Summary> Summarize(const compare::Tensor& t) {
  Summary s;
  s.elements = t.NumElements();
  if (t.HasData() && t.dtype && compare::IsFloating(*t.dtype) && s.elements > 0) {
    std::vector<double> buf(4096);
    double sumsq = 0;
    uint64_t nonzero = 0, small = 0;
    s.max = -INFINITY;
    s.min = INFINITY;
    for (uint64_t i = 0; i < s.elements; i += buf.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), s.elements - i));
      t.ReadDoubles(i, n, buf.data());
      for (size_t j = 0; j < n; ++j) {
        double x = buf[j];
        if (!std::isfinite(x)) {
          s.finite = false;
          continue;
        }
        s.max = std::max(s.max, x);
        s.min = std::min(s.min, x);
        sumsq += x * x;
        if (x != 0) {
          ++nonzero;
          small += std::fabs(x) < kHalfMinNormal;
        }
      }
    }
    s.rms = std::sqrt(sumsq / static_cast<double>(s.elements));
    if (nonzero > 0) s.small_share = static_cast<double>(small) / static_cast<double>(nonzero);
    return s;
  }
  if (!t.stats) return std::nullopt;
  s.max = t.stats->max;
  s.min = t.stats->min;
  s.finite =
      std::isfinite(t.stats->max) && std::isfinite(t.stats->min) && std::isfinite(t.stats->norm);
  s.rms = s.elements > 0 ? t.stats->norm / std::sqrt(static_cast<double>(s.elements)) : 0;
  return s;
}

enum class Role { kActivation, kGradient, kWeightGradient, kWeight };

Role RoleOf(const std::string& name) {
  if (name.find(".parameters_grad.") != std::string::npos) return Role::kWeightGradient;
  if (name.find(".parameters.") != std::string::npos) return Role::kWeight;
  if (name.find(".backward.") != std::string::npos) return Role::kGradient;
  return Role::kActivation;
}

// "Module.fc1.Linear.parameters_grad.0.weight" -> ("Module.fc1.Linear", "weight").
std::pair<std::string, std::string> ModuleAndParam(const std::string& name, const char* marker) {
  size_t at = name.find(marker);
  std::string module = name.substr(0, at);
  std::string rest = name.substr(at + std::char_traits<char>::length(marker));
  // parameters_grad.<call>.<param> or forward.<call>.parameters.<param>: the
  // parameter is the last component.
  size_t dot = rest.rfind('.');
  return {module, dot == std::string::npos ? rest : rest.substr(dot + 1)};
}

bool IsHalf(const compare::Tensor& t) { return t.dtype == compare::DType::kFloat16; }
bool IsFloat32(const compare::Tensor& t) { return t.dtype == compare::DType::kFloat32; }

std::string DTypeLabel(const compare::Tensor& t) {
  if (!t.dtype_label.empty()) return t.dtype_label;
  return t.dtype ? std::string(compare::DTypeName(*t.dtype)) : "?";
}

}  // namespace

PrecisionReport CheckDumpPrecision(const compare::Dump& dump, const PrecisionOptions& options) {
  PrecisionReport r;
  r.path = dump.path;
  // Weights by (module, parameter): the first forward call's statistics.
  std::map<std::pair<std::string, std::string>, const compare::Tensor*> weights;
  for (const compare::Tensor& t : dump.tensors) {
    if (RoleOf(t.name) != Role::kWeight) continue;
    size_t fwd = t.name.find(".forward.");
    if (fwd == std::string::npos) continue;
    auto key = ModuleAndParam(t.name, ".forward.");
    weights.emplace(key, &t);
  }
  for (const compare::Tensor& t : dump.tensors) {
    if (!t.dtype || !compare::IsFloating(*t.dtype)) continue;
    ++r.tensors;
    const Role role = RoleOf(t.name);
    std::optional<Summary> s = Summarize(t);
    auto add = [&](std::string kind, std::string detail) {
      r.findings.push_back({std::move(kind), t.name, DTypeLabel(t), std::move(detail)});
    };
    switch (role) {
      case Role::kActivation:
        ++r.activations;
        break;
      case Role::kGradient:
      case Role::kWeightGradient:
        ++r.gradients;
        break;
      case Role::kWeight:
        ++r.weights;
        break;
    }
    // Activations and gradients held (or, as_half, to be held) in float16.
    const bool judge_half =
        role != Role::kWeight && (IsHalf(t) || (options.as_half && IsFloat32(t)));
    if (judge_half && s) {
      const double peak = std::max(std::fabs(s->max), std::fabs(s->min));
      if (!s->finite) {
        add("fp16-overflow",
            "statistics hold inf or NaN: the values already overflowed; scale "
            "the loss down or keep this op in float32");
      } else if (peak > kHalfMax) {
        add("fp16-overflow", fmt::format("largest magnitude {:.4g} > 65504 (float16's maximum); "
                                         "keep this op in float32 or bfloat16",
                                         peak));
      } else if (s->rms > 0 && s->rms < kHalfMinNormal) {
        add("fp16-underflow",
            fmt::format("RMS {:.3g} < 6.1e-05 (float16's smallest normal): most values lose "
                        "precision or flush to zero; use loss scaling{}",
                        s->rms, role == Role::kActivation ? " or float32 for this op" : ""));
      } else if (s->small_share && *s->small_share > options.underflow_share) {
        add("fp16-underflow",
            fmt::format("{:.1f}% of non-zero values are below 6.1e-05 (float16's smallest "
                        "normal); use loss scaling",
                        100 * *s->small_share));
      }
    }
    if (role == Role::kWeight && !IsFloat32(t)) {
      add("master-not-fp32",
          "weights not float32: keep a float32 master copy in the optimizer and cast for the "
          "forward pass");
    }
    if (role == Role::kWeightGradient && s) {
      auto it = weights.find(ModuleAndParam(t.name, ".parameters_grad."));
      if (it != weights.end()) {
        const compare::Tensor& w = *it->second;
        std::optional<Summary> ws = Summarize(w);
        const bool half_weight = !IsFloat32(w) || options.as_half;
        if (ws && ws->rms > 0 && half_weight) {
          const double update = options.learning_rate * s->rms;
          const double relative = update / ws->rms;
          if (relative < kBf16HalfUlp) {
            add("update-lost",
                fmt::format("lr {:.3g} x gradient RMS {:.3g} = {:.3g}, {:.3g} of the weight's RMS "
                            "{:.3g} (< 2^-9, half a bfloat16 ULP): the step rounds away in "
                            "{} weights; keep a float32 master copy",
                            options.learning_rate, s->rms, update, relative, ws->rms,
                            IsFloat32(w) ? "bfloat16" : DTypeLabel(w)));
          }
        }
      }
    }
  }
  return r;
}

Result<PrecisionReport> CheckPrecision(const std::string& path, const PrecisionOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    return InvalidArgument(path +
                           ": not a directory: give an msprobe dump directory (the one "
                           "holding dump.json)");
  if (!std::filesystem::exists(std::filesystem::path(path) / "dump.json", ec))
    return InvalidArgument(path +
                           ": no dump.json: give an msprobe dump directory (e.g. "
                           "dump/step0/rank0)");
  if (!(options.learning_rate > 0) || !std::isfinite(options.learning_rate))
    return InvalidArgument(
        fmt::format("--lr {}: give a positive learning rate", options.learning_rate));
  ANXIN_ASSIGN_OR_RETURN(compare::Dump dump, compare::LoadDump(path, {}));
  return CheckDumpPrecision(dump, options);
}

std::string PrecisionText(const PrecisionReport& r) {
  std::string out = fmt::format(
      "{}: {} floating tensors ({} activations, {} gradients, {} weights); {} flagged\n", r.path,
      r.tensors, r.activations, r.gradients, r.weights, r.findings.size());
  if (r.findings.empty()) return out;
  size_t width = 6;
  for (const PrecisionFinding& f : r.findings) width = std::max(width, f.tensor.size());
  width = std::min<size_t>(width, 72);
  out += fmt::format("\n{:<16} {:<{}} {:<16} {}\n", "check", "tensor", width, "dtype", "detail");
  for (const PrecisionFinding& f : r.findings)
    out += fmt::format("{:<16} {:<{}} {:<16} {}\n", f.kind, f.tensor, width, f.dtype, f.detail);
  return out;
}

nlohmann::json PrecisionJson(const PrecisionReport& r) {
  nlohmann::json j;
  j["path"] = r.path;
  j["tensors"] = r.tensors;
  j["activations"] = r.activations;
  j["gradients"] = r.gradients;
  j["weights"] = r.weights;
  nlohmann::json f = nlohmann::json::array();
  for (const PrecisionFinding& x : r.findings)
    f.push_back(
        {{"check", x.kind}, {"tensor", x.tensor}, {"dtype", x.dtype}, {"detail", x.detail}});
  j["findings"] = std::move(f);
  j["flagged"] = r.findings.size();
  return j;
}

}  // namespace anxin::kernels
