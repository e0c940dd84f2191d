#include "anxin/notify/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "anxin/base/time_format.h"

namespace anxin::notify {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Longest text taken from one annotation or label into a chat message.
constexpr size_t kMaxFieldBytes = 2000;

std::string Clip(std::string s, size_t max = kMaxFieldBytes) {
  if (s.size() <= max) return s;
  size_t cut = max;
  // Do not split a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s + "...";
}

std::string FirstLabel(const Alert& a, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    std::string v = a.Label(n);
    if (!v.empty()) return v;
  }
  return "";
}

int SeverityRank(const std::string& s) {
  if (s == "critical" || s == "page" || s == "error" || s == "emergency") return 3;
  if (s == "warning" || s == "major" || s == "warn") return 2;
  if (s == "info" || s == "minor" || s == "notice") return 1;
  return 0;
}

std::string HeaderColour(const std::vector<Alert>& alerts) {
  int rank = -1;
  for (const auto& a : alerts) {
    if (a.firing()) rank = std::max(rank, SeverityRank(a.Label("severity")));
  }
  switch (rank) {
    case -1:
      return "green";  // everything resolved
    case 3:
      return "red";
    case 2:
      return "orange";
    case 1:
      return "blue";
    default:
      return "grey";
  }
}

std::string StatusText(const std::vector<Alert>& alerts) {
  size_t firing = 0;
  for (const auto& a : alerts) firing += a.firing();
  if (firing == 0) {
    return alerts.size() == 1 ? "[RESOLVED]" : fmt::format("[RESOLVED x{}]", alerts.size());
  }
  if (firing == alerts.size()) {
    return alerts.size() == 1 ? "[FIRING]" : fmt::format("[FIRING x{}]", alerts.size());
  }
  return fmt::format("[FIRING x{}, RESOLVED x{}]", firing, alerts.size() - firing);
}

// The built-in layout of one alert, as Feishu's lark_md (markdown) or plain text.
std::string AlertText(const Alert& a, const RenderOptions& o, bool markdown) {
  auto bold = [&](std::string_view s) {
    return markdown ? fmt::format("**{}**", s) : std::string(s);
  };
  std::string out = fmt::format("{} {}", bold(a.firing() ? "FIRING" : "RESOLVED"),
                                Clip(a.Label("alertname"), 200));
  const std::string sev = a.Label("severity");
  if (!sev.empty()) out += " (" + Clip(sev, 50) + ")";
  out += "\n" + bold("Node:") + " " + Clip(NodeOf(a), 200);
  const std::string dev = DeviceOf(a);
  if (!dev.empty()) out += "   " + bold("Device:") + " " + Clip(dev, 200);
  out += "\n" + bold("Since:") + " " + o.time_zone.Format(a.starts_at);
  if (!a.firing() && a.ends_at > 0)
    out += "\n" + bold("Resolved:") + " " + o.time_zone.Format(a.ends_at);
  const std::string summary = a.Annotation("summary");
  if (!summary.empty()) out += "\n" + bold("Summary:") + " " + Clip(summary);
  const std::string description = a.Annotation("description");
  if (!description.empty()) out += "\n" + bold("Description:") + " " + Clip(description);
  if (!a.generator_url.empty() && a.generator_url.size() < 2000) {
    out += markdown ? fmt::format("\n[Expression]({})", a.generator_url)
                    : "\nExpression: " + a.generator_url;
  }
  return out;
}

std::string OneAlert(const Alert& a, const Templates& t, const RenderOptions& o, bool markdown) {
  if (!t.alert.empty()) return Clip(Expand(t.alert, a, o, 1), 4 * kMaxFieldBytes);
  return AlertText(a, o, markdown);
}

std::string MoreLine(size_t n) {
  return fmt::format("+{} more alert{} not shown (see Alertmanager)", n, n == 1 ? "" : "s");
}

size_t JsonSize(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace).size();
}

