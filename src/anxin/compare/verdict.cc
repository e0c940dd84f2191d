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

// The allowed values of a threshold key.
enum class Range {
  kCosine,       // [-1, 1): 1 would make pass (cosine > 1) or every pair's fail certain
  kPositive,     // (0, inf): MaxAbsErr >= 0 always, so 0 would fail or never pass anything
  kRelativeDiff  // [0, 2]: the statistics difference |o-r| / max(|o|, |r|) lies in [0, 2]
};

bool InRange(Range r, double v) {
  if (!std::isfinite(v)) return false;
  switch (r) {
    case Range::kCosine:
      return v >= -1 && v < 1;
    case Range::kPositive:
      return v > 0;
    case Range::kRelativeDiff:
      return v >= 0 && v <= 2;
  }
  return false;
}

std::string_view RangeText(Range r) {
  switch (r) {
    case Range::kCosine:
      return "in [-1, 1) (a cosine; 1 would leave no pair passing, or every pair failing)";
    case Range::kPositive:
      return "a finite number > 0 (MaxAbsErr is never below 0)";
    case Range::kRelativeDiff:
      return "in [0, 2] (the statistics difference |o-r| / max(|o|, |r|) lies in [0, 2])";
  }
  return "";
}

// A pass bound and its fail bound, which must not cross.
struct ThresholdPair {
  const char* pass_key;
  const char* fail_key;
  double Thresholds::*pass;
  double Thresholds::*fail;
  bool pass_above;  // pass bound >= fail bound (cosine), else <= (errors)
  const char* rule;
};
constexpr ThresholdPair kThresholdPairs[] = {
    {"pass_cosine", "fail_cosine", &Thresholds::pass_cosine, &Thresholds::fail_cosine, true,
     "pass needs cosine > pass_cosine and fail is cosine <= fail_cosine"},
    {"pass_max_abs_err", "fail_max_abs_err", &Thresholds::pass_max_abs_err,
     &Thresholds::fail_max_abs_err, false,
     "pass needs MaxAbsErr < pass_max_abs_err and fail is MaxAbsErr >= fail_max_abs_err"},
    {"pass_rel_diff", "fail_rel_diff", &Thresholds::pass_stat_rel_diff,
     &Thresholds::fail_stat_rel_diff, false,
     "pass needs every statistics difference <= pass_rel_diff and fail is one > fail_rel_diff"},
};

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
    const struct {
      std::string_view key;
      std::optional<double>* slot;
      Range range;
    } slots[] = {{"pass_cosine", &o.pass_cosine, Range::kCosine},
                 {"pass_max_abs_err", &o.pass_max_abs_err, Range::kPositive},
                 {"fail_cosine", &o.fail_cosine, Range::kCosine},
                 {"fail_max_abs_err", &o.fail_max_abs_err, Range::kPositive},
                 {"pass_rel_diff", &o.pass_stat_rel_diff, Range::kRelativeDiff},
                 {"fail_rel_diff", &o.fail_stat_rel_diff, Range::kRelativeDiff}};
    for (const auto& [key, slot, range] : slots) {
      std::optional<ConfigNode> c = n.Find(key);
      if (!c || c->IsNull()) continue;
      ANXIN_ASSIGN_OR_RETURN(double v, c->As<double>());
      if (!InRange(range, v))
        return std::unexpected(c->MakeError(
            fmt::format("{} is out of range: {} must be {}", v, key, RangeText(range))));
      *slot = v;
    }
    return o;
  };

  // Each rule, applied over the ones below it, must keep every pass bound
  // on the pass side of its fail bound. `nodes` are the rules that set the
  // values, the most specific first; `with` says which rules were combined.
  auto check = [](const Thresholds& t, std::initializer_list<const ConfigNode*> nodes,
                  const std::string& with) -> Status {
    for (const ThresholdPair& pair : kThresholdPairs) {
      const double pass = t.*(pair.pass), fail = t.*(pair.fail);
      if (pair.pass_above ? pass >= fail : pass <= fail) continue;
      // Point at the key of the most specific rule that sets one of the two.
      auto sets = [](const ConfigNode* n, const char* key) {
        std::optional<ConfigNode> c = n->Find(key);
        return c && !c->IsNull();
      };
      for (const ConfigNode* n : nodes) {
        const bool sets_pass = sets(n, pair.pass_key), sets_fail = sets(n, pair.fail_key);
        if (!sets_pass && !sets_fail) continue;
        const char* key = sets_pass ? pair.pass_key : pair.fail_key;
        const char* other = sets_pass ? pair.fail_key : pair.pass_key;
        const bool below = sets_pass == pair.pass_above;
        return std::unexpected(n->Find(key)->MakeError(
            fmt::format("{} is {} {} {}{}: {}, so {} must be {} {}", sets_pass ? pass : fail,
                        below ? "below" : "above", other, sets_pass ? fail : pass, with, pair.rule,
                        pair.pass_key, pair.pass_above ? ">=" : "<=", pair.fail_key)));
      }
    }
    return Ok();
  };

  // The defaults: built in, then `default:`, then `statistics:`.
  std::vector<ConfigNode> base_nodes;
  if (auto d = root.Find("default"); d && !d->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(rules.default_, parse_override(*d, false));
    base_nodes.push_back(*d);
  }
  if (auto st = root.Find("statistics"); st && !st->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(*st, false));
    if (o.pass_stat_rel_diff) rules.default_.pass_stat_rel_diff = o.pass_stat_rel_diff;
    if (o.fail_stat_rel_diff) rules.default_.fail_stat_rel_diff = o.fail_stat_rel_diff;
    base_nodes.insert(base_nodes.begin(), *st);
  }
  Thresholds base;
  rules.default_.ApplyTo(base);
  if (base_nodes.size() == 2) {
    ANXIN_TRY(check(base, {&base_nodes[0], &base_nodes[1]}, ""));
  } else if (base_nodes.size() == 1) {
    ANXIN_TRY(check(base, {&base_nodes[0]}, ""));
  }
  std::vector<std::pair<ConfigNode, Thresholds>> dtype_bases;
  if (auto dts = root.Find("dtypes")) {
    ANXIN_ASSIGN_OR_RETURN(auto entries, dts->Entries());
    for (const auto& [name, node] : entries) {
      auto dt = ParseDTypeName(name);
      if (!dt)
        return std::unexpected(
            node.MakeError(fmt::format("unknown dtype '{}' (e.g. float16, bfloat16)", name)));
      ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(node, false));
      Thresholds t = base;
      o.ApplyTo(t);
      ANXIN_TRY(check(t, {&node}, ""));
      rules.dtypes_.emplace_back(*dt, o);
      dtype_bases.emplace_back(node, t);
    }
  }
  if (auto ops = root.Find("ops")) {
    ANXIN_ASSIGN_OR_RETURN(auto list, ops->Elements());
    for (const ConfigNode& e : list) {
      std::optional<ConfigNode> match = e.IsMap() ? e.Find("match") : std::nullopt;
      if (!match || !match->IsScalar())
        return std::unexpected(e.MakeError("needs match: GLOB (a list of {match: GLOB, ...})"));
      ANXIN_ASSIGN_OR_RETURN(Override o, parse_override(e, true));
      // On its own over the defaults, and over each dtype rule it may meet.
      Thresholds t = base;
      o.ApplyTo(t);
      ANXIN_TRY(check(t, {&e}, ""));
      for (const auto& [node, below] : dtype_bases) {
        Thresholds td = below;
        o.ApplyTo(td);
        ANXIN_TRY(check(td, {&e, &node}, " (with " + node.path() + ")"));
      }
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
