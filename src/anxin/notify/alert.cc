#include "anxin/notify/alert.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "anxin/base/time_format.h"

namespace anxin::notify {
namespace {

using json = nlohmann::json;

// Deeper than the format ever goes (payload > alerts > alert > labels).
constexpr int kMaxDepth = 6;

struct DepthExceeded {};

std::string TypeName(const json& j) {
  if (j.is_number()) return j.dump();
  if (j.is_string()) return "a string";
  if (j.is_null()) return "null";
  if (j.is_boolean()) return j.dump();
  if (j.is_array()) return "a list";
  return "an object";
}

class Reader {
 public:
  explicit Reader(const ParseLimits& limits) : limits_(limits) {}

  Result<std::string> String(const json& obj, const std::string& path, std::string_view key,
                             bool required) const {
    auto it = obj.find(key);
    std::string where = path.empty() ? std::string(key) : path + "." + std::string(key);
    if (it == obj.end() || it->is_null()) {
      if (required) return InvalidArgument(where + ": missing");
      return std::string();
    }
    if (!it->is_string())
      return InvalidArgument(where + ": expected a string, got " + TypeName(*it));
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > limits_.max_string_bytes) {
      return InvalidArgument(where + ": " + std::to_string(s.size()) +
                             " bytes, over the limit of " +
                             std::to_string(limits_.max_string_bytes));
    }
    return s;
  }

  Result<LabelSet> Labels(const json& obj, const std::string& path, std::string_view key) const {
    auto it = obj.find(key);
    std::string where = path.empty() ? std::string(key) : path + "." + std::string(key);
    LabelSet out;
    if (it == obj.end() || it->is_null()) return out;
    if (!it->is_object())
      return InvalidArgument(where + ": expected an object, got " + TypeName(*it));
    if (it->size() > limits_.max_labels) {
      return InvalidArgument(where + ": " + std::to_string(it->size()) +
                             " entries, over the limit of " + std::to_string(limits_.max_labels));
    }
    for (const auto& [k, v] : it->items()) {
      if (k.empty() || k.size() > 256)
        return InvalidArgument(where + ": a name of " + std::to_string(k.size()) + " bytes");
      ANXIN_ASSIGN_OR_RETURN(std::string value, String(*it, where, k, true));
      out.emplace(k, std::move(value));
    }
    return out;
  }

