#include "anxin/run/playbook.h"

#include <algorithm>

namespace anxin::run {
namespace {

constexpr std::pair<StepKind, std::string_view> kKinds[] = {
    {StepKind::kStopRanks, "stop_ranks"},
    {StepKind::kClearDeviceMemory, "clear_device_memory"},
    {StepKind::kResetDevice, "reset_device"},
    {StepKind::kWaitLinksUp, "wait_links_up"},
    {StepKind::kSelectCheckpoint, "select_checkpoint"},
    {StepKind::kRelaunch, "relaunch"},
    {StepKind::kVerifyProgress, "verify_progress"},
    {StepKind::kExec, "exec"},
    {StepKind::kNotify, "notify"},
};

std::string KnownKinds() {
  std::string out;
  for (const auto& [k, n] : kKinds) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Where(const ConfigNode& n) {
  return n.source() + ":" + std::to_string(n.line()) + ":" + std::to_string(n.column());
}

PlaybookStep Step(StepKind kind, const PlaybookDefaults& d) {
  PlaybookStep s;
  s.kind = kind;
  s.where = "built-in";
  switch (kind) {
    case StepKind::kStopRanks:
      s.timeout_seconds = d.stop_grace_seconds;
      break;
    case StepKind::kClearDeviceMemory:
      s.timeout_seconds = 60;
      s.abort_on_failure = false;  // a device that keeps its memory is still usable
      break;
    case StepKind::kResetDevice:
      s.timeout_seconds = 600;
      s.retries = std::max(0, d.reset_tries - 1);
      s.retry_delay_seconds = d.reset_retry_delay_seconds;
      break;
    case StepKind::kWaitLinksUp:
      s.timeout_seconds = d.link_timeout_seconds;
      break;
    case StepKind::kSelectCheckpoint:
      break;
    case StepKind::kRelaunch:
      break;
    case StepKind::kVerifyProgress:
      s.timeout_seconds = d.verify_timeout_seconds;
      break;
    case StepKind::kExec:
      s.timeout_seconds = d.exec_timeout_seconds;
      break;
    case StepKind::kNotify:
      s.timeout_seconds = d.notify_timeout_seconds;
      s.abort_on_failure = false;  // never blocks a recovery
      break;
  }
  return s;
}

// What each kind accepts beyond `step`.
std::vector<std::string_view> KeysOf(StepKind kind) {
  std::vector<std::string_view> keys = {"step", "only_for"};
  switch (kind) {
    case StepKind::kStopRanks:
      keys.insert(keys.end(), {"timeout", "grace"});
      break;
    case StepKind::kClearDeviceMemory:
    case StepKind::kResetDevice:
    case StepKind::kExec:
      keys.insert(keys.end(), {"timeout", "retries", "retry_delay", "on_failure"});
      if (kind == StepKind::kExec) keys.push_back("argv");
      break;
    case StepKind::kWaitLinksUp:
      keys.insert(keys.end(), {"timeout", "on_failure"});
      break;
    case StepKind::kSelectCheckpoint:
      break;
    case StepKind::kRelaunch:
      keys.insert(keys.end(), {"retries", "retry_delay"});
      break;
    case StepKind::kVerifyProgress:
      keys.push_back("timeout");
      break;
    case StepKind::kNotify:
      keys.insert(keys.end(), {"timeout", "retries", "retry_delay", "url"});
      break;
  }
  return keys;
}

Result<PlaybookStep> ParseStep(const ConfigNode& n, const PlaybookDefaults& d,
                               const std::vector<std::string>& classes) {
  if (!n.IsMap()) {
    return std::unexpected(
        n.MakeError("expected a step like {step: stop_ranks}, got " + n.DescribeKind()));
  }
  ANXIN_ASSIGN_OR_RETURN(ConfigNode kind_node, n.Child("step"));
  ANXIN_ASSIGN_OR_RETURN(std::string kind_name, kind_node.As<std::string>());
  const auto* found = std::find_if(std::begin(kKinds), std::end(kKinds),
                                   [&](const auto& k) { return k.second == kind_name; });
  if (found == std::end(kKinds)) {
    return std::unexpected(
        kind_node.MakeError("unknown step '" + kind_name + "' (known: " + KnownKinds() + ")"));
  }
  PlaybookStep s = Step(found->first, d);
  s.where = Where(n);
  ANXIN_TRY(n.CheckKeys(KeysOf(s.kind)));
  if (s.kind == StepKind::kStopRanks && n.Has("grace")) {
    ANXIN_ASSIGN_OR_RETURN(s.timeout_seconds, n.GetSeconds("grace"));
  }
  ANXIN_ASSIGN_OR_RETURN(s.timeout_seconds, n.GetSeconds("timeout", s.timeout_seconds));
  if (n.Has("timeout") && s.timeout_seconds <= 0 && s.kind != StepKind::kStopRanks) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode t, n.Child("timeout"));
    return std::unexpected(t.MakeError("must be above 0"));
  }
  ANXIN_ASSIGN_OR_RETURN(s.retries, n.GetInRange<int>("retries", 0, 100, s.retries));
  ANXIN_ASSIGN_OR_RETURN(s.retry_delay_seconds, n.GetSeconds("retry_delay", s.retry_delay_seconds));
  if (n.Has("on_failure")) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode f, n.Child("on_failure"));
    ANXIN_ASSIGN_OR_RETURN(std::string v, f.As<std::string>());
    if (v != "abort" && v != "continue") {
      return std::unexpected(f.MakeError("expected abort or continue, got '" + v + "'"));
    }
    s.abort_on_failure = v == "abort";
  }
  if (n.Has("only_for")) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode of, n.Child("only_for"));
    if (!of.IsSequence()) {
      return std::unexpected(
          of.MakeError("expected a list of fault classes, got " + of.DescribeKind()));
    }
    ANXIN_ASSIGN_OR_RETURN(auto items, of.Elements());
    for (const ConfigNode& c : items) {
      ANXIN_ASSIGN_OR_RETURN(std::string cls, c.As<std::string>());
      if (!Contains(classes, cls)) {
        return std::unexpected(c.MakeError("unknown fault class '" + cls + "'"));
      }
      s.only_for.push_back(cls);
    }
  }
  if (s.kind == StepKind::kExec) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode a, n.Child("argv"));
    if (!a.IsSequence()) {
      return std::unexpected(
          a.MakeError("expected an argument vector like [/bin/cmd, arg], got " + a.DescribeKind()));
    }
    ANXIN_ASSIGN_OR_RETURN(s.argv, a.As<std::vector<std::string>>());
    if (s.argv.empty() || s.argv[0].empty()) {
      return std::unexpected(a.MakeError("the argument vector is empty: name the program first"));
    }
  }
  if (s.kind == StepKind::kNotify) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode u, n.Child("url"));
    ANXIN_ASSIGN_OR_RETURN(s.url, u.As<std::string>());
    if (!s.url.starts_with("http://") && !s.url.starts_with("https://")) {
      return std::unexpected(
          u.MakeError("expected an http:// or https:// URL, got '" + s.url + "'"));
    }
  }
  return s;
}

