#include "anxin/notify/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace anxin::notify {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

Alert MakeAlert(int device, std::string severity = "critical", std::string status = "firing") {
  Alert a;
  a.status = std::move(status);
  a.labels = {{"alertname", "NpuOverTemp"},
              {"node", "gpu-07"},
              {"device", std::to_string(device)},
              {"severity", std::move(severity)}};
  a.annotations = {{"summary", "NPU " + std::to_string(device) + " at 91 C"},
                   {"description", "Above 85 C for 2 minutes."}};
  a.starts_at = 1796218130;
  if (!a.firing()) a.ends_at = 1796218130 + 600;
  a.generator_url = "http://prometheus:9090/graph?g0.expr=x";
  a.fingerprint = "f" + std::to_string(device);
  return a;
}

RenderOptions Options() {
  RenderOptions o;
  o.time_zone = TimeZone::Load("+08:00").value();
  o.dashboard_url = "http://grafana:3000/d/anxin";
  o.prometheus_url = "http://prometheus:9090";
  return o;
}

TEST(RenderBot, CardNamesNodeDeviceTimeAndLinks) {
  Rendered r = RenderBot({MakeAlert(3)}, Templates{}, true, Options());
  json j = json::parse(r.body);
  EXPECT_EQ(j["msg_type"], "interactive");
  EXPECT_EQ(j["card"]["header"]["template"], "red");
  EXPECT_EQ(j["card"]["header"]["title"]["content"], "[FIRING] NpuOverTemp");
  const std::string text = j["card"]["elements"][0]["text"]["content"];
  EXPECT_THAT(text, HasSubstr("**Node:** gpu-07"));
  EXPECT_THAT(text, HasSubstr("**Device:** 3"));
  EXPECT_THAT(text, HasSubstr("**Since:** 2026-12-02 21:28:50 +08:00"));
  EXPECT_THAT(text, HasSubstr("NPU 3 at 91 C"));
  EXPECT_THAT(text, HasSubstr("Above 85 C"));
  EXPECT_THAT(r.body, HasSubstr("http://grafana:3000/d/anxin"));
  EXPECT_THAT(r.body, HasSubstr("http://prometheus:9090"));
  json fb = json::parse(r.fallback);
  EXPECT_EQ(fb["msg_type"], "text");
  EXPECT_THAT(fb["content"]["text"].get<std::string>(), HasSubstr("Device: 3"));
}

TEST(RenderBot, HeaderColourFollowsSeverityAndResolved) {
  auto colour = [](std::vector<Alert> alerts) {
    return json::parse(
               RenderBot(alerts, Templates{}, true, Options()).body)["card"]["header"]["template"]
        .get<std::string>();
  };
  EXPECT_EQ(colour({MakeAlert(1, "warning")}), "orange");
  EXPECT_EQ(colour({MakeAlert(1, "info")}), "blue");
  EXPECT_EQ(colour({MakeAlert(1, "warning"), MakeAlert(2, "critical")}), "red");
  EXPECT_EQ(colour({MakeAlert(1, "critical", "resolved")}), "green");
  Rendered resolved =
      RenderBot({MakeAlert(1, "critical", "resolved")}, Templates{}, true, Options());
  EXPECT_THAT(resolved.body, HasSubstr("[RESOLVED]"));
  EXPECT_THAT(resolved.body, HasSubstr("**Resolved:** 2026-12-02 21:38:50 +08:00"));
}

TEST(RenderBot, FoldsWhatDoesNotFitIntoMore) {
  std::vector<Alert> many;
  for (int i = 0; i < 500; ++i) many.push_back(MakeAlert(i));
  for (bool card : {true, false}) {
    Rendered r = RenderBot(many, Templates{}, card, Options());
    EXPECT_LE(r.body.size(), 19u * 1024);
    EXPECT_LE(r.fallback.size(), 19u * 1024);
    EXPECT_GT(r.shown, 10u);
    EXPECT_EQ(r.shown + r.folded, 500u);
    EXPECT_THAT(r.body, HasSubstr("+" + std::to_string(r.folded) + " more alerts not shown"));
    EXPECT_THAT(r.body, HasSubstr("[FIRING x500]"));
  }
  // A single alert with huge annotations is clipped, never dropped.
  Alert huge = MakeAlert(1);
  huge.annotations["description"] = std::string(100000, 'x');
  Rendered one = RenderBot({huge}, Templates{}, true, Options());
  EXPECT_EQ(one.shown, 1u);
  EXPECT_LE(one.body.size(), 19u * 1024);
}

TEST(RenderBot, TemplatesOverrideTitleAndAlert) {
  Templates t;
  t.title = "{{severity}} on {{node}}";
  t.alert =
      "{{alertname}} dev={{device}} at {{starts_at}} ({{labels.severity}}) {{annotations.summary}}";
  Rendered r = RenderBot({MakeAlert(5)}, t, false, Options());
  const std::string text = json::parse(r.body)["content"]["text"];
  EXPECT_THAT(text, HasSubstr("critical on gpu-07"));
  EXPECT_THAT(
      text, HasSubstr("NpuOverTemp dev=5 at 2026-12-02 21:28:50 +08:00 (critical) NPU 5 at 91 C"));
  EXPECT_THAT(text, Not(HasSubstr("Since:")));
}

TEST(RenderJson, CarriesEverything) {
  Rendered r =
      RenderJson({MakeAlert(2), MakeAlert(4, "critical", "resolved")}, "audit", "g1", Options());
  json j = json::parse(r.body);
  EXPECT_EQ(j["receiver"], "audit");
  EXPECT_EQ(j["status"], "firing");
  EXPECT_EQ(j["group_key"], "g1");
  EXPECT_EQ(j["alerts"][0]["device"], "2");
  EXPECT_EQ(j["alerts"][0]["starts_at"], "2026-12-02T13:28:50Z");
  EXPECT_EQ(j["alerts"][0]["starts_at_local"], "2026-12-02 21:28:50 +08:00");
  EXPECT_EQ(j["alerts"][1]["ends_at"], "2026-12-02T13:38:50Z");
  EXPECT_EQ(j["alerts"][1]["labels"]["severity"], "critical");
}

}  // namespace
}  // namespace anxin::notify
