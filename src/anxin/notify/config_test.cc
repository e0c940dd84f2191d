#include "anxin/notify/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin::notify {
namespace {

using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

EnvironmentLookup Env(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Result<NotifyConfig> Parse(const std::string& yaml, EnvironmentLookup env = Env({})) {
  auto node = ConfigNode::Parse(yaml, "notify.yaml");
  if (!node) return std::unexpected(node.error());
  return ParseNotifyConfig(*node, env);
}

TEST(NotifyConfig, RoutesByMatchersWithContinueAndDefault) {
  TempDir dir;
  const std::string secret = dir.Write("s", "s3cr3t-value\n");
  auto c = Parse(R"(
receivers:
  - {name: oncall, type: feishu, url: "https://open.feishu.cn/open-apis/bot/v2/hook/tok-123456", secret_file: )" +
                     secret + R"(}
  - {name: infra, type: lark, url_env: HOOK, secret_env: SECRET, format: text}
  - {name: audit, type: file, path: /tmp/a.jsonl}
routes:
  - matchers: ['severity="critical"']
    receivers: [oncall]
    continue: true
  - matchers: ['node=~"gpu-.*"', 'alertname!="Watchdog"']
    receivers: [infra]
default_receivers: [audit]
time_zone: Asia/Shanghai
)",
                 Env({{"HOOK", "https://open.larksuite.com/open-apis/bot/v2/hook/lark-abcdef"},
                      {"SECRET", "env-secret-1"}}));
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->receivers[0].secret, "s3cr3t-value");
  EXPECT_EQ(c->receivers[1].secret, "env-secret-1");
  EXPECT_FALSE(c->receivers[1].card);
  auto names = [&](LabelSet labels) {
    std::string out;
    for (size_t i : c->Route(labels)) out += c->receivers[i].name + ",";
    return out;
  };
  EXPECT_EQ(names({{"severity", "critical"}, {"node", "gpu-1"}, {"alertname", "Hot"}}),
            "oncall,infra,");
  EXPECT_EQ(names({{"severity", "warning"}, {"node", "gpu-1"}, {"alertname", "Hot"}}), "infra,");
  EXPECT_EQ(names({{"severity", "warning"}, {"node", "gpu-1"}, {"alertname", "Watchdog"}}),
            "audit,");
  EXPECT_EQ(names({{"node", "cpu-1"}}), "audit,");
  // Secrets and bot tokens are redacted from anything printed.
  const std::string leak =
      "POST https://open.feishu.cn/open-apis/bot/v2/hook/tok-123456 s3cr3t-value env-secret-1 "
      "lark-abcdef";
  const std::string clean = c->Redact(leak);
  EXPECT_THAT(clean, Not(HasSubstr("tok-123456")));
  EXPECT_THAT(clean, Not(HasSubstr("s3cr3t-value")));
  EXPECT_THAT(clean, Not(HasSubstr("env-secret-1")));
  EXPECT_THAT(clean, Not(HasSubstr("lark-abcdef")));
}

TEST(NotifyConfig, ErrorsNamePlacesNeverSecrets) {
  auto err = [](const std::string& yaml, EnvironmentLookup env = Env({})) {
    auto c = Parse(yaml, env);
    EXPECT_FALSE(c.has_value()) << yaml;
    return c ? std::string() : c.error().message();
  };
  const std::string inline_secret = err(R"(
receivers: [{name: a, type: feishu, url: "https://x/hook/t", secret: "hunter2-secret"}]
default_receivers: [a])");
  EXPECT_THAT(inline_secret, HasSubstr("secret_file"));
  EXPECT_THAT(inline_secret, Not(HasSubstr("hunter2-secret")));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: feishu, url: "https://x/hook/t", secret_env: NOPE}]
default_receivers: [a])"),
              HasSubstr("environment variable NOPE is not set"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: feishu, url: "https://x/hook/t", secret_file: /nonexistent/s}]
default_receivers: [a])"),
              HasSubstr("cannot read /nonexistent/s"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: pager, url: "https://x"}]
default_receivers: [a])"),
              HasSubstr("unknown receiver type 'pager'"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: file, path: /nonexistent-anxin-dir/alerts.jsonl}]
routes: [{matchers: ['node=~"("'], receivers: [a]}])"),
              HasSubstr("bad regular expression"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: file, path: /nonexistent-anxin-dir/alerts.jsonl}]
routes: [{matchers: ['node="x"'], receivers: [b]}])"),
              HasSubstr("no receiver named 'b'"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: file, path: /nonexistent-anxin-dir/alerts.jsonl}])"),
              HasSubstr("nothing would be delivered"));
  EXPECT_THAT(err(R"(
receivers: [{name: a, type: webhook, url: "ftp://x"}]
default_receivers: [a])"),
              HasSubstr("http:// or https://"));
}

TEST(LocalSinkConfig, FileAndWebhookForEveryAlert) {
  auto both = LocalSinkConfig({.file = "/tmp/a.jsonl", .webhook = "http://127.0.0.1:8080/alerts"});
  ASSERT_TRUE(both.has_value()) << both.error().message();
  ASSERT_EQ(both->receivers.size(), 2u);
  EXPECT_EQ(both->receivers[0].type, ReceiverType::kFile);
  EXPECT_EQ(both->receivers[0].path, "/tmp/a.jsonl");
  EXPECT_EQ(both->receivers[1].type, ReceiverType::kWebhook);
  EXPECT_EQ(both->receivers[1].url, "http://127.0.0.1:8080/alerts");
  EXPECT_EQ(both->Route({{"alertname", "X"}, {"severity", "critical"}}),
            (std::vector<size_t>{0, 1}));
  auto file = LocalSinkConfig({.file = "/tmp/a.jsonl"});
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->Route({}), std::vector<size_t>{0});
  auto none = LocalSinkConfig({});
  ASSERT_FALSE(none.has_value());
  EXPECT_THAT(none.error().message(), HasSubstr("--sink-file"));
  auto bad = LocalSinkConfig({.webhook = "127.0.0.1:8080"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message(), HasSubstr("must start with http://"));
}

TEST(Matcher, Operators) {
  LabelSet l = {{"node", "gpu-07"}, {"severity", "critical"}};
  EXPECT_TRUE(ParseMatcher(R"(node="gpu-07")")->Matches(l));
  EXPECT_FALSE(ParseMatcher(R"(node!="gpu-07")")->Matches(l));
  EXPECT_TRUE(ParseMatcher(R"(node=~"gpu-0[0-9]")")->Matches(l));
  EXPECT_FALSE(ParseMatcher(R"(node=~"gpu")")->Matches(l));  // anchored
  EXPECT_TRUE(ParseMatcher(R"(rack!~".+")")->Matches(l));    // absent reads as ""
  EXPECT_FALSE(ParseMatcher("=x").has_value());
  EXPECT_FALSE(ParseMatcher("node").has_value());
}

}  // namespace
}  // namespace anxin::notify