// The order rules: the ranks are gone before devices are touched or the job
// relaunched; verify_progress follows a relaunch.
Status CheckOrder(const ConfigNode& list, const std::vector<ConfigNode>& nodes,
                  const std::vector<PlaybookStep>& steps) {
  bool stopped = false, relaunched = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PlaybookStep& s = steps[i];
    const std::string name(StepKindName(s.kind));
    switch (s.kind) {
      case StepKind::kStopRanks:
        stopped = true;
        break;
      case StepKind::kClearDeviceMemory:
      case StepKind::kResetDevice:
      case StepKind::kRelaunch:
        if (!stopped) {
          return std::unexpected(nodes[i].MakeError(
              name + " must come after stop_ranks: the ranks have to be gone first"));
        }
        if (relaunched) {
          return std::unexpected(nodes[i].MakeError(name + " after relaunch: the job is running"));
        }
        if (s.kind == StepKind::kRelaunch) relaunched = true;
        break;
      case StepKind::kVerifyProgress:
        if (!relaunched) {
          return std::unexpected(nodes[i].MakeError("verify_progress must follow relaunch"));
        }
        if (i + 1 != steps.size()) {
          return std::unexpected(nodes[i].MakeError("verify_progress must be the last step"));
        }
        break;
      default:
        break;
    }
  }
  if (steps.empty() || steps[0].kind != StepKind::kStopRanks) {
    return std::unexpected(list.MakeError("a playbook starts with stop_ranks"));
  }
  return Ok();
}

}  // namespace

std::string_view StepKindName(StepKind kind) {
  for (const auto& [k, n] : kKinds) {
    if (k == kind) return n;
  }
  return "?";
}

bool Playbook::Relaunches() const {
  return std::any_of(steps.begin(), steps.end(),
                     [](const PlaybookStep& s) { return s.kind == StepKind::kRelaunch; });
}

