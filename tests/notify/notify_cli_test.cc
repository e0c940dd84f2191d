// `anxin notify` end to end: the built program between a client posting
// Alertmanager payloads and fake chat servers on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/notify/delivery.h"
#include "notify_harness.h"

namespace anxin {
namespace {

using ::anxin::testing::AnxinBinary;
using ::anxin::testing::FakeBot;
using Notify = ::anxin::testing::NotifyProcess;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kSecret = testing::kBotSecret;
constexpr const char* kToken = testing::kBotToken;

std::string Payload(const std::string& group,
                    const std::vector<std::pair<std::string, std::string>>& alerts,
                    const std::string& annotation = "") {
  json list = json::array();
  for (const auto& [fp, status] : alerts) {
    list.push_back(
        {{"status", status},
         {"labels",
          {{"alertname", "NpuOverTemp"},
           {"node", "gpu-07"},
           {"device", fp},
           {"severity", "critical"},
           {"group", group}}},
         {"annotations",
          {{"summary", "NPU " + fp + " at 91 C"},
           {"description", annotation.empty() ? "hot" : annotation}}},
         {"startsAt", "2026-12-02T13:28:50Z"},
         {"endsAt", status == "firing" ? "0001-01-01T00:00:00Z" : "2026-12-02T13:38:50Z"},
         {"generatorURL", "http://prometheus:9090/graph"},
         {"fingerprint", fp}});
  }
  return json{{"version", "4"},
              {"status", alerts[0].second},
              {"receiver", "anxin"},
              {"groupKey", group},
              {"alerts", list}}
      .dump();
}

std::string BotConfig(const TempDir& dir, const std::string& url, const std::string& extra = "") {
  const std::string secret = dir.Write("bot.secret", std::string(kSecret) + "\n");
  return dir.Write("anxin.yaml", R"(
notify:
  receivers:
    - name: oncall
      type: feishu
      url: )" + url + R"(
      secret_file: )" + secret + R"(
    - name: audit
      type: file
      path: )" + (dir / "audit.jsonl") +
                                     R"(
  routes:
    - matchers: ['severity="critical"']
      receivers: [oncall, audit]
  default_receivers: [audit]
  time_zone: "+08:00"
  dashboard_url: http://grafana.example:3000/d/anxin
  prometheus_url: http://prometheus.example:9090
  backoff_initial: 50ms
  backoff_max: 500ms
)" + extra);
}

double Metric(const std::string& text, const std::string& series) {
  for (size_t at = text.find(series + " "); at != std::string::npos;
       at = text.find(series + " ", at + 1)) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
  }
  return -1;
}

// True once notify has sent `sent` messages to receiver and holds none in
// its spool: everything posted so far has been delivered.
bool Settled(const std::string& metrics, const std::string& receiver, int sent) {
  return Metric(metrics, "anxin_notify_sent_messages_total{receiver=\"" + receiver + "\"}") ==
             sent &&
         Metric(metrics, "anxin_notify_spool_messages") == 0;
}

