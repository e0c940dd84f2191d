// The per-fault table (report.h).
#include "anxin/lab/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <regex>
#include <set>

namespace anxin::lab {
namespace {

void CollectContent(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    if (j.contains("tag") && j.value("tag", "") == "lark_md" && j.contains("content") &&
        j["content"].is_string()) {
      out.push_back(j["content"].get<std::string>());
      return;
    }
    for (const auto& [k, v] : j.items()) CollectContent(v, out);
  } else if (j.is_array()) {
    for (const auto& v : j) CollectContent(v, out);
  }
}

std::string Plain(std::string s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "**") == 0) {
      ++i;
      continue;
    }
    out += s[i] == '\n' ? ' ' : s[i];
  }
  return out;
}

std::optional<CardAlert> ParseAlertText(const std::string& text, double time) {
  static const std::regex head(R"(^\**(FIRING|RESOLVED)\**\s+(\S+))");
  static const std::regex node(R"(Node:\**\s+(\S+))");
  static const std::regex device(R"(Device:\**\s+(\S+))");
  static const std::regex since(R"(Since:\**\s+([^\n]+))");
  std::smatch m;
  if (!std::regex_search(text, m, head)) return std::nullopt;
  CardAlert a;
  a.time = time;
  a.status = m[1] == "FIRING" ? "firing" : "resolved";
  a.alertname = m[2];
  if (std::regex_search(text, m, node)) a.node = m[1];
  if (std::regex_search(text, m, device)) a.device = m[1];
  if (std::regex_search(text, m, since)) a.since = m[1];
  // The description and the links make the line long; the table keeps the head.
  const size_t summary = text.find("Summary:");
  const size_t cut = text.find("Description:");
  std::string shown = text.substr(0, cut == std::string::npos ? text.size() : cut);
  (void)summary;
  a.text = Plain(shown);
  while (!a.text.empty() && (a.text.back() == ' ' || a.text.back() == '*')) a.text.pop_back();
  return a;
}

std::string Rel(double t, double from) {
  if (t < 0 || from < 0) return "-";
  return fmt::format("+{:.1f}s", t - from);
}

