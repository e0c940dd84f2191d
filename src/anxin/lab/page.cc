// The lab's status page (page.h).
#include "anxin/lab/page.h"

#include <fmt/format.h>

#include <ctime>

#include "anxin/base/strings.h"

namespace anxin::lab {
namespace {

std::string Esc(const nlohmann::json& v) {
  if (v.is_string()) return XmlEscape(v.get<std::string>());
  if (v.is_null()) return "-";
  return XmlEscape(v.dump());
}

std::string Hms(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  const time_t t = static_cast<time_t>(v.get<double>());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string After(const nlohmann::json& seconds) {
  if (!seconds.is_number()) return "-";
  return fmt::format("+{:.1f} s", seconds.get<double>());
}

constexpr const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:1.2em;background:#f7f7f9;color:#222}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;font-size:.9em}
td,th{border:1px solid #ddd;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#eef} .ok{color:#17803d;font-weight:600} .bad{color:#c0262d;font-weight:600}
.warn{color:#b45309;font-weight:600} .muted{color:#777} .card{background:#fff;border-left:4px solid #999;
padding:.35em .6em;margin:.3em 0;font-size:.88em;max-width:70em}
.card.firing{border-color:#c0262d} .card.resolved{border-color:#17803d}
.grid{display:flex;flex-wrap:wrap;gap:.4em} .node{background:#fff;border:1px solid #ddd;padding:.4em .6em;min-width:9em}
)";

}  // namespace

std::string RenderLabPage(const nlohmann::json& status, const nlohmann::json& report) {
  std::string h =
      "<!doctype html><html><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"2\"><title>anxin lab</title><style>";
  h += kStyle;
  h += "</style></head><body>";
  const auto nodes = status.value("nodes", nlohmann::json::array());
  h += fmt::format(
      "<h1>anxin lab: {} node(s)</h1><div class=\"muted\">{} &middot; job generation "
      "{} &middot; faults injected {} of {} &middot; updated {} UTC</div>",
      nodes.size(), Esc(status.value("dir", "")), Esc(status.value("generation", 0)),
      Esc(status.value("faults_injected", 0)), Esc(status.value("faults_total", 0)),
      Hms(status.value("time", nlohmann::json())));
  h += "<h2>Nodes</h2><div class=\"grid\">";
  for (const auto& n : nodes) {
    const std::string state = n.value("state", "");
    const char* cls = state == "stepping" ? "ok" : state == "lost" ? "bad" : "warn";
    h += fmt::format(
        "<div class=\"node\"><b>{}</b> <span class=\"{}\">{}</span><br>step {} "
        "&middot; gen {}<br><a href=\"http://127.0.0.1:{}/\">agent :{}</a></div>",
        Esc(n.value("name", "")), cls, XmlEscape(state), Esc(n.value("step", -1)),
        Esc(n.value("generation", -1)), Esc(n.value("agent_port", 0)),
        Esc(n.value("agent_port", 0)));
  }
  h += "</div>";

  h += "<h2>Alerts in Prometheus (pending and firing)</h2>";
  const auto alerts = status.value("alerts", nlohmann::json::array());
  if (alerts.empty())
    h += "<div class=\"muted\">none</div>";
  else {
    h += "<table><tr><th>alert</th><th>node</th><th>NPU</th><th>state</th></tr>";
    for (const auto& a : alerts) {
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
          Esc(a.value("alertname", "")), Esc(a.value("node", "")), Esc(a.value("device", "")),
          a.value("state", "") == "firing" ? "bad" : "warn", Esc(a.value("state", "")));
    }
    h += "</table>";
  }

  h += "<h2>Faults</h2><table><tr><th>#</th><th>fault</th><th>injected</th><th>alert</th>"
       "<th>firing</th><th>card</th><th>recovery</th><th>every node stepping</th>"
       "<th>resolved card</th><th></th></tr>";
  for (const auto& r : report.value("rows", nlohmann::json::array())) {
    const auto& s = r.value("seconds", nlohmann::json::object());
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
        r.value("fault", 0) + 1, Esc(r.value("description", "")),
        Hms(r.value("injected", nlohmann::json())), Esc(r.value("alert", "")),
        r.value("prometheus", true) ? After(s.value("firing", nlohmann::json())) : "(anxin run)",
        After(s.value("card", nlohmann::json())),
        r.value("recovery_expected", false) ? After(s.value("recovery", nlohmann::json()))
                                            : "not needed",
        After(s.value("stepping", nlohmann::json())),
        r.value("resolve_expected", true) ? After(s.value("resolved", nlohmann::json())) : "n/a",
        r.value("done", false) ? "ok" : "warn", r.value("done", false) ? "done" : "waiting");
  }
  h += "</table>";

  h += "<h2>Cards delivered to the Feishu sink</h2>";
  const auto cards = report.value("cards", nlohmann::json::array());
  if (cards.empty()) h += "<div class=\"muted\">none yet</div>";
  for (auto it = cards.rbegin(); it != cards.rend(); ++it) {
    const std::string st = it->value("status", "");
    h += fmt::format("<div class=\"card {}\"><span class=\"muted\">{}</span> {}</div>",
                     st == "firing" ? "firing" : "resolved",
                     Hms(it->value("time", nlohmann::json())), Esc(it->value("text", "")));
  }
  const auto links = status.value("links", nlohmann::json::object());
  h += "<h2>Links</h2><div>";
  for (const auto& [name, url] : links.items()) {
    h += fmt::format("<a href=\"{}\">{}</a> &nbsp; ", Esc(url), XmlEscape(name));
  }
  h += "</div></body></html>\n";
  return h;
}

}  // namespace anxin::lab
