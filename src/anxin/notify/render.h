// Message rendering: the body each kind of receiver gets for a group of
// alerts, under the size a chat API takes.
//
//   notify::RenderOptions options;            // UTC, 20 KB, no links
//   notify::Alert alert;
//   alert.status = "firing";
//   alert.labels = {{"alertname", "NpuHot"}, {"node", "gpu-07"}, {"device", "3"},
//                   {"severity", "critical"}};
//   alert.annotations = {{"summary", "NPU 3 at 91 C"}};
//   alert.starts_at = 1764682130;
//   alert.fingerprint = "c0ffee";
//   notify::Rendered card = notify::RenderBot({alert}, notify::Templates{}, true, options);
//   // card.body: {"msg_type":"interactive","card":{"header":{"template":"red",...},...}}
//   // card.fallback: the same alerts as {"msg_type":"text",...}
//
// A bot message names, for each alert: its state, node, device (NPU/GPU id),
// start time (and end time once resolved) in the configured time zone,
// summary and description, with links to the dashboard, Prometheus and the
// alert's own expression. When all alerts do not fit in max_body_bytes the
// last ones are folded into a "+N more" line.
//
// Thread safety: pure functions.
#ifndef ANXIN_NOTIFY_RENDER_H_
#define ANXIN_NOTIFY_RENDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "anxin/notify/alert.h"
#include "anxin/notify/config.h"
#include "anxin/notify/time_zone.h"

namespace anxin::notify {

struct RenderOptions {
  TimeZone time_zone{};
  std::string dashboard_url{};
  std::string prometheus_url{};
  // Feishu/Lark take 20 KB; the timestamp and signature added when sending
  // need about 100 bytes more.
  size_t max_body_bytes = 19 * 1024;
};

struct Rendered {
  std::string body{};      // what is sent (JSON)
  std::string fallback{};  // bots: the plain-text form; "" for other kinds
  size_t shown = 0;        // alerts in the message
  size_t folded = 0;       // alerts summed up in the "+N more" line
};

// The label that names an alert's node and its device: the first present
// of node, nodename, hostname, instance / device, npu, gpu, device_id, id.
std::string NodeOf(const Alert& alert);
std::string DeviceOf(const Alert& alert);

// Expands "{{name}}" placeholders (see Templates) for one alert.
std::string Expand(const std::string& templ, const Alert& alert, const RenderOptions& options,
                   size_t count);

// Feishu / Lark: an interactive card (card = true) or text; fallback is
// always the text form.
Rendered RenderBot(const std::vector<Alert>& alerts, const Templates& templates, bool card,
                   const RenderOptions& options);
// Generic webhook and file sink: {"receiver","status","group_key","alerts":[...]}
// with every label and annotation, times as RFC 3339 UTC and in the time zone.
Rendered RenderJson(const std::vector<Alert>& alerts, const std::string& receiver,
                    const std::string& group_key, const RenderOptions& options);

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_RENDER_H_
