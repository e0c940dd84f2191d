#include "anxin/compare/verdict.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace anxin::compare {
namespace {

std::string Where(const std::string& source, const YAML::Node& n, const std::string& path) {
  const YAML::Mark m = n.Mark();
  return fmt::format("{}:{}:{}: {}", source, m.line + 1, m.column + 1, path);
}

double StatDiff(double o, double r) {
  if (o == r) return 0.0;  // also equal infinities
  if (std::isnan(o) || std::isnan(r) || std::isinf(o) || std::isinf(r)) return HUGE_VAL;
  return std::fabs(o - r) / std::fmax(std::fabs(o), std::fabs(r));
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
  }
  return "fail";
}

void ThresholdRules::Override::ApplyTo(Thresholds& t) const {
  if (pass_cosine) t.pass_cosine = *pass_cosine;
  if (pass_max_abs_err) t.pass_max_abs_err = *pass_max_abs_err;
  if (fail_cosine) t.fail_cosine = *fail_cosine;
  if (fail_max_abs_err) t.fail_max_abs_err = *fail_max_abs_err;
  if (pass_stat_rel_diff) t.pass_stat_rel_diff = *pass_stat_rel_diff;
  if (fail_stat_rel_diff) t.fail_stat_rel_diff = *fail_stat_rel_diff;
}

Result<ThresholdRules> ThresholdRules::ParseYaml(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  ThresholdRules rules;
  if (root.IsNull()) return rules;
  if (!root.IsMap()) return InvalidArgument(Where(source, root, "") + " expected a mapping");

  auto parse_override = [&](const YAML::Node& n, const std::string& path,
                            bool allow_match) -> Result<Override> {
    if (!n.IsMap()) return InvalidArgument(Where(source, n, path) + ": expected a mapping");
    Override o;
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string key = it->first.as<std::string>();
      std::string kp = path.empty() ? key : path + "." + key;
      std::optional<double>* slot = nullptr;
      if (key == "pass_cosine")
        slot = &o.pass_cosine;
      else if (key == "pass_max_abs_err")
        slot = &o.pass_max_abs_err;
      else if (key == "fail_cosine")
        slot = &o.fail_cosine;
      else if (key == "fail_max_abs_err")
        slot = &o.fail_max_abs_err;
      else if (key == "pass_rel_diff")
        slot = &o.pass_stat_rel_diff;
      else if (key == "fail_rel_diff")
        slot = &o.fail_stat_rel_diff;
      else if (key == "match" && allow_match)
        continue;
      else
        return InvalidArgument(
            fmt::format("{}: unknown key '{}' (known: pass_cosine, pass_max_abs_err, fail_cosine, "
                        "fail_max_abs_err, pass_rel_diff, fail_rel_diff{})",
                        Where(source, it->first, path), key, allow_match ? ", match" : ""));
      double v;
      try {
        v = it->second.as<double>();
      } catch (const YAML::Exception&) {
        return InvalidArgument(fmt::format("{}: expected a number, got '{}'",
                                           Where(source, it->second, kp),
                                           it->second.IsScalar() ? it->second.Scalar() : "?"));
      }
      if (!std::isfinite(v) || v < 0)
        return InvalidArgument(
            fmt::format("{}: {} must be a finite number >= 0", Where(source, it->second, kp), v));
      *slot = v;
    }
    return o;
  };

  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.as<std::string>();
    YAML::Node v = it->second;  // a copy: iterator values are proxies
    if (key == "default") {
      ANXIN_ASSIGN_OR_RETURN(rules.default_, parse_override(v, "default", false));
    } else if (key == "statistics") {
      ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(v, "statistics", false));
      if (o.pass_stat_rel_diff) rules.default_.pass_stat_rel_diff = o.pass_stat_rel_diff;
      if (o.fail_stat_rel_diff) rules.default_.fail_stat_rel_diff = o.fail_stat_rel_diff;
    } else if (key == "dtypes") {
      if (!v.IsMap()) return InvalidArgument(Where(source, v, "dtypes") + ": expected a mapping");
      for (auto d = v.begin(); d != v.end(); ++d) {
        std::string name = d->first.as<std::string>();
        auto dt = ParseDTypeName(name);
        if (!dt)
          return InvalidArgument(fmt::format("{}: unknown dtype '{}' (e.g. float16, bfloat16)",
                                             Where(source, d->first, "dtypes"), name));
        ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(d->second, "dtypes." + name, false));
        rules.dtypes_.emplace_back(*dt, o);
      }
    } else if (key == "ops") {
      if (!v.IsSequence())
        return InvalidArgument(Where(source, v, "ops") + ": expected a list of {match: GLOB, ...}");
      for (size_t i = 0; i < v.size(); ++i) {
        std::string p = fmt::format("ops[{}]", i);
        if (!v[i].IsMap() || !v[i]["match"] || !v[i]["match"].IsScalar())
          return InvalidArgument(Where(source, v[i], p) + ": needs match: GLOB");
        ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(v[i], p, true));
        rules.ops_.emplace_back(v[i]["match"].as<std::string>(), o);
      }
    } else {
      return InvalidArgument(
          fmt::format("{}: unknown key '{}' (known: default, dtypes, ops, statistics)",
                      Where(source, it->first, ""), key));
    }
  }
  return rules;
}

