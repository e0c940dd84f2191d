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
                                   bool apply, const CommandRunner& run) {
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
      auto r = run(p.action.argv, 30.0);
      o.state = r ? FixOutcome::State::kApplied : FixOutcome::State::kFailed;
      if (!r) o.detail = r.error().Describe();
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string RenderFixes(const std::vector<FixOutcome>& outcomes, bool apply) {
  std::string out;
  if (outcomes.empty()) return "no safe host fixes to apply\n";
  out += apply ? "applying " : "dry run: would apply ";
  out += std::to_string(outcomes.size()) +
         " fix step(s) (add --apply to write; switches are never touched)\n";
  if (apply) out = "applying " + std::to_string(outcomes.size()) + " fix step(s):\n";
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

}  // namespace anxin::doctor