// Unix seconds (an alert's starts_at, ends_at) as "2026-12-02T13:28:50Z".
// A time the payload gives outside what the clock holds (nanoseconds from
// 1970: years 1678 to 2262) is clamped to that range rather than overflowing.
std::string UnixSecondsRfc3339(int64_t t) {
  constexpr int64_t kLimit = 9'000'000'000;  // seconds, about year 2255
  t = std::clamp<int64_t>(t, -kLimit, kLimit);
  return FormatRfc3339(std::chrono::system_clock::from_time_t(static_cast<time_t>(t)),
                       TimePrecision::kSeconds);
}

}  // namespace

std::string NodeOf(const Alert& a) {
  return FirstLabel(a, {"node", "nodename", "hostname", "instance"});
}
std::string DeviceOf(const Alert& a) {
  return FirstLabel(a, {"device", "npu", "gpu", "device_id", "id"});
}

std::string Expand(const std::string& templ, const Alert& a, const RenderOptions& o, size_t count) {
  std::string out;
  size_t pos = 0;
  while (pos < templ.size()) {
    const size_t open = templ.find("{{", pos);
    if (open == std::string::npos) break;
    const size_t close = templ.find("}}", open + 2);
    if (close == std::string::npos) break;
    out.append(templ, pos, open - pos);
    std::string name = templ.substr(open + 2, close - open - 2);
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    std::string v;
    if (name == "status") {
      v = a.status;
    } else if (name == "status_text") {
      v = StatusText(std::vector<Alert>(count, a));
    } else if (name == "node") {
      v = NodeOf(a);
    } else if (name == "device") {
      v = DeviceOf(a);
    } else if (name == "starts_at") {
      v = o.time_zone.Format(a.starts_at);
    } else if (name == "ends_at") {
      v = a.ends_at > 0 ? o.time_zone.Format(a.ends_at) : "";
    } else if (name == "summary" || name == "description") {
      v = a.Annotation(name);
    } else if (name == "count") {
      v = std::to_string(count);
    } else if (name.starts_with("labels.")) {
      v = a.Label(name.substr(7));
    } else if (name.starts_with("annotations.")) {
      v = a.Annotation(name.substr(12));
    } else {
      v = a.Label(name);  // alertname, severity, any label
    }
    out += Clip(std::move(v));
    pos = close + 2;
  }
  out.append(templ, std::min(pos, templ.size()));
  return out;
}

