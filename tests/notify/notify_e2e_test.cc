// The whole alert path on loopback, with the real components a user runs:
// `anxin agent` on a sim scenario -> Prometheus (Debian) scraping it and
// evaluating deploy/prometheus/rules/anxin.rules.yml -> Alertmanager (Debian
// prometheus-alertmanager) -> `anxin notify` -> a fake Feishu bot that checks
// every signature and records the cards. The scenario
// (tests/fixtures/notify/e2e-scenario.yaml) pushes NPU 2 to 90 C and NPU 1
// to 94% HBM from 8 s to 45 s; both alerts must arrive as cards naming the
// node, the device and the time they started, then as resolved notices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "../support/monitoring_stack.h"
#include "anxin/base/testing.h"
#include "notify_harness.h"

namespace anxin {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::AgentProcess;
using ::anxin::testing::AlertmanagerProcess;
using ::anxin::testing::FakeBot;
using ::anxin::testing::kAlertmanager;
using ::anxin::testing::kBotSecret;
using ::anxin::testing::kPrometheus;
using ::anxin::testing::kPromtool;
using ::anxin::testing::NotifyProcess;
using ::anxin::testing::PrometheusProcess;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kNode[] = "e2e-node-7";

// The shipped rules with every `for:` cut to 2 s, so that the test waits
// seconds instead of minutes; everything else (expressions, labels,
// annotations) is the shipped file's. Returns "" and fails when the file has
// no `for:` to cut (then this test would no longer test the shipped rules).
std::string RulesWithShortFor(const TempDir& dir) {
  const std::string shipped =
      testing::ReadTextFile(SourcePath("deploy/prometheus/rules/anxin.rules.yml"));
  EXPECT_FALSE(shipped.empty());
  static const std::regex kFor(R"((\n[ \t]+for:)[ \t]+[0-9]+[smh][^\n]*)");
  const std::string shortened = std::regex_replace(shipped, kFor, "$1 2s");
  EXPECT_NE(shortened, shipped) << "no `for:` in the shipped rules";
  const std::string path = dir.Write("rules/anxin.rules.yml", shortened);
  auto check = RunCommand({kPromtool, "check", "rules", path}, {.timeout = 60s});
  EXPECT_TRUE(check && check->exit_code == 0)
      << (check ? check->stdout_text + check->stderr_text : check.error().ToString());
  return path;
}

// "2026-12-02T08:21:05.123Z" (Alertmanager's startsAt) as the card prints it
// in the time zone +08:00: "2026-12-02 16:21:05 +08:00".
std::string InPlusEight(const std::string& rfc3339) {
  std::tm tm{};
  EXPECT_NE(strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << rfc3339;
  const time_t t = timegm(&tm) + 8 * 3600;
  std::tm local{};
  gmtime_r(&t, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S +08:00", &local);
  return buf;
}

// The cards whose text holds every one of needles.
std::vector<json> CardsWith(const std::vector<json>& cards, std::vector<std::string> needles) {
  std::vector<json> out;
  for (const json& c : cards) {
    const std::string text = c.dump();
    bool all = true;
    for (const auto& n : needles) all = all && text.find(n) != std::string::npos;
    if (all) out.push_back(c);
  }
  return out;
}

TEST(NotifyEndToEnd, AgentPrometheusAlertmanagerNotifyFeishu) {
  for (const char* tool : {kPromtool, kPrometheus, kAlertmanager}) {
    ASSERT_TRUE(std::filesystem::exists(tool)) << tool << ": run scripts/install-deps";
  }
  TempDir dir("anxin-notify-e2e");
  FakeBot bot;
  ASSERT_GT(bot.port(), 0);

  // anxin notify: the bot for everything, times in +08:00.
  const std::string secret = dir.Write("bot.secret", std::string(kBotSecret) + "\n");
  const std::string notify_config = dir.Write("anxin.yaml", R"(
notify:
  receivers:
    - name: oncall
      type: feishu
      url: )" + bot.url() + R"(
      secret_file: )" + secret + R"(
  default_receivers: [oncall]
  time_zone: "+08:00"
  backoff_initial: 100ms
  backoff_max: 1s
)");
  NotifyProcess notify(dir, notify_config);
  ASSERT_GT(notify.port(), 0) << notify.Stderr();

  // Alertmanager: one group per alert and device, flushed within a second.
  AlertmanagerProcess am(dir, R"(
route:
  receiver: anxin
  group_by: [alertname, node, device]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: anxin
    webhook_configs:
      - url: http://127.0.0.1:)" + std::to_string(notify.port()) +
                                  R"(/webhook
        send_resolved: true
)");
  ASSERT_GT(am.port(), 0);
  ASSERT_TRUE(WaitFor([&] { return am.Ready(); }, 30s)) << am.Stderr();

  // The agent, then Prometheus scraping it every second and sending to
  // Alertmanager. The scenario's clock starts with the agent: its faults
  // begin at 8 s, time enough for Prometheus to start.
  AgentProcess agent(
      dir, {"--scenario", testing::FixturePath("notify/e2e-scenario.yaml"), "--interval", "500ms"},
      kNode);
  ASSERT_GT(agent.port(), 0) << agent.Stderr();
  RulesWithShortFor(dir);
  PrometheusProcess prom(dir, R"(
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules/anxin.rules.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:)" +
                                  std::to_string(am.port()) +
                                  R"(']
scrape_configs:
  - job_name: anxin-agent
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:)" + std::to_string(agent.port()) +
                                  R"(']
)");
  ASSERT_GT(prom.port(), 0);

  // Both alerts reach the bot as cards, each naming the node, the device and
  // the start time Alertmanager holds.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"AnxinDeviceTemperatureHigh", "2"}, {"AnxinHbmUsageHigh", "1"}};
  auto firing_cards = [&](const std::string& alert, const std::string& device) {
    return CardsWith(bot.messages(), {"[FIRING]", alert, "**Node:** " + std::string(kNode),
                                      "**Device:** " + device});
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& [alert, device] : expected) {
          if (firing_cards(alert, device).empty()) return false;
        }
        return true;
      },
      60s))
      << "cards: " << json(bot.messages()).dump(1) << "\nnotify: " << notify.Stderr()
      << "\nalertmanager: " << am.Stderr() << "\nprometheus: " << prom.Stderr()
      << "\nALERTS: " << prom.Query("ALERTS").dump();

  // The start time on each card is the one Alertmanager has for the alert.
  std::map<std::string, std::string> since;  // alertname -> "YYYY-MM-DD HH:MM:SS +08:00"
  for (const json& a : am.Alerts()) {
    const json& labels = a["labels"];
    if (labels.value("node", "") != kNode) continue;
    since[labels.value("alertname", "")] = InPlusEight(a.value("startsAt", ""));
  }
  for (const auto& [alert, device] : expected) {
    ASSERT_TRUE(since.count(alert)) << alert << " not in Alertmanager: " << am.Alerts().dump();
    const std::vector<json> cards = firing_cards(alert, device);
    EXPECT_EQ(cards.size(), 1u) << alert;
    const json& card = cards.front();
    EXPECT_EQ(card["msg_type"], "interactive");
    EXPECT_EQ(card["card"]["header"]["template"], "orange") << alert;  // severity: warning
    EXPECT_THAT(card.dump(), HasSubstr("**Since:** " + since[alert])) << alert;
  }

  // The scenario recovers at 45 s: a resolved notice for each, with the same
  // start time, after its firing card.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& [alert, device] : expected) {
          if (CardsWith(bot.messages(), {"[RESOLVED]", alert, "**Device:** " + device}).empty())
            return false;
        }
        return true;
      },
      75s))
      << "cards: " << json(bot.messages()).dump(1) << "\nnotify: " << notify.Stderr();
  const std::vector<json> all = bot.messages();
  for (const auto& [alert, device] : expected) {
    size_t firing_at = all.size(), resolved_at = all.size();
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string text = all[i].dump();
      if (text.find(alert) == std::string::npos) continue;
      if (text.find("[FIRING]") != std::string::npos && firing_at == all.size()) firing_at = i;
      if (text.find("[RESOLVED]") != std::string::npos) resolved_at = i;
    }
    EXPECT_LT(firing_at, resolved_at) << alert;
    const json& notice = all[resolved_at];
    EXPECT_EQ(notice["card"]["header"]["template"], "green") << alert;
    EXPECT_THAT(notice.dump(), HasSubstr("**Node:** " + std::string(kNode)));
    EXPECT_THAT(notice.dump(), HasSubstr("**Since:** " + since[alert]));
    EXPECT_THAT(notice.dump(), HasSubstr("**Resolved:** "));
  }
  EXPECT_EQ(bot.bad_signatures(), 0);
  // Nothing else fired: the healthy devices and the agent itself stay quiet.
  for (const json& c : all) {
    const std::string text = c.dump();
    EXPECT_TRUE(text.find("AnxinDeviceTemperatureHigh") != std::string::npos ||
                text.find("AnxinHbmUsageHigh") != std::string::npos)
        << text;
  }
  EXPECT_EQ(all.size(), 4u) << json(all).dump(1);

  // notify's own count agrees, and it stops cleanly.
  const std::string metrics = notify.Metrics();
  EXPECT_EQ(testing::Value(metrics, R"(anxin_notify_sent_messages_total{receiver="oncall"})"), 4);
  EXPECT_EQ(testing::Value(metrics, "anxin_notify_spool_messages"), 0);
  std::fprintf(stderr, "cards the bot got:\n%s\n", json(all).dump(1).c_str());
  (void)prom.Stop();
  (void)am.Stop();
  EXPECT_EQ(agent.Stop().value().exit_code, 0);
  EXPECT_EQ(notify.Term(), 0);
}

}  // namespace
}  // namespace anxin