const Playbook& PlaybookSet::For(const std::string& fault_class) const {
  auto it = by_fault.find(fault_class);
  if (it == by_fault.end()) it = by_fault.find("default");
  if (it != by_fault.end()) {
    if (auto p = playbooks.find(it->second); p != playbooks.end()) return p->second;
  }
  return playbooks.at("default");
}

const Playbook* PlaybookSet::Escalation() const {
  auto it = by_fault.find("escalation");
  if (it == by_fault.end()) return nullptr;
  auto p = playbooks.find(it->second);
  return p == playbooks.end() ? nullptr : &p->second;
}

const std::vector<std::string>& BuiltinFaultClasses() {
  static const std::vector<std::string> kClasses = {"process_exit",      "hang",
                                                    "no_progress",       "collective_timeout",
                                                    "collective_error",  "peer_failure",
                                                    "network",           "device_error",
                                                    "device_lost",       "link_down",
                                                    "ecc_uncorrectable", "out_of_memory",
                                                    "configuration",     "collective_warning",
                                                    "supervisor_restart"};
  return kClasses;
}

const std::vector<std::string>& ResetFaultClasses() {
  static const std::vector<std::string> kReset = {
      "hang",         "collective_timeout", "collective_error", "peer_failure",     "network",
      "device_error", "device_lost",        "link_down",        "ecc_uncorrectable"};
  return kReset;
}

PlaybookSet DefaultPlaybooks(const PlaybookDefaults& d) {
  Playbook p;
  p.name = "default";
  for (StepKind k : {StepKind::kStopRanks, StepKind::kClearDeviceMemory, StepKind::kResetDevice,
                     StepKind::kWaitLinksUp, StepKind::kSelectCheckpoint, StepKind::kRelaunch,
                     StepKind::kVerifyProgress}) {
    PlaybookStep s = Step(k, d);
    if (k == StepKind::kResetDevice) s.only_for = ResetFaultClasses();
    p.steps.push_back(std::move(s));
  }
  PlaybookSet set;
  set.playbooks.emplace("default", std::move(p));
  set.by_fault["default"] = "default";
  return set;
}

Status MergePlaybooks(const ConfigNode& node, const PlaybookDefaults& d,
                      const std::vector<std::string>& extra_classes, PlaybookSet& set) {
  std::vector<std::string> classes = BuiltinFaultClasses();
  for (const std::string& c : extra_classes) {
    if (!Contains(classes, c)) classes.push_back(c);
  }
  if (auto books = node.Find("playbooks")) {
    if (!books->IsMap()) {
      return std::unexpected(books->MakeError(
          "expected playbooks by name, each a list of steps, got " + books->DescribeKind()));
    }
    ANXIN_ASSIGN_OR_RETURN(auto entries, books->Entries());
    for (const auto& [name, list] : entries) {
      if (!list.IsSequence()) {
        return std::unexpected(
            list.MakeError("expected a list of steps, got " + list.DescribeKind()));
      }
      ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, list.Elements());
      Playbook p;
      p.name = name;
      for (const ConfigNode& item : items) {
        ANXIN_ASSIGN_OR_RETURN(PlaybookStep s, ParseStep(item, d, classes));
        p.steps.push_back(std::move(s));
      }
      ANXIN_TRY(CheckOrder(list, items, p.steps));
      set.playbooks[name] = std::move(p);
    }
  }
  if (auto faults = node.Find("faults")) {
    if (!faults->IsMap() && !faults->IsNull()) {
      return std::unexpected(faults->MakeError(
          "expected fault classes mapped to playbook names, got " + faults->DescribeKind()));
    }
    ANXIN_ASSIGN_OR_RETURN(auto entries, faults->Entries());
    for (const auto& [cls, value] : entries) {
      if (cls != "default" && cls != "escalation" && !Contains(classes, cls)) {
        std::string known = "default, escalation";
        for (const std::string& c : classes) known += ", " + c;
        return std::unexpected(
            value.MakeError("unknown fault class '" + cls + "' (known: " + known + ")"));
      }
      ANXIN_ASSIGN_OR_RETURN(std::string book, value.As<std::string>());
      if (!set.playbooks.contains(book)) {
        std::string known;
        for (const auto& [n, p] : set.playbooks) known += (known.empty() ? "" : ", ") + n;
        return std::unexpected(
            value.MakeError("no playbook named '" + book + "' (defined: " + known + ")"));
      }
      set.by_fault[cls] = book;
    }
  }
  return Ok();
}

}  // namespace anxin::run