Result<ThresholdRules> ThresholdRules::LoadYaml(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open the threshold file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseYaml(ss.str(), path);
}

Result<ThresholdRules> ThresholdRules::LoadConfigSection(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open the config file");
  std::stringstream ss;
  ss << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(ss.str());
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!root.IsMap() || !root["compare"]) return ThresholdRules();
  YAML::Emitter out;
  out << root["compare"];
  // Re-parse the section alone; line numbers then count from the section.
  return ParseYaml(out.c_str(), path + " (compare section)");
}

Thresholds ThresholdRules::For(const std::string& name, std::optional<DType> dtype) const {
  Thresholds t;
  default_.ApplyTo(t);
  if (dtype)
    for (const auto& [d, o] : dtypes_)
      if (d == *dtype) o.ApplyTo(t);
  for (const auto& [glob, o] : ops_)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) o.ApplyTo(t);
  return t;
}

VerdictResult Decide(const Metrics& m, const Thresholds& t) {
  VerdictResult r;
  bool fail = false, warn = false;
  if (m.nan_mismatch > 0) {
    fail = true;
    r.reasons.push_back(fmt::format("NaN at {} different positions", m.nan_mismatch));
  }
  if (m.inf_mismatch > 0) {
    fail = true;
    r.reasons.push_back(fmt::format("Inf at {} different positions", m.inf_mismatch));
  }
  // A NaN cosine (one side all zeros) says nothing; MaxAbsErr decides then.
  if (!std::isnan(m.cosine)) {
    if (m.cosine <= t.fail_cosine) {
      fail = true;
      r.reasons.push_back(fmt::format("cosine {:.6g} <= {}", m.cosine, t.fail_cosine));
    } else if (!(m.cosine > t.pass_cosine)) {
      warn = true;
      r.reasons.push_back(fmt::format("cosine {:.6g} <= {}", m.cosine, t.pass_cosine));
    }
  }
  if (m.max_abs_err >= t.fail_max_abs_err) {
    fail = true;
    r.reasons.push_back(fmt::format("MaxAbsErr {:.6g} >= {}", m.max_abs_err, t.fail_max_abs_err));
  } else if (!(m.max_abs_err < t.pass_max_abs_err)) {
    warn = true;
    r.reasons.push_back(fmt::format("MaxAbsErr {:.6g} >= {}", m.max_abs_err, t.pass_max_abs_err));
  }
  r.verdict = fail ? Verdict::kFail : warn ? Verdict::kWarn : Verdict::kPass;
  return r;
}

double StatDiffs::Worst() const { return std::fmax(std::fmax(max, min), std::fmax(mean, norm)); }

StatDiffs DiffStats(const TensorStats& o, const TensorStats& r) {
  return {StatDiff(o.max, r.max), StatDiff(o.min, r.min), StatDiff(o.mean, r.mean),
          StatDiff(o.norm, r.norm)};
}

VerdictResult DecideStats(const StatDiffs& d, const Thresholds& t) {
  VerdictResult r;
  bool fail = false, warn = false;
  auto check = [&](const char* what, double v) {
    if (v > t.fail_stat_rel_diff) {
      fail = true;
      r.reasons.push_back(fmt::format("{} differs by {:.4g} > {}", what, v, t.fail_stat_rel_diff));
    } else if (v > t.pass_stat_rel_diff) {
      warn = true;
      r.reasons.push_back(fmt::format("{} differs by {:.4g} > {}", what, v, t.pass_stat_rel_diff));
    }
  };
  check("Max", d.max);
  check("Min", d.min);
  check("Mean", d.mean);
  check("Norm", d.norm);
  r.verdict = fail ? Verdict::kFail : warn ? Verdict::kWarn : Verdict::kPass;
  return r;
}

}  // namespace anxin::compare