Rendered RenderBot(const std::vector<Alert>& alerts, const Templates& templates, bool card,
                   const RenderOptions& o) {
  Rendered r;
  if (alerts.empty()) return r;
  std::string title = Clip(Expand(templates.title, alerts.front(), o, 1), 300);
  if (templates.title.find("{{status_text}}") != std::string::npos) {
    // The status of the whole group, not of the first alert.
    title = Clip(Expand(templates.title, alerts.front(), o, 1), 300);
    const std::string one = StatusText({alerts.front()});
    const size_t at = title.find(one);
    if (at != std::string::npos) title.replace(at, one.size(), StatusText(alerts));
  }

  // Text form: lines, folded by size.
  {
    std::string links;
    if (!o.dashboard_url.empty()) links += "\nDashboard: " + o.dashboard_url;
    if (!o.prometheus_url.empty()) links += "\nPrometheus: " + o.prometheus_url;
    // The message without alerts but with the longest "+N more" line.
    const OrderedJson base = {
        {"msg_type", "text"},
        {"content", {{"text", title + "\n\n" + MoreLine(alerts.size()) + links}}}};
    size_t budget = o.max_body_bytes - std::min(o.max_body_bytes, JsonSize(base) + 100);
    std::string text = title;
    size_t shown = 0;
    for (const auto& a : alerts) {
      std::string part = "\n\n" + OneAlert(a, templates, o, false);
      const size_t cost = JsonSize(OrderedJson(part)) - 2;
      if (cost > budget && shown > 0) break;
      budget -= std::min(budget, cost);
      text += part;
      ++shown;
    }
    if (shown < alerts.size()) text += "\n\n" + MoreLine(alerts.size() - shown);
    text += links;
    r.fallback = OrderedJson{{"msg_type", "text"}, {"content", {{"text", text}}}}.dump(
        -1, ' ', false, OrderedJson::error_handler_t::replace);
    if (!card) {
      r.body = r.fallback;
      r.shown = shown;
      r.folded = alerts.size() - shown;
    }
  }
  if (!card) return r;

  OrderedJson header = {{"title", {{"tag", "plain_text"}, {"content", title}}},
                        {"template", HeaderColour(alerts)}};
  OrderedJson actions = OrderedJson::array();
  auto button = [&](const std::string& label, const std::string& url, const char* type) {
    actions.push_back({{"tag", "button"},
                       {"text", {{"tag", "plain_text"}, {"content", label}}},
                       {"url", url},
                       {"type", type}});
  };
  if (!o.dashboard_url.empty()) button("Dashboard", o.dashboard_url, "primary");
  if (!o.prometheus_url.empty()) button("Prometheus", o.prometheus_url, "default");
  OrderedJson tail = OrderedJson::array();
  if (!actions.empty()) tail.push_back({{"tag", "action"}, {"actions", actions}});
  OrderedJson more_el = {
      {"tag", "note"},
      {"elements", {{{"tag", "plain_text"}, {"content", MoreLine(alerts.size())}}}}};
  OrderedJson base = {
      {"msg_type", "interactive"},
      {"card", {{"config", {{"wide_screen_mode", true}}}, {"header", header}, {"elements", tail}}}};
  size_t fixed = JsonSize(base) + JsonSize(more_el) + 2 + 100;
  size_t budget = o.max_body_bytes - std::min(o.max_body_bytes, fixed);
  OrderedJson elements = OrderedJson::array();
  size_t shown = 0;
  for (const auto& a : alerts) {
    OrderedJson div = {
        {"tag", "div"},
        {"text", {{"tag", "lark_md"}, {"content", OneAlert(a, templates, o, true)}}}};
    size_t cost = JsonSize(div) + 1 + (shown > 0 ? JsonSize(OrderedJson{{"tag", "hr"}}) + 1 : 0);
    if (cost > budget && shown > 0) break;
    budget -= std::min(budget, cost);
    if (shown > 0) elements.push_back({{"tag", "hr"}});
    elements.push_back(std::move(div));
    ++shown;
  }
  if (shown < alerts.size()) {
    elements.push_back(
        {{"tag", "note"},
         {"elements", {{{"tag", "plain_text"}, {"content", MoreLine(alerts.size() - shown)}}}}});
  }
  for (auto& t : tail) elements.push_back(std::move(t));
  base["card"]["elements"] = std::move(elements);
  r.body = base.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  r.shown = shown;
  r.folded = alerts.size() - shown;
  return r;
}

Rendered RenderJson(const std::vector<Alert>& alerts, const std::string& receiver,
                    const std::string& group_key, const RenderOptions& o) {
  OrderedJson list = OrderedJson::array();
  size_t firing = 0;
  for (const auto& a : alerts) {
    firing += a.firing();
    OrderedJson item = {{"status", a.status},
                        {"fingerprint", a.fingerprint},
                        {"node", NodeOf(a)},
                        {"device", DeviceOf(a)},
                        {"labels", a.labels},
                        {"annotations", a.annotations},
                        {"starts_at", UnixSecondsRfc3339(a.starts_at)},
                        {"starts_at_local", o.time_zone.Format(a.starts_at)}};
    if (a.ends_at > 0) {
      item["ends_at"] = UnixSecondsRfc3339(a.ends_at);
      item["ends_at_local"] = o.time_zone.Format(a.ends_at);
    }
    if (!a.generator_url.empty()) item["generator_url"] = a.generator_url;
    list.push_back(std::move(item));
  }
  OrderedJson body = {{"receiver", receiver},
                      {"status", firing > 0 ? "firing" : "resolved"},
                      {"group_key", group_key},
                      {"alerts", std::move(list)}};
  if (!o.dashboard_url.empty()) body["dashboard_url"] = o.dashboard_url;
  if (!o.prometheus_url.empty()) body["prometheus_url"] = o.prometheus_url;
  Rendered r;
  r.body = body.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  r.shown = alerts.size();
  return r;
}

}  // namespace anxin::notify
