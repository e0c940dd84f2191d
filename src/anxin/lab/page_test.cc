#include "anxin/lab/page.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace anxin::lab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LabPageTest, ShowsNodesAlertsFaultsAndCardsEscaped) {
  const nlohmann::json status = {{"dir", "/tmp/lab"},
                                 {"generation", 2},
                                 {"faults_injected", 1},
                                 {"faults_total", 3},
                                 {"nodes",
                                  {{{"name", "node-0"},
                                    {"state", "stepping"},
                                    {"step", 120},
                                    {"generation", 2},
                                    {"agent_port", 41000}}}},
                                 {"alerts",
                                  {{{"alertname", "AnxinLinkDown"},
                                    {"node", "node-0"},
                                    {"device", "0"},
                                    {"state", "firing"}}}},
                                 {"links", {{"Prometheus", "http://127.0.0.1:9090/alerts"}}}};
  const nlohmann::json report = {
      {"rows",
       {{{"fault", 0},
         {"description", "node-0 NPU 0 port 0 link down for 40 s"},
         {"alert", "AnxinLinkDown"},
         {"prometheus", true},
         {"recovery_expected", true},
         {"resolve_expected", true},
         {"done", false},
         {"seconds", {{"firing", 33.5}, {"card", nullptr}}}}}},
      {"cards", {{{"status", "firing"}, {"time", 1.0}, {"text", "FIRING <b>x</b> Node: node-0"}}}}};
  const std::string html = RenderLabPage(status, report);
  EXPECT_THAT(html, HasSubstr("node-0"));
  EXPECT_THAT(html, HasSubstr("step 120"));
  EXPECT_THAT(html, HasSubstr("AnxinLinkDown"));
  EXPECT_THAT(html, HasSubstr("+33.5 s"));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;x&lt;/b&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<b>x</b>")));
  EXPECT_THAT(html, HasSubstr("http://127.0.0.1:9090/alerts"));
}

}  // namespace
}  // namespace anxin::lab