TEST(NotifyCli, DeliversSignedCardsDedupesAndSendsResolved) {
  TempDir dir;
  FakeBot bot;
  Notify n(dir, BotConfig(dir, bot.url()));
  ASSERT_GT(n.port(), 0) << n.Stderr();
  auto r = n.Post(Payload("g1", {{"a1", "firing"}}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(bot.WaitFor(1)) << n.Stderr();
  json card = bot.messages()[0];
  EXPECT_EQ(card["msg_type"], "interactive");
  EXPECT_EQ(card["card"]["header"]["template"], "red");
  const std::string text = card.dump();
  EXPECT_THAT(text, HasSubstr("**Node:** gpu-07"));
  EXPECT_THAT(text, HasSubstr("**Device:** a1"));
  EXPECT_THAT(text, HasSubstr("2026-12-02 21:28:50 +08:00"));
  EXPECT_THAT(text, HasSubstr("http://grafana.example:3000/d/anxin"));
  // Alertmanager repeating the same group: nothing new is stored; the count is
  // of messages, one per receiver the route names (oncall and audit).
  auto again = n.Post(Payload("g1", {{"a1", "firing"}}));
  ASSERT_TRUE(again.has_value());
  EXPECT_THAT(again->body, HasSubstr(R"("messages":0,"deduplicated":2)"));
  auto resolved = n.Post(Payload("g1", {{"a1", "resolved"}}));
  ASSERT_TRUE(resolved.has_value());
  ASSERT_TRUE(bot.WaitFor(2));
  json notice = bot.messages()[1];
  EXPECT_EQ(notice["card"]["header"]["template"], "green");
  EXPECT_THAT(notice.dump(), HasSubstr("[RESOLVED]"));
  // Once notify counts both as sent and its spool is empty, nothing else is
  // on its way to the bot.
  ASSERT_TRUE(WaitFor([&] { return Settled(n.Metrics(), "oncall", 2); })) << n.Metrics();
  EXPECT_EQ(bot.messages().size(), 2u);
  EXPECT_EQ(bot.bad_signatures(), 0);
  const std::string metrics = n.Metrics();
  EXPECT_EQ(Metric(metrics, "anxin_notify_received_alerts_total"), 3);
  EXPECT_EQ(Metric(metrics, "anxin_notify_deduplicated_alerts_total"), 2);  // both receivers
  EXPECT_EQ(Metric(metrics, R"(anxin_notify_sent_messages_total{receiver="oncall"})"), 2);
  EXPECT_EQ(Metric(metrics, "anxin_notify_spool_messages"), 0);
  EXPECT_EQ(n.Term(), 0);
  // The audit file has the same two messages.
  EXPECT_THAT(dir.Read("audit.jsonl"), HasSubstr(R"("status":"resolved")"));
  EXPECT_THAT(n.Stderr(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(n.Stderr(), Not(HasSubstr(kToken)));
}

TEST(NotifyCli, RateLimitedAndServerErrorsAreRetriedAndDeliveredOnce) {
  TempDir dir;
  FakeBot bot;
  bot.Script({{.code = 11232}, {.http = 500}, {.http = 502}});
  Notify n(dir, BotConfig(dir, bot.url()));
  ASSERT_GT(n.port(), 0) << n.Stderr();
  ASSERT_EQ(n.Post(Payload("g", {{"b1", "firing"}}))->status, 200);
  ASSERT_TRUE(bot.WaitFor(1, 30s)) << n.Stderr();
  ASSERT_TRUE(WaitFor([&] { return Settled(n.Metrics(), "oncall", 1); })) << n.Metrics();
  EXPECT_EQ(bot.messages().size(), 1u);
  EXPECT_EQ(bot.calls(), 4);
  const std::string m = n.Metrics();
  EXPECT_EQ(
      Metric(m, R"(anxin_notify_retried_messages_total{receiver="oncall",reason="rate_limited"})"),
      1);
  EXPECT_EQ(
      Metric(m, R"(anxin_notify_retried_messages_total{receiver="oncall",reason="server_error"})"),
      2);
  EXPECT_EQ(Metric(m, R"(anxin_notify_sent_messages_total{receiver="oncall"})"), 1);
  EXPECT_THAT(n.Stderr(), HasSubstr("code 11232"));
  EXPECT_THAT(n.Stderr(), Not(HasSubstr(kToken)));
}

TEST(NotifyCli, UnreachableThenUp) {
  TempDir dir;
  int port = 0;
  {
    FakeBot probe;  // a port that is free now
    port = probe.port();
  }
  const std::string url =
      "http://127.0.0.1:" + std::to_string(port) + "/open-apis/bot/v2/hook/" + kToken;
  Notify n(dir, BotConfig(dir, url));
  ASSERT_GT(n.port(), 0) << n.Stderr();
  ASSERT_EQ(n.Post(Payload("g", {{"c1", "firing"}}))->status, 200);
  EXPECT_TRUE(WaitFor([&] {
    return Metric(
               n.Metrics(),
               R"(anxin_notify_retried_messages_total{receiver="oncall",reason="unreachable"})") >=
           1;
  })) << n.Metrics();
  FakeBot bot(port);
  ASSERT_TRUE(bot.WaitFor(1, 20s)) << n.Stderr();
  EXPECT_THAT(bot.messages()[0].dump(), HasSubstr("**Device:** c1"));
}

TEST(NotifyCli, BadPayloadsGet4xxAndAreCounted) {
  TempDir dir;
  FakeBot bot;
  Notify n(dir, BotConfig(dir, bot.url(), "  max_payload_bytes: 64KiB\n"));
  ASSERT_GT(n.port(), 0) << n.Stderr();
  EXPECT_EQ(n.Post("{not json")->status, 400);
  EXPECT_EQ(n.Post(R"({"version":"3","status":"firing","alerts":[]})")->status, 400);
  EXPECT_EQ(n.Post(std::string(100, '[') + std::string(100, ']'))->status, 400);
  EXPECT_EQ(n.Post(Payload("g", {{"x", "firing"}}, std::string(100000, 'x')))->status, 413);
  auto huge = n.Post(std::string(1 << 20, ' '));
  ASSERT_TRUE(huge.has_value());
  EXPECT_EQ(huge->status, 413);
  const std::string m = n.Metrics();
  EXPECT_EQ(Metric(m, R"(anxin_notify_rejected_requests_total{reason="malformed"})"), 3);
  EXPECT_EQ(Metric(m, R"(anxin_notify_rejected_requests_total{reason="too_large"})"), 1);
  EXPECT_EQ(bot.calls(), 0);
}

TEST(NotifyCli, SecretsNeverPrinted) {
  TempDir dir;
  // A bot that rejects the signature: the error is logged, without secrets.
  FakeBot bot;
  const std::string cfg = dir.Write("anxin.yaml", R"(
notify:
  receivers:
    - name: oncall
      type: feishu
      url: http://127.0.0.1:)" + std::to_string(bot.port()) +
                                                      "/open-apis/bot/v2/hook/" + kToken + R"(
      secret_env: WRONG_SECRET
  default_receivers: [oncall]
)");
  SubprocessOptions o;
  {
    Notify n(dir, cfg, {"env", "WRONG_SECRET=not-the-right-secret-value"});
    ASSERT_GT(n.port(), 0) << n.Stderr();
    ASSERT_EQ(n.Post(Payload("g", {{"d1", "firing"}}))->status, 200);
    ASSERT_TRUE(WaitFor([&] { return bot.bad_signatures() > 0; }, 10s));
    // notify logs the bot's answer once it has read it.
    EXPECT_TRUE(WaitFor([&] { return n.Stderr().find("19021") != std::string::npos; }, 10s))
        << n.Stderr();
    EXPECT_EQ(n.Term(), 0);
    EXPECT_THAT(n.Stderr(), HasSubstr("19021"));
    EXPECT_THAT(n.Stderr(), Not(HasSubstr("not-the-right-secret-value")));
    EXPECT_THAT(n.Stderr(), Not(HasSubstr(kToken)));
    EXPECT_EQ(Metric(n.Metrics(), R"(anxin_notify_failed_messages_total{receiver="oncall"})"), -1);
  }
  // Configuration errors name the variable or file, never the value.
  const std::string inline_cfg = dir.Write("inline.yaml", R"(
notify:
  receivers: [{name: a, type: lark, url: "http://x/hook/t", secret: "inline-secret-value"}]
  default_receivers: [a]
)");
  auto out = RunAnxin({"--config", inline_cfg, "notify", "--spool", dir / "s2"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_THAT(out.stderr_text, HasSubstr("error: "));
  EXPECT_THAT(out.stderr_text, HasSubstr("secret_file"));
  EXPECT_THAT(out.stderr_text + out.stdout_text, Not(HasSubstr("inline-secret-value")));
}

// The demo's way: no configuration file, a JSON-lines file and a webhook
// the caller owns, fed with a payload written by notify::EncodeWebhook.
TEST(NotifyCli, LocalSinksWithoutAConfigurationFile) {
  TempDir dir;
  std::mutex mu;
  std::vector<json> hooked;
  HttpServer sink({.threads = 1});
  sink.Post("/alerts", [&](const HttpRequest& req) {
    std::lock_guard lock(mu);
    hooked.push_back(json::parse(req.body, nullptr, false));
    return HttpResponse::Text(200, "ok");
  });
  ASSERT_TRUE(sink.Start().has_value());
  const std::string file = dir / "alerts.jsonl";
  Notify n(dir, "", {}, "",
           {"--sink-file", file, "--sink-webhook",
            "http://127.0.0.1:" + std::to_string(sink.port()) + "/alerts"});
  ASSERT_GT(n.port(), 0) << n.Stderr();
  notify::Alert a{.status = "firing",
                  .labels = {{"alertname", "AnxinDeviceTemperatureHigh"},
                             {"node", "demo-node"},
                             {"device", "3"},
                             {"severity", "warning"}},
                  .annotations = {{"summary", "demo-node NPU 3 at 91 C"}},
                  .starts_at = 1796218130,
                  .fingerprint = "d3e4f5a6b7c80913"};
  auto r = n.Post(notify::EncodeWebhook(
      {.receiver = "demo", .status = "firing", .alerts = {a}, .group_key = "demo"}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(r->body, HasSubstr(R"("messages":2)"));
  auto delivered = [&] {
    std::lock_guard lock(mu);
    return !hooked.empty() && dir.Read("alerts.jsonl").find("\n") != std::string::npos;
  };
  ASSERT_TRUE(WaitFor(delivered, 20s)) << n.Stderr();
  json line = json::parse(dir.Read("alerts.jsonl"));
  EXPECT_EQ(line["receiver"], "file");
  EXPECT_EQ(line["alerts"][0]["node"], "demo-node");
  EXPECT_EQ(line["alerts"][0]["device"], "3");
  EXPECT_EQ(line["alerts"][0]["starts_at"], "2026-12-02T13:28:50Z");
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(hooked.size(), 1u) << n.Stderr();
    EXPECT_EQ(hooked[0]["receiver"], "webhook");
    EXPECT_EQ(hooked[0]["alerts"][0]["fingerprint"], "d3e4f5a6b7c80913");
  }
  EXPECT_EQ(n.Term(), 0);
  // Neither a section nor a sink; a sink URL without its scheme.
  auto none = RunAnxin({"notify", "--spool", dir / "s2"}, {.clear_env = true});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.stderr_text, HasSubstr("--sink-file/--sink-webhook"));
  auto bad = RunAnxin({"notify", "--spool", dir / "s3", "--sink-webhook", "127.0.0.1:1/x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("--sink-webhook: the URL must start with http://"));
}

// A webhook that records (group, fingerprint) pairs, slowly enough that kills
// land mid-delivery.
class FakeWebhook {
 public:
  FakeWebhook() : server_({.threads = 2}) {
    server_.Post("/hook", [this](const HttpRequest& req) {
      std::this_thread::sleep_for(std::chrono::milliseconds(dist_(rng_)));
      json j = json::parse(req.body);
      std::lock_guard lock(mu_);
      for (const auto& a : j["alerts"]) got_.emplace_back(j["group_key"], a["fingerprint"]);
      return HttpResponse::Text(200, "ok");
    });
    EXPECT_TRUE(server_.Start().has_value());
  }
  int port() const { return server_.port(); }
  std::vector<std::pair<std::string, std::string>> got() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  HttpServer server_;
  std::mutex mu_;
  std::mt19937 rng_{7};
  std::uniform_int_distribution<int> dist_{0, 15};
  std::vector<std::pair<std::string, std::string>> got_;
};

TEST(NotifyCli, SigkillMidDeliveryLosesNothingAndRepeatsAtMostOncePerKill) {
  TempDir dir;
  FakeWebhook hook;
  const std::string cfg = dir.Write("anxin.yaml", R"(
notify:
  receivers:
    - {name: hook, type: webhook, url: "http://127.0.0.1:)" +
                                                      std::to_string(hook.port()) + R"(/hook"}
  default_receivers: [hook]
  backoff_initial: 20ms
  backoff_max: 200ms
)");
  constexpr int kGroups = 3, kPerGroup = 40;
  std::mt19937 rng(2026);
  std::atomic<bool> done{false};
  std::vector<std::pair<std::string, std::string>> acked;  // in ack order
  std::mutex acked_mu;
  std::unique_ptr<Notify> n = std::make_unique<Notify>(dir, cfg);
  std::atomic<int> port{n->port()};
  // Posts one alert at a time per group, each until it is answered 200, the
  // way Alertmanager retries.
  std::thread poster([&] {
    for (int i = 0; i < kPerGroup; ++i) {
      for (int g = 0; g < kGroups; ++g) {
        const std::string group = "g" + std::to_string(g);
        const std::string fp = group + "a" + std::to_string(i);
        for (;;) {
          HttpClient c("127.0.0.1", port.load(), {.connect_timeout = 500ms, .timeout = 2000ms});
          auto r = c.Post("/webhook", Payload(group, {{fp, "firing"}}));
          if (r && r->status == 200) break;
          std::this_thread::sleep_for(20ms);
        }
        std::lock_guard lock(acked_mu);
        acked.emplace_back(group, fp);
      }
    }
    done = true;
  });
  int kills = 0;
  // Kills go on while alerts arrive and, at least five in all, while they
  // are still being delivered (posting alone can finish within a second).
  while ((!done || kills < 5) && kills < 25) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(30, 300)(rng)));
    n->Kill();
    ++kills;
    n = std::make_unique<Notify>(dir, cfg);
    ASSERT_GT(n->port(), 0) << n->Stderr();
    port = n->port();
  }
  poster.join();
  const size_t total = kGroups * kPerGroup;
  WaitFor(
      [&] {
        const auto got = hook.got();
        return std::set<std::pair<std::string, std::string>>(got.begin(), got.end()).size() >=
               total;
      },
      40s);  // what is missing then is reported below, by name
  const auto got = hook.got();
  std::map<std::pair<std::string, std::string>, int> count;
  for (const auto& x : got) ++count[x];
  for (const auto& a : acked) EXPECT_GE(count[a], 1) << "lost " << a.second;
  EXPECT_EQ(acked.size(), total);
  EXPECT_GE(kills, 3);
  const size_t repeats = got.size() - count.size();
  EXPECT_LE(repeats, static_cast<size_t>(kills)) << "repeats " << repeats << " kills " << kills;
  // Within a group the order of acceptance holds (a repeat may re-send the
  // one just before, never something older).
  std::map<std::string, int> last;
  for (const auto& [group, fp] : got) {
    const int i = std::stoi(fp.substr(fp.find('a') + 1));
    auto it = last.find(group);
    if (it != last.end()) {
      EXPECT_GE(i, it->second - 1) << group << " went back from " << it->second << " to " << i;
    }
    last[group] = std::max(i, it == last.end() ? i : it->second);
  }
  std::fprintf(stderr, "kills %d, messages %zu, repeats %zu\n", kills, got.size(), repeats);
}

TEST(NotifyCli, FullDiskAnswers503AndAcksOnlyWhatWasStored) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to mount a small tmpfs in a private mount namespace";
  if (RunCommand({"unshare", "-m", "true"}, {.timeout = 10s}).value_or(CommandOutput{}).exit_code !=
      0) {
    GTEST_SKIP() << "unshare -m does not work here (no CAP_SYS_ADMIN in this container)";
  }
  TempDir dir;
  const std::string spool = dir.Mkdir("tiny");
  const std::string cfg = dir.Write("anxin.yaml", R"(
notify:
  receivers:
    - {name: audit, type: file, path: )" + (dir / "audit.jsonl") +
                                                      R"(}
  default_receivers: [audit]
)");
  // A 256 KiB file system, visible to the child alone.
  Notify n(
      dir, cfg,
      {"unshare", "-m", "sh", "-c",
       "mount --make-rprivate / && mount -t tmpfs -o size=256k tmpfs " + spool + " && exec \"$@\"",
       "sh"},
      spool);
  ASSERT_GT(n.port(), 0) << n.Stderr();
  std::vector<std::string> acked;
  int refused = 0;
  for (int i = 0; i < 200 && refused < 3; ++i) {
    const std::string fp = "e" + std::to_string(i);
    auto r = n.Post(Payload("g", {{fp, "firing"}}, std::string(6000, 'd')));
    ASSERT_TRUE(r.has_value());
    if (r->status == 200) {
      acked.push_back(fp);
    } else {
      EXPECT_EQ(r->status, 503) << r->body;
      EXPECT_THAT(r->body, HasSubstr("disk is full"));
      ++refused;
    }
  }
  EXPECT_EQ(refused, 3) << "the 256 KiB spool never filled";
  EXPECT_GT(acked.size(), 3u);
  EXPECT_EQ(Metric(n.Metrics(), R"(anxin_notify_rejected_requests_total{reason="spool"})"), 3);
  // Everything acknowledged reaches the sink.
  std::string audit;
  WaitFor(
      [&] {
        audit = testing::ReadTextFile(dir / "audit.jsonl");
        return audit.find("\"" + acked.back() + "\"") != std::string::npos;
      },
      20s);  // what is missing then is reported below, by name
  for (const auto& fp : acked) EXPECT_THAT(audit, HasSubstr("\"fingerprint\":\"" + fp + "\""));
}

}  // namespace
}  // namespace anxin
