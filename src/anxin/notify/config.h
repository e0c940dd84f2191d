// The `notify:` section of anxin's configuration file: receivers (Feishu or
// Lark bots, generic JSON webhooks, JSON-lines files), the routes that pick
// them by alert labels, and delivery settings (docs/notify.md).
//
//   auto root = ConfigNode::Parse(R"(
//   receivers:
//     - name: oncall
//       type: feishu
//       url_env: ONCALL_HOOK           # https://open.feishu.cn/open-apis/bot/v2/hook/...
//       secret_file: /etc/anxin/oncall.secret
//     - name: audit
//       type: file
//       path: /var/log/anxin/alerts.jsonl
//   routes:
//     - matchers: ['severity="critical"', 'node=~"gpu-.*"']
//       receivers: [oncall]
//       continue: true
//   default_receivers: [audit]
//   time_zone: Asia/Shanghai
//   )", "notify");
//   if (root) {
//     auto config = notify::ParseNotifyConfig(*root, SystemEnvironment());
//     // config->Route(labels) -> the receivers an alert with those labels goes to
//   }
//
// Secrets (a bot's signing secret, and its URL, whose last part is a token)
// come from a file (`secret_file`, `url_file`) or an environment variable
// (`secret_env`, `url_env`) and are never printed: errors name the file or
// the variable, and Redact() removes them from anything else.
//
// Thread safety: an immutable value once parsed.
#ifndef ANXIN_NOTIFY_CONFIG_H_
#define ANXIN_NOTIFY_CONFIG_H_

#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/base/global_config.h"
#include "anxin/notify/alert.h"

namespace anxin::notify {

enum class ReceiverType { kFeishu, kLark, kWebhook, kFile };

struct Templates {
  // "{{name}}" placeholders: status, alertname, severity, node, device,
  // starts_at, ends_at, summary, description, count, labels.X, annotations.X.
  std::string title = "{{status_text}} {{alertname}}";
  std::string alert = "";  // "" = the built-in layout
};

struct ReceiverConfig {
  std::string name{};
  ReceiverType type = ReceiverType::kWebhook;
  std::string url{};     // feishu, lark, webhook (secret when from url_file/url_env)
  std::string secret{};  // feishu, lark signing secret; "" = unsigned bot
  std::string path{};    // file
  bool card = true;      // feishu, lark: interactive card (else plain text)
  Templates templates{};
  // Strings to hide in anything printed: the secret and the URL's token.
  std::vector<std::string> redact{};
};

struct Matcher {
  enum class Op { kEqual, kNotEqual, kRegex, kNotRegex };
  std::string label{};
  Op op = Op::kEqual;
  std::string value{};
  std::regex regex{};  // kRegex, kNotRegex: anchored at both ends
  bool Matches(const LabelSet& labels) const;
};
// `name="value"`, `name!="value"`, `name=~"regex"`, `name!~"regex"`.
Result<Matcher> ParseMatcher(std::string_view text);

struct RouteConfig {
  std::vector<Matcher> matchers{};  // all must match
  std::vector<std::string> receivers{};
  bool continue_matching = false;  // `continue: true`
};

struct NotifyConfig {
  std::vector<ReceiverConfig> receivers{};
  std::vector<RouteConfig> routes{};
  std::vector<std::string> default_receivers{};  // when no route matches
  std::string time_zone = "UTC";
  std::string dashboard_url{};   // a link on every card; "" = none
  std::string prometheus_url{};  // likewise; each alert's generatorURL is linked too
  uint64_t spool_max_bytes = 256ull << 20;
  double backoff_initial_s = 1;
  double backoff_max_s = 300;
  int rate_per_second = 5;    // per bot
  int rate_per_minute = 100;  // per bot
  double send_timeout_s = 10;
  ParseLimits limits{};

  const ReceiverConfig* Find(std::string_view name) const;
  // Receivers (indices into `receivers`) for an alert with these labels, in
  // route order, each once.
  std::vector<size_t> Route(const LabelSet& labels) const;
  // text with every secret of every receiver replaced by "[redacted]".
  std::string Redact(std::string text) const;
};

// A configuration without a configuration file: every alert to a JSON-lines
// file (receiver "file") and/or a generic JSON webhook (receiver "webhook"),
// as `anxin notify --sink-file PATH --sink-webhook URL` and `anxin demo` use.
//
//   ANXIN_ASSIGN_OR_RETURN(notify::NotifyConfig config,
//                          notify::LocalSinkConfig({.file = "/tmp/demo/alerts.jsonl"}));
//
// Neither given, or a URL that is not http:// or https:// -> kInvalidArgument.
struct LocalSinks {
  std::string file{};     // appended to, one JSON object per line
  std::string webhook{};  // POSTed the JSON object, e.g. http://127.0.0.1:8080/alerts
};
Result<NotifyConfig> LocalSinkConfig(const LocalSinks& sinks);

// Reads and checks the section; env looks up *_env variables. Errors carry
// "file:line:col: notify.key: problem" and never a secret's value.
Result<NotifyConfig> ParseNotifyConfig(const ConfigNode& section, const EnvironmentLookup& env);

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_CONFIG_H_