std::string Clock(double unix_seconds) {
  if (unix_seconds < 0) return "-";
  const time_t t = static_cast<time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

double Unix(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The classes anxin run gives what a fault of this kind does to a rank or a
// node (the signatures of run/signatures.cc and the detectors).
std::vector<std::string_view> RunClasses(std::string_view kind) {
  // A peer may see a rank's crash first, as the collective breaking.
  if (kind == "crash") return {"process_exit", "peer_failure", "collective_error", "network"};
  if (kind == "hccl_error") return {"network", "collective_error", "collective_timeout"};
  if (kind == "hang") return {"hang", "no_progress", "collective_timeout"};
  if (kind == "lost_node") return {"node_lost"};
  if (kind == "link_down") return {"link_down", "network"};
  return {};
}

bool HasClass(const std::vector<std::string_view>& classes, std::string_view c) {
  return std::find(classes.begin(), classes.end(), c) != classes.end();
}

// Whether a node's incident in a generation shows the row's fault: the class
// the generation was opened with, or the class the fault's own node saw
// itself; a lost node is named in the summary of the generation it opened.
bool IncidentShows(const run::Incident& in, const std::string& incident_node, const FaultRow& r) {
  const std::vector<std::string_view> classes = RunClasses(r.kind);
  const run::ClusterView& c = *in.cluster;
  if (r.kind == "lost_node") {
    return c.fault_class == "node_lost" &&
           in.fault.summary.find("node " + r.node + " is lost") != std::string::npos;
  }
  if (HasClass(classes, c.fault_class)) return true;
  return incident_node == r.node && in.fault.detector != "cluster" &&
         HasClass(classes, in.fault.fault_class);
}

bool CardMatches(const CardAlert& c, const FaultRow& r, const char* status) {
  if (c.status != status || c.alertname != r.alert || c.node != r.node) return false;
  if (r.npu >= 0 && r.prometheus && c.device != std::to_string(r.npu)) return false;
  return true;
}

}  // namespace

Result<std::vector<CardAlert>> ParseCard(const std::string& body, double time) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("the message is not JSON");
  std::vector<std::string> texts;
  const std::string type = j.value("msg_type", "");
  if (type == "interactive" && j.contains("card")) {
    CollectContent(j["card"], texts);
  } else if (type == "text" && j.contains("content") && j["content"].contains("text")) {
    const std::string all = j["content"]["text"].get<std::string>();
    size_t pos = 0;
    while (pos <= all.size()) {
      size_t next = all.find("\n\n", pos);
      texts.push_back(all.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
      if (next == std::string::npos) break;
      pos = next + 2;
    }
  } else {
    return InvalidArgument("msg_type '" + type + "' is neither interactive nor text");
  }
  std::vector<CardAlert> out;
  for (const std::string& t : texts) {
    if (auto a = ParseAlertText(t, time)) out.push_back(std::move(*a));
  }
  if (out.empty()) return InvalidArgument("the message names no alert");
  return out;
}

std::vector<FaultRow> PlanRows(const FaultPlan& plan, int ranks_per_node) {
  std::vector<FaultRow> rows;
  for (size_t i = 0; i < plan.faults.size(); ++i) {
    const LabFault& f = plan.faults[i];
    FaultRow base;
    base.fault = static_cast<int>(i);
    base.kind = std::string(FaultKindName(f.kind));
    base.fault_text = DescribeFault(f);
    base.node = NodeName(f.node);
    const bool device = f.kind == FaultKind::kTemperature || f.kind == FaultKind::kHbm ||
                        f.kind == FaultKind::kLinkDown;
    base.npu = device ? f.npu : -1;
    // A link of an NPU the job does not drive raises the alert only.
    base.recovery_expected =
        NeedsRecovery(f) && !(f.kind == FaultKind::kLinkDown && f.npu >= ranks_per_node);
    const std::vector<std::string> alerts = ExpectedAlerts(f);
    if (alerts.empty()) {
      FaultRow r = base;
      r.alert = "AnxinRunFault";
      r.prometheus = false;
      r.resolve_expected = false;  // anxin run's notify step sends the firing message only
      rows.push_back(std::move(r));
      continue;
    }
    for (const std::string& a : alerts) {
      FaultRow r = base;
      r.alert = a;
      r.resolve_expected = f.kind != FaultKind::kLostNode || f.for_seconds > 0;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

void UpdateRows(const Observations& obs, std::vector<FaultRow>& rows) {
  std::set<int> claimed;
  std::set<std::pair<double, std::string>> run_cards;  // anxin run's cards rows hold
  for (const FaultRow& r : rows) {
    if (r.generation >= 0) claimed.insert(r.generation);
    if (!r.prometheus && r.card >= 0) run_cards.insert({r.card, r.card_text});
  }
  for (FaultRow& r : rows) {
    if (r.injected < 0) continue;
    if (r.prometheus && r.firing < 0) {
      for (const PromAlert& a : obs.alerts) {
        if (a.state == "firing" && a.alertname == r.alert && a.node == r.node &&
            (r.npu < 0 || a.device == std::to_string(r.npu))) {
          r.firing = obs.now;
          break;
        }
      }
    }
    if (r.card < 0) {
      for (const CardAlert& c : obs.cards) {
        if (c.time >= r.injected - 1 && CardMatches(c, r, "firing") &&
            (r.prometheus || !run_cards.contains({c.time, c.text}))) {
          r.card = c.time;
          r.card_text = c.text;
          if (!r.prometheus) run_cards.insert({c.time, c.text});
          break;
        }
      }
    }
    if (r.card >= 0 && r.resolve_expected && r.resolved < 0) {
      for (const CardAlert& c : obs.cards) {
        if (c.time >= r.card && CardMatches(c, r, "resolved")) {
          r.resolved = c.time;
          break;
        }
      }
    }
    if (r.recovery_expected) {
      // The generation the fault opened: the first one journaled after it
      // that shows the fault (its class, its node).
      if (r.generation < 0) {
        double best = -1;
        int gen = -1;
        for (size_t k = 0; k < obs.incidents.size(); ++k) {
          for (const run::Incident& in : obs.incidents[k]) {
            // Generation 0 is the job's first launch, not a recovery.
            if (!in.cluster || in.cluster->generation < 1) continue;
            const double t = Unix(in.fault.wall);
            if (t < r.injected - 0.5 || claimed.count(in.cluster->generation)) continue;
            if (!IncidentShows(in, NodeName(static_cast<int>(k)), r)) continue;
            if (best < 0 || t < best) {
              best = t;
              gen = in.cluster->generation;
            }
          }
        }
        if (gen >= 0) {
          r.generation = gen;
          claimed.insert(gen);
        }
      }
      if (r.generation >= 0) {
        std::vector<std::string> members;
        double decided = -1, stepping = -1;
        bool all = true;
        const run::Incident* first = nullptr;
        std::map<std::string, const run::Incident*> by_node;
        for (const auto& node : obs.incidents) {
          for (const run::Incident& in : node) {
            if (!in.cluster || in.cluster->generation != r.generation) continue;
            const double t = Unix(in.fault.wall);
            if (decided < 0 || t < decided) {
              decided = t;
              first = &in;
            }
            for (const auto& n : in.cluster->nodes) {
              if (n.node_rank >= 0 &&
                  std::find(members.begin(), members.end(), n.node) == members.end()) {
                members.push_back(n.node);
              }
            }
          }
        }
        for (size_t k = 0; k < obs.incidents.size(); ++k) {
          for (const run::Incident& in : obs.incidents[k]) {
            if (in.cluster && in.cluster->generation == r.generation) {
              by_node[NodeName(static_cast<int>(k))] = &in;
            }
          }
        }
        if (first != nullptr) {
          r.recovery = decided;
          const auto& c = *first->cluster;
          r.recovery_text =
              fmt::format("generation {}: {} on {}", c.generation, c.fault_class, c.fault_node);
          if (!members.empty()) {
            r.recovery_text +=
                fmt::format(", {} node(s) from step {}", members.size(), c.agreed_step);
          }
        }
        if (members.empty()) all = false;
        for (const std::string& m : members) {
          auto it = by_node.find(m);
          if (it == by_node.end() || it->second->time_to_recovery_seconds < 0) {
            all = false;
            break;
          }
          stepping = std::max(stepping,
                              Unix(it->second->fault.wall) + it->second->time_to_recovery_seconds);
        }
        if (all && r.stepping < 0) r.stepping = stepping;
      }
    } else if (r.stepping < 0) {
      // No recovery: the job should simply go on; every live node steps after the fault.
      double latest = -1;
      bool all = true;
      for (size_t k = 0; k < obs.steps.size(); ++k) {
        if (k < obs.node_up.size() && !obs.node_up[k]) continue;
        const auto& ts = obs.steps[k].times;
        auto it = std::upper_bound(ts.begin(), ts.end(), r.injected);
        if (it == ts.end()) {
          all = false;
          break;
        }
        latest = std::max(latest, *it);
      }
      if (all && latest >= 0) r.stepping = latest;
    }
    // anxin run's card comes from the node that saw the fault first, which
    // for a hang or a crash may be a peer of the faulty node: any node's
    // card for the generation the fault opened, one no other row took.
    if (r.card < 0 && !r.prometheus && r.recovery >= 0) {
      for (const CardAlert& c : obs.cards) {
        if (c.status != "firing" || c.alertname != r.alert || c.time < r.injected - 1 ||
            c.time < r.recovery - 1 || run_cards.contains({c.time, c.text})) {
          continue;
        }
        r.card = c.time;
        r.card_text = c.text;
        run_cards.insert({c.time, c.text});
        break;
      }
    }
    r.done = (!r.prometheus || r.firing >= 0) && r.card >= 0 && r.stepping >= 0 &&
             (!r.recovery_expected || r.recovery >= 0) && (!r.resolve_expected || r.resolved >= 0);
  }
}

std::vector<std::string> DuplicateCards(const std::vector<CardAlert>& cards) {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const CardAlert& c : cards) {
    std::string key =
        fmt::format("{} {} {}{}{} since {}", c.status == "firing" ? "FIRING" : "RESOLVED",
                    c.alertname, c.node, c.device.empty() ? "" : " NPU ", c.device, c.since);
    if (count[key]++ == 0) order.push_back(key);
  }
  std::vector<std::string> out;
  for (const std::string& k : order) {
    if (count[k] > 1) out.push_back(fmt::format("{} ({} times)", k, count[k]));
  }
  return out;
}

std::string FormatReport(const std::vector<FaultRow>& rows, const std::vector<CardAlert>& cards) {
  std::string out =
      fmt::format("{:<3} {:<46} {:<9} {:<31} {:>8} {:>8} {:>9} {:>9} {:>9}\n", "#", "FAULT",
                  "INJECTED", "ALERT", "FIRING", "CARD", "RECOVERY", "STEPPING", "RESOLVED");
  int done = 0;
  for (const FaultRow& r : rows) {
    if (r.done) ++done;
    out += fmt::format("{:<3} {:<46} {:<9} {:<31} {:>8} {:>8} {:>9} {:>9} {:>9}\n", r.fault + 1,
                       r.fault_text.substr(0, 46), Clock(r.injected), r.alert,
                       r.prometheus ? Rel(r.firing, r.injected) : "(run)", Rel(r.card, r.injected),
                       r.recovery_expected ? Rel(r.recovery, r.injected) : "not needed",
                       Rel(r.stepping, r.injected),
                       r.resolve_expected ? Rel(r.resolved, r.injected) : "n/a");
    if (!r.card_text.empty()) out += "      card: " + r.card_text + "\n";
    if (!r.recovery_text.empty()) out += "      recovery: " + r.recovery_text + "\n";
  }
  int firing = 0, resolved = 0;
  for (const CardAlert& c : cards) (c.status == "firing" ? firing : resolved)++;
  const std::vector<std::string> dups = DuplicateCards(cards);
  int missing = 0;
  for (const FaultRow& r : rows) {
    if (r.injected >= 0 && r.card < 0) ++missing;
  }
  out += fmt::format(
      "{} of {} row(s) complete; the sink got {} card alert(s) ({} firing, {} resolved), {} "
      "duplicated, {} row(s) still without a card\n",
      done, rows.size(), cards.size(), firing, resolved, dups.size(), missing);
  for (const std::string& d : dups) out += "  duplicated: " + d + "\n";
  return out;
}

nlohmann::json ReportToJson(const std::vector<FaultRow>& rows,
                            const std::vector<CardAlert>& cards) {
  nlohmann::json jr = nlohmann::json::array();
  auto opt = [](double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
  auto after = [](double v, double from) {
    return v < 0 || from < 0 ? nlohmann::json(nullptr) : nlohmann::json(v - from);
  };
  int done = 0;
  for (const FaultRow& r : rows) {
    if (r.done) ++done;
    jr.push_back({{"fault", r.fault},
                  {"kind", r.kind},
                  {"description", r.fault_text},
                  {"node", r.node},
                  {"npu", r.npu < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.npu)},
                  {"alert", r.alert},
                  {"prometheus", r.prometheus},
                  {"recovery_expected", r.recovery_expected},
                  {"resolve_expected", r.resolve_expected},
                  {"injected", opt(r.injected)},
                  {"firing", opt(r.firing)},
                  {"card", opt(r.card)},
                  {"card_text", r.card_text},
                  {"recovery", opt(r.recovery)},
                  {"recovery_text", r.recovery_text},
                  {"generation", r.generation},
                  {"stepping", opt(r.stepping)},
                  {"resolved", opt(r.resolved)},
                  {"seconds",
                   {{"firing", after(r.firing, r.injected)},
                    {"card", after(r.card, r.injected)},
                    {"recovery", after(r.recovery, r.injected)},
                    {"stepping", after(r.stepping, r.injected)},
                    {"resolved", after(r.resolved, r.injected)}}},
                  {"done", r.done}});
  }
  nlohmann::json jc = nlohmann::json::array();
  for (const CardAlert& c : cards) {
    jc.push_back({{"time", c.time},
                  {"status", c.status},
                  {"alertname", c.alertname},
                  {"node", c.node},
                  {"device", c.device},
                  {"since", c.since},
                  {"text", c.text}});
  }
  return {{"rows", jr},
          {"cards", jc},
          {"complete", done == static_cast<int>(rows.size())},
          {"duplicated_cards", DuplicateCards(cards)}};
}

Result<std::vector<FaultRow>> RowsFromJson(const nlohmann::json& j) {
  std::vector<FaultRow> rows;
  try {
    auto num = [](const nlohmann::json& v) { return v.is_null() ? -1.0 : v.get<double>(); };
    for (const auto& x : j.at("rows")) {
      FaultRow r;
      r.fault = x.at("fault").get<int>();
      r.kind = x.value("kind", "");
      r.fault_text = x.value("description", "");
      r.node = x.value("node", "");
      r.npu = x.at("npu").is_null() ? -1 : x.at("npu").get<int>();
      r.alert = x.value("alert", "");
      r.prometheus = x.value("prometheus", true);
      r.recovery_expected = x.value("recovery_expected", false);
      r.resolve_expected = x.value("resolve_expected", true);
      r.injected = num(x.at("injected"));
      r.firing = num(x.at("firing"));
      r.card = num(x.at("card"));
      r.card_text = x.value("card_text", "");
      r.recovery = num(x.at("recovery"));
      r.recovery_text = x.value("recovery_text", "");
      r.generation = x.value("generation", -1);
      r.stepping = num(x.at("stepping"));
      r.resolved = num(x.at("resolved"));
      r.done = x.value("done", false);
      rows.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("the report is not one anxin lab wrote: ") + e.what());
  }
  return rows;
}

Result<std::vector<CardAlert>> CardsFromJson(const nlohmann::json& j) {
  std::vector<CardAlert> cards;
  try {
    for (const auto& x : j.at("cards")) {
      CardAlert c;
      c.time = x.at("time").get<double>();
      c.status = x.value("status", "");
      c.alertname = x.value("alertname", "");
      c.node = x.value("node", "");
      c.device = x.value("device", "");
      c.since = x.value("since", "");
      c.text = x.value("text", "");
      cards.push_back(std::move(c));
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("the report is not one anxin lab wrote: ") + e.what());
  }
  return cards;
}

}  // namespace anxin::lab
