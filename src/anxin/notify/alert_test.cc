#include "anxin/notify/alert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/notify/time_zone.h"

namespace anxin::notify {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::ReadTextFile;
using ::testing::HasSubstr;

TEST(ParseWebhook, ReadsAlertmanagerVersion4) {
  auto n = ParseWebhook(ReadTextFile(FixturePath("notify/webhook_corpus/firing.json")));
  ASSERT_TRUE(n.has_value()) << n.error().message();
  EXPECT_EQ(n->status, "firing");
  EXPECT_EQ(n->receiver, "anxin");
  ASSERT_EQ(n->alerts.size(), 1u);
  const Alert& a = n->alerts[0];
  EXPECT_EQ(a.Label("node"), "gpu-07");
  EXPECT_EQ(a.Annotation("summary"), "NPU 3 on gpu-07 at 91 C");
  EXPECT_EQ(a.starts_at, 1796218130);  // 2026-12-02T13:28:50Z, fraction dropped
  EXPECT_EQ(a.ends_at, 0);             // Go's zero time
  EXPECT_EQ(a.fingerprint, "8a9c1f0e2b3d4c5e");
  auto r = ParseWebhook(ReadTextFile(FixturePath("notify/webhook_corpus/resolved.json")));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->alerts[0].ends_at, 1796218130 + 11 * 60 + 10 - 8 * 3600);  // 13:40 at +08:00
}

TEST(ParseWebhook, RejectsWhatIsNotThePayloadNamingTheField) {
  auto bad = [](std::string_view body, ParseLimits limits = {}) {
    auto n = ParseWebhook(body, limits);
    EXPECT_FALSE(n.has_value()) << body;
    return n ? std::string() : n.error().message();
  };
  const std::string alert =
      R"({"status":"firing","labels":{"a":"b"},"startsAt":"2026-12-02T13:28:50Z","fingerprint":"ab"})";
  auto with = [&](std::string a, std::string version = "4") {
    return R"({"version":")" + version + R"(","status":"firing","alerts":[)" + a + "]}";
  };
  EXPECT_TRUE(ParseWebhook(with(alert)).has_value());
  EXPECT_THAT(bad("not json"), HasSubstr("not JSON"));
  EXPECT_THAT(bad("[]"), HasSubstr("expected an object"));
  EXPECT_THAT(bad(with(alert, "3")), HasSubstr("version"));
  EXPECT_THAT(bad(R"({"version":"4","status":"firing","alerts":[]})"), HasSubstr("empty"));
  EXPECT_THAT(
      bad(with(
          R"({"status":"firing","labels":{"a":7},"startsAt":"2026-12-02T13:28:50Z","fingerprint":"ab"})")),
      HasSubstr("alerts[0].labels.a: expected a string, got 7"));
  EXPECT_THAT(
      bad(with(
          R"({"status":"on fire","labels":{"a":"b"},"startsAt":"2026-12-02T13:28:50Z","fingerprint":"ab"})")),
      HasSubstr("alerts[0].status"));
  EXPECT_THAT(
      bad(with(
          R"({"status":"firing","labels":{"a":"b"},"startsAt":"yesterday","fingerprint":"ab"})")),
      HasSubstr("alerts[0].startsAt"));
  EXPECT_THAT(
      bad(with(R"({"status":"firing","labels":{"a":"b"},"startsAt":"2026-12-02T13:28:50Z"})")),
      HasSubstr("fingerprint: missing"));
  EXPECT_THAT(
      bad(with(
          R"({"status":"firing","labels":{"a":"b"},"startsAt":"2026-12-02T13:28:50Z","fingerprint":"a/../b"})")),
      HasSubstr("letters and digits"));
  EXPECT_THAT(bad(R"({"version":"4","alerts":[[[[[[[[1]]]]]]]]})"), HasSubstr("deeper"));
  ParseLimits small;
  small.max_bytes = 100;
  EXPECT_THAT(bad(with(alert), small), HasSubstr("over the limit of 100"));
  small = {};
  small.max_alerts = 1;
  EXPECT_THAT(bad(with(alert + "," + alert), small), HasSubstr("2 alerts, over the limit of 1"));
  small = {};
  small.max_string_bytes = 7;
  EXPECT_THAT(
      bad(with(
              R"({"status":"firing","labels":{"a":"bbbbbbbb"},"startsAt":"2026-12-02T13:28:50Z","fingerprint":"ab"})"),
          small),
      HasSubstr("alerts[0].labels.a: 8 bytes"));
}

