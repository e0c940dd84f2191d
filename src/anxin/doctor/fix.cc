#include "anxin/doctor/fix.h"

namespace anxin::doctor {

std::vector<PlannedFix> CollectFixes(const Report& report) {
  std::vector<PlannedFix> out;
  for (const Finding& f : report.findings) {
    if (f.severity != Severity::kFail && f.severity != Severity::kWarn) continue;
    for (const FixAction& a : f.actions) out.push_back({f.check_id, a});
  }
  return out;
}

std::vector<FixOutcome> ApplyFixes(const std::vector<PlannedFix>& fixes, const host::HostRoot& root,
                                   bool apply, const ProcessRunner& run) {
  std::vector<FixOutcome> out;
  for (const PlannedFix& p : fixes) {
    FixOutcome o;
    o.action = p.action;
    o.check_id = p.check_id;
    if (!apply) {
      out.push_back(std::move(o));
      continue;
    }
    if (p.action.is_write()) {
      auto s = root.WriteExisting(p.action.write_path, p.action.write_content + "\n");
      o.state = s ? FixOutcome::State::kApplied : FixOutcome::State::kFailed;
      if (!s) o.detail = s.error().Describe();
    } else if (!root.is_live()) {
      o.state = FixOutcome::State::kSkipped;
      o.detail = "commands run only on the live host, not under --root " + root.root();
    } else if (!run) {
      o.state = FixOutcome::State::kFailed;
      o.detail = "no command runner";
    } else {
      auto r = RunTool(run, p.action.argv, 30.0);
      o.state = r ? FixOutcome::State::kApplied : FixOutcome::State::kFailed;
      if (!r) o.detail = r.error().Describe();
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string RenderFixes(const std::vector<FixOutcome>& outcomes, bool apply) {
  if (outcomes.empty()) return "no safe host fixes to apply\n";
  std::string out = apply ? "applying " + std::to_string(outcomes.size()) + " fix step(s):\n"
                          : "dry run: would apply " + std::to_string(outcomes.size()) +
                                " fix step(s) (add --apply to write; switches are never touched)\n";
  for (const FixOutcome& o : outcomes) {
    std::string state;
    switch (o.state) {
      case FixOutcome::State::kPlanned:
        state = "";
        break;
      case FixOutcome::State::kApplied:
        state = "[done] ";
        break;
      case FixOutcome::State::kSkipped:
        state = "[skipped] ";
        break;
      case FixOutcome::State::kFailed:
        state = "[FAILED] ";
        break;
    }
    out += "  " + state + o.action.Render() + "    # " + o.check_id +
           (o.action.description.empty() ? "" : ": " + o.action.description) +
           (o.detail.empty() ? "" : " (" + o.detail + ")") + "\n";
  }
  return out;
}

namespace {

// Checks of report that are warn or fail; with without_actions, only those
// that offer no fix step.
std::vector<std::string> NotOk(const Report& report, bool without_actions) {
  std::vector<std::string> out;
  for (const Finding& f : report.findings) {
    if (f.severity != Severity::kWarn && f.severity != Severity::kFail) continue;
    if (without_actions && !f.actions.empty()) continue;
    out.push_back(f.check_id);
  }
  return out;
}

}  // namespace

FixRun RunFix(const Report& report, const FixOptions& options) {
  FixRun r;
  r.applied = options.apply;
  r.summary = RenderSummaryLine(report);
  r.worst_before = r.worst = report.Worst();
  std::vector<PlannedFix> plan = CollectFixes(report);
  host::HostRoot root(options.collect.root);
  r.outcomes = ApplyFixes(plan, root, options.apply, options.run);
  if (options.apply && !plan.empty() && options.tools != nullptr) {
    // The same checks again, so the exit status says whether the host is fixed now.
    r.after = RunChecks(CollectFacts(options.collect, *options.tools), options.checks);
    r.worst = r.after->Worst();
    r.not_fixed = NotOk(*r.after, /*without_actions=*/false);
  } else {
    r.not_fixed = NotOk(report, /*without_actions=*/true);
  }
  for (const FixOutcome& o : r.outcomes) {
    if (o.state == FixOutcome::State::kFailed) r.worst = Severity::kFail;
  }
  return r;
}

std::string RenderFixRun(const FixRun& run) {
  std::string out = RenderFixes(run.outcomes, run.applied) + "\n";
  if (!run.after) out += run.summary;
  if (!run.not_fixed.empty()) {
    std::string ids;
    for (const std::string& id : run.not_fixed) ids += (ids.empty() ? "" : ", ") + id;
    out += "not fixed by --fix: " + ids + " (anxin doctor without --fix shows their findings)\n";
  }
  if (run.after) {
    out += "after the fixes: worst status " + std::string(SeverityName(run.after->Worst())) + "\n";
  }
  return out;
}

void AddFixRunJson(const FixRun& run, nlohmann::json& j) {
  static const char* kState[] = {"planned", "applied", "skipped", "failed"};
  j["fixes"] = nlohmann::json::array();
  for (const FixOutcome& o : run.outcomes) {
    j["fixes"].push_back({{"check", o.check_id},
                          {"command", o.action.Render()},
                          {"state", kState[static_cast<int>(o.state)]},
                          {"detail", o.detail}});
  }
  j["applied"] = run.applied;
  if (run.applied) {
    j["worst_after_fix"] =
        std::string(SeverityName(run.after ? run.after->Worst() : run.worst_before));
  }
}

}  // namespace anxin::doctor
