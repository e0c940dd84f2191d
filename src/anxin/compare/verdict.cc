#include "anxin/compare/verdict.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cmath>
#include <utility>

namespace anxin::compare {
namespace {

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

Result<ThresholdRules> ThresholdRules::FromConfig(const ConfigNode& root) {
  ThresholdRules rules;
  if (root.IsNull()) return rules;
  if (!root.IsMap())
    return std::unexpected(root.MakeError("expected a map, got " + root.DescribeKind()));
  ANXIN_TRY(root.CheckKeys({"default", "dtypes", "ops", "statistics"}));

  auto parse_override = [](const ConfigNode& n, bool allow_match) -> Result<Override> {
    if (!n.IsMap()) return std::unexpected(n.MakeError("expected a map, got " + n.DescribeKind()));
    std::vector<std::string_view> known = {"pass_cosine",      "pass_max_abs_err", "fail_cosine",
                                           "fail_max_abs_err", "pass_rel_diff",    "fail_rel_diff"};
    if (allow_match) known.push_back("match");
    ANXIN_TRY(n.CheckKeys(known));
    Override o;
    const std::pair<std::string_view, std::optional<double>*> slots[] = {
        {"pass_cosine", &o.pass_cosine},          {"pass_max_abs_err", &o.pass_max_abs_err},
        {"fail_cosine", &o.fail_cosine},          {"fail_max_abs_err", &o.fail_max_abs_err},
        {"pass_rel_diff", &o.pass_stat_rel_diff}, {"fail_rel_diff", &o.fail_stat_rel_diff}};
    for (const auto& [key, slot] : slots) {
      std::optional<ConfigNode> c = n.Find(key);
      if (!c || c->IsNull()) continue;
      ANXIN_ASSIGN_OR_RETURN(double v, c->As<double>());
      if (!std::isfinite(v) || v < 0)
        return std::unexpected(c->MakeError(fmt::format("{} must be a finite number >= 0", v)));
      *slot = v;
    }
    return o;
  };

  if (auto d = root.Find("default"); d && !d->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(rules.default_, parse_override(*d, false));
  }
  if (auto st = root.Find("statistics"); st && !st->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(*st, false));
    if (o.pass_stat_rel_diff) rules.default_.pass_stat_rel_diff = o.pass_stat_rel_diff;
    if (o.fail_stat_rel_diff) rules.default_.fail_stat_rel_diff = o.fail_stat_rel_diff;
  }
  if (auto dts = root.Find("dtypes")) {
    ANXIN_ASSIGN_OR_RETURN(auto entries, dts->Entries());
    for (const auto& [name, node] : entries) {
      auto dt = ParseDTypeName(name);
      if (!dt)
        return std::unexpected(
            node.MakeError(fmt::format("unknown dtype '{}' (e.g. float16, bfloat16)", name)));
      ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(node, false));
      rules.dtypes_.emplace_back(*dt, o);
    }
  }
  if (auto ops = root.Find("ops")) {
    ANXIN_ASSIGN_OR_RETURN(auto list, ops->Elements());
    for (const ConfigNode& e : list) {
      std::optional<ConfigNode> match = e.IsMap() ? e.Find("match") : std::nullopt;
      if (!match || !match->IsScalar())
        return std::unexpected(e.MakeError("needs match: GLOB (a list of {match: GLOB, ...})"));
      ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(e, true));
      rules.ops_.emplace_back(match->ScalarText(), o);
    }
  }
  return rules;
}

Result<ThresholdRules> ThresholdRules::ParseYaml(std::string_view text, const std::string& source) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(text, source));
  return FromConfig(root);
}

Result<ThresholdRules> ThresholdRules::LoadYaml(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  return FromConfig(root);
}

Result<ThresholdRules> ThresholdRules::LoadConfigSection(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  std::optional<ConfigNode> section = root.IsMap() ? root.Find("compare") : std::nullopt;
  if (!section) return ThresholdRules();
  return FromConfig(*section);
}

Thresholds ThresholdRules::For(const std::string& name, std::optional<DType> dtype) const {
  Thresholds t;
  default_.ApplyTo(t);
  if (dtype)
    for (const auto& [d, o] : dtypes_)
      if (d == *dtype) o.ApplyTo(t);
  // A pattern matches the whole name or what follows its last '/' (the rank
  // directory of a dump tree, the path of a tensor file).
  const size_t slash = name.rfind('/');
  const std::string base = slash == std::string::npos ? std::string() : name.substr(slash + 1);
  for (const auto& [glob, o] : ops_)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0 ||
        (!base.empty() && ::fnmatch(glob.c_str(), base.c_str(), 0) == 0))
      o.ApplyTo(t);
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