TEST(ParseRfc3339, Forms) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z").value(), 0);
  EXPECT_EQ(ParseRfc3339("2026-12-02T21:28:50+08:00").value(), 1796218130);
  EXPECT_EQ(ParseRfc3339("2026-12-02T13:28:50.5Z").value(), 1796218130);
  EXPECT_FALSE(ParseRfc3339("2026-12-02 13:28:50").has_value());  // no zone
  EXPECT_FALSE(ParseRfc3339("2026-13-02T13:28:50Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-12-02T13:28:50Zjunk").has_value());
}

TEST(TimeZone, NamedOffsetAndUtc) {
  auto sh = TimeZone::Load("Asia/Shanghai");
  if (!sh) GTEST_SKIP() << "no zoneinfo on this machine: " << sh.error().message();
  EXPECT_EQ(sh->Format(1796218130), "2026-12-02 21:28:50 CST");
  auto berlin = TimeZone::Load("Europe/Berlin");
  ASSERT_TRUE(berlin.has_value());
  EXPECT_EQ(berlin->Format(1796218130), "2026-12-02 14:28:50 CET");
  EXPECT_EQ(berlin->Format(1782912530), "2026-07-01 15:28:50 CEST");  // summer time
  EXPECT_EQ(TimeZone().Format(1796218130), "2026-12-02 13:28:50 UTC");
  EXPECT_EQ(TimeZone::Load("+05:30")->Format(1796218130), "2026-12-02 18:58:50 +05:30");
  EXPECT_EQ(TimeZone::Load("Nowhere/Atlantis").error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(TimeZone::Load("../../etc/passwd").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(TimeZone::FromTzif("x", "TZif2 but short").error().code(), ErrorCode::kDataLoss);
}

TEST(EncodeWebhook, IsReadBackAsTheSameNotification) {
  Alert firing{.status = "firing",
               .labels = {{"alertname", "NpuHot"}, {"node", "n1"}, {"device", "3"}},
               .annotations = {{"summary", "NPU 3 at 91 C \"hot\"\n"}},
               .starts_at = 1796218130,
               .generator_url = "http://prometheus:9090/graph",
               .fingerprint = "0a1b2c3d"};
  Alert resolved = firing;
  resolved.status = "resolved";
  resolved.ends_at = 1796218130 + 600;
  resolved.fingerprint = "0a1b2c3e";
  const Notification n{.receiver = "demo",
                       .status = "firing",
                       .alerts = {firing, resolved},
                       .group_labels = {{"alertname", "NpuHot"}},
                       .common_labels = {{"node", "n1"}},
                       .external_url = "http://alertmanager:9093",
                       .group_key = "{}:{alertname=\"NpuHot\"}",
                       .truncated_alerts = 2};
  const std::string body = EncodeWebhook(n);
  EXPECT_THAT(body, HasSubstr(R"("startsAt":"2026-12-02T13:28:50Z")"));
  EXPECT_THAT(body, HasSubstr(R"("endsAt":"0001-01-01T00:00:00Z")"));
  auto back = ParseWebhook(body);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back->receiver, n.receiver);
  EXPECT_EQ(back->status, n.status);
  EXPECT_EQ(back->group_key, n.group_key);
  EXPECT_EQ(back->group_labels, n.group_labels);
  EXPECT_EQ(back->common_labels, n.common_labels);
  EXPECT_EQ(back->external_url, n.external_url);
  EXPECT_EQ(back->truncated_alerts, 2);
  ASSERT_EQ(back->alerts.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Alert& a = back->alerts[i];
    const Alert& b = n.alerts[i];
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.annotations, b.annotations);
    EXPECT_EQ(a.starts_at, b.starts_at);
    EXPECT_EQ(a.ends_at, b.ends_at);
    EXPECT_EQ(a.generator_url, b.generator_url);
    EXPECT_EQ(a.fingerprint, b.fingerprint);
  }
}

}  // namespace
}  // namespace anxin::notify