 private:
  const ParseLimits& limits_;
};

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::string Alert::Label(std::string_view name) const {
  auto it = labels.find(std::string(name));
  return it == labels.end() ? std::string() : it->second;
}
std::string Alert::Annotation(std::string_view name) const {
  auto it = annotations.find(std::string(name));
  return it == annotations.end() ? std::string() : it->second;
}

Result<int64_t> ParseRfc3339(std::string_view t) {
  auto bad = [&] {
    return InvalidArgument("expected an RFC 3339 time like 2026-12-02T13:28:50Z, got '" +
                           std::string(t.substr(0, 64)) + "'");
  };
  int y, mo, d, h, mi, s;
  if (!Digits(t, 0, 4, y) || t.size() < 20 || t[4] != '-' || !Digits(t, 5, 2, mo) || t[7] != '-' ||
      !Digits(t, 8, 2, d) || (t[10] != 'T' && t[10] != 't' && t[10] != ' ') ||
      !Digits(t, 11, 2, h) || t[13] != ':' || !Digits(t, 14, 2, mi) || t[16] != ':' ||
      !Digits(t, 17, 2, s)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  size_t pos = 19;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    size_t start = pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') ++pos;
    if (pos == start || pos - start > 9) return bad();
  }
  int offset = 0;
  if (pos < t.size() && (t[pos] == 'Z' || t[pos] == 'z')) {
    ++pos;
  } else if (pos < t.size() && (t[pos] == '+' || t[pos] == '-')) {
    int oh, om;
    if (!Digits(t, pos + 1, 2, oh) || pos + 3 >= t.size() || t[pos + 3] != ':' ||
        !Digits(t, pos + 4, 2, om) || oh > 23 || om > 59) {
      return bad();
    }
    offset = (oh * 3600 + om * 60) * (t[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != t.size()) return bad();
  if (y == 1 && mo == 1 && d == 1) return 0;  // Go's zero time: "not set"
  return DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
         mi * 60 + s - offset;
}

Result<Notification> ParseWebhook(std::string_view body, const ParseLimits& limits) {
  if (body.size() > limits.max_bytes) {
    return InvalidArgument("payload of " + std::to_string(body.size()) +
                           " bytes is over the limit of " + std::to_string(limits.max_bytes));
  }
  json root;
  try {
    root = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) throw DepthExceeded{};
      return true;
    });
  } catch (const DepthExceeded&) {
    return InvalidArgument("payload nests deeper than " + std::to_string(kMaxDepth) + " levels");
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("payload is not JSON: ") + e.what());
  }
  if (!root.is_object())
    return InvalidArgument("payload: expected an object, got " + TypeName(root));
  Reader r(limits);
  Notification n;
  ANXIN_ASSIGN_OR_RETURN(std::string version, r.String(root, "", "version", true));
  if (version != "4") {
    return InvalidArgument("version: expected \"4\" (Alertmanager webhook), got '" + version + "'");
  }
  ANXIN_ASSIGN_OR_RETURN(n.receiver, r.String(root, "", "receiver", false));
  ANXIN_ASSIGN_OR_RETURN(n.status, r.String(root, "", "status", true));
  if (n.status != "firing" && n.status != "resolved") {
    return InvalidArgument("status: expected firing or resolved, got '" + n.status + "'");
  }
  ANXIN_ASSIGN_OR_RETURN(n.group_key, r.String(root, "", "groupKey", false));
  ANXIN_ASSIGN_OR_RETURN(n.external_url, r.String(root, "", "externalURL", false));
  ANXIN_ASSIGN_OR_RETURN(n.group_labels, r.Labels(root, "", "groupLabels"));
  ANXIN_ASSIGN_OR_RETURN(n.common_labels, r.Labels(root, "", "commonLabels"));
  ANXIN_ASSIGN_OR_RETURN(n.common_annotations, r.Labels(root, "", "commonAnnotations"));
  if (auto it = root.find("truncatedAlerts"); it != root.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return InvalidArgument("truncatedAlerts: expected a count, got " + TypeName(*it));
    }
    n.truncated_alerts = it->get<int64_t>();
  }
  auto alerts = root.find("alerts");
  if (alerts == root.end() || !alerts->is_array()) {
    return InvalidArgument("alerts: expected a list, got " +
                           (alerts == root.end() ? std::string("nothing") : TypeName(*alerts)));
  }
  if (alerts->empty()) return InvalidArgument("alerts: the list is empty");
  if (alerts->size() > limits.max_alerts) {
    return InvalidArgument("alerts: " + std::to_string(alerts->size()) +
                           " alerts, over the limit of " + std::to_string(limits.max_alerts));
  }
  n.alerts.reserve(alerts->size());
  for (size_t i = 0; i < alerts->size(); ++i) {
    const json& a = (*alerts)[i];
    const std::string path = "alerts[" + std::to_string(i) + "]";
    if (!a.is_object()) return InvalidArgument(path + ": expected an object, got " + TypeName(a));
    Alert alert;
    ANXIN_ASSIGN_OR_RETURN(alert.status, r.String(a, path, "status", true));
    if (alert.status != "firing" && alert.status != "resolved") {
      return InvalidArgument(path + ".status: expected firing or resolved, got '" + alert.status +
                             "'");
    }
    ANXIN_ASSIGN_OR_RETURN(alert.labels, r.Labels(a, path, "labels"));
    if (alert.labels.empty()) return InvalidArgument(path + ".labels: an alert needs labels");
    ANXIN_ASSIGN_OR_RETURN(alert.annotations, r.Labels(a, path, "annotations"));
    ANXIN_ASSIGN_OR_RETURN(std::string starts, r.String(a, path, "startsAt", true));
    auto s = ParseRfc3339(starts);
    if (!s) return InvalidArgument(path + ".startsAt: " + s.error().message());
    alert.starts_at = *s;
    ANXIN_ASSIGN_OR_RETURN(std::string ends, r.String(a, path, "endsAt", false));
    if (!ends.empty()) {
      auto e = ParseRfc3339(ends);
      if (!e) return InvalidArgument(path + ".endsAt: " + e.error().message());
      alert.ends_at = *e;
    }
    ANXIN_ASSIGN_OR_RETURN(alert.generator_url, r.String(a, path, "generatorURL", false));
    ANXIN_ASSIGN_OR_RETURN(alert.fingerprint, r.String(a, path, "fingerprint", true));
    if (alert.fingerprint.empty() || alert.fingerprint.size() > 64) {
      return InvalidArgument(path + ".fingerprint: expected 1 to 64 characters");
    }
    for (char c : alert.fingerprint) {
      if (!std::isalnum(static_cast<unsigned char>(c))) {
        return InvalidArgument(path + ".fingerprint: expected letters and digits only");
      }
    }
    n.alerts.push_back(std::move(alert));
  }
  return n;
}

std::string FormatRfc3339Utc(int64_t t) {
  if (t == 0) return "0001-01-01T00:00:00Z";
  return FormatRfc3339(std::chrono::system_clock::from_time_t(static_cast<time_t>(t)),
                       TimePrecision::kSeconds);
}

std::string EncodeWebhook(const Notification& n) {
  json alerts = json::array();
  for (const Alert& a : n.alerts) {
    alerts.push_back({{"status", a.status},
                      {"labels", a.labels},
                      {"annotations", a.annotations},
                      {"startsAt", FormatRfc3339Utc(a.starts_at)},
                      {"endsAt", FormatRfc3339Utc(a.ends_at)},
                      {"generatorURL", a.generator_url},
                      {"fingerprint", a.fingerprint}});
  }
  json j = {{"version", "4"},
            {"groupKey", n.group_key},
            {"truncatedAlerts", n.truncated_alerts},
            {"status", n.status},
            {"receiver", n.receiver},
            {"groupLabels", n.group_labels},
            {"commonLabels", n.common_labels},
            {"commonAnnotations", n.common_annotations},
            {"externalURL", n.external_url},
            {"alerts", std::move(alerts)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace anxin::notify
