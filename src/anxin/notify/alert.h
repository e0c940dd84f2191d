// The Alertmanager webhook payload (version "4") and its strict parser.
//
//   ParseLimits limits;                       // 1 MiB, 1000 alerts, ...
//   std::string body = R"({"version":"4","status":"firing","receiver":"r",
//       "groupKey":"{}:{}","alerts":[{"status":"firing","labels":{"alertname":"Hot"},
//       "annotations":{},"startsAt":"2026-12-02T13:28:50Z","endsAt":"0001-01-01T00:00:00Z",
//       "fingerprint":"0a1b2c3d4e5f6071"}]})";
//   Result<notify::Notification> n = notify::ParseWebhook(body, limits);
//   if (n) spdlog::info("{} alerts, first {}", n->alerts.size(), n->alerts[0].Label("alertname"));
//
// Strict: the version must be "4", statuses "firing" or "resolved", labels and
// annotations objects of strings, times RFC 3339, every alert with a
// fingerprint. Keys the format may grow are ignored. Anything else, and
// anything over the limits, is kInvalidArgument with a message that names the
// field ("alerts[3].labels.node: expected a string, got 7").
//
// Thread safety: pure functions over values.
#ifndef ANXIN_NOTIFY_ALERT_H_
#define ANXIN_NOTIFY_ALERT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::notify {

using LabelSet = std::map<std::string, std::string>;

struct Alert {
  std::string status{};  // "firing" or "resolved"
  LabelSet labels{};
  LabelSet annotations{};
  int64_t starts_at = 0;  // unix seconds
  int64_t ends_at = 0;    // unix seconds; 0 while firing (Alertmanager's zero time)
  std::string generator_url{};
  std::string fingerprint{};

  // "" when absent.
  std::string Label(std::string_view name) const;
  std::string Annotation(std::string_view name) const;
  bool firing() const { return status == "firing"; }
};

struct Notification {
  std::string receiver{};
  std::string status{};
  std::vector<Alert> alerts{};
  LabelSet group_labels{};
  LabelSet common_labels{};
  LabelSet common_annotations{};
  std::string external_url{};
  std::string group_key{};
  int64_t truncated_alerts = 0;
};

struct ParseLimits {
  size_t max_bytes = 1 << 20;       // the whole body
  size_t max_alerts = 1000;         // per payload
  size_t max_labels = 64;           // per label set (labels, annotations, ...)
  size_t max_string_bytes = 16384;  // any one string
};

Result<Notification> ParseWebhook(std::string_view body, const ParseLimits& limits = {});

// The payload Alertmanager would post for n (version "4"), which ParseWebhook
// reads back as n: for programs that hand alerts to `anxin notify` without an
// Alertmanager in between (`anxin demo`, load generators). Times are whole
// seconds; an ends_at of 0 is written as Alertmanager's zero time. Each
// fingerprint must be letters and digits, as ParseWebhook requires.
//
//   notify::Alert a{.status = "firing", .labels = {{"alertname", "NpuHot"}, {"node", "n1"},
//                   {"device", "3"}}, .starts_at = std::time(nullptr), .fingerprint =
//                   "5f1c2a9e0b7d4c11"};
//   std::string body = notify::EncodeWebhook({.receiver = "demo", .status = "firing",
//                                             .alerts = {a}, .group_key = "demo"});
//   // POST body to http://127.0.0.1:<port>/webhook
std::string EncodeWebhook(const Notification& n);

// Unix seconds as RFC 3339 in UTC ("2026-12-02T13:28:50Z"); 0 is
// Alertmanager's zero time "0001-01-01T00:00:00Z".
std::string FormatRfc3339Utc(int64_t t);

// RFC 3339 ("2026-12-02T13:28:50.123Z", "...+08:00") to unix seconds
// (fractions dropped). Alertmanager's zero time "0001-01-01T00:00:00Z" is 0.
Result<int64_t> ParseRfc3339(std::string_view text);

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_ALERT_H_
