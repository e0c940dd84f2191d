// The agent's page over HTTP: the built-in files are the ones in web/ and
// web/node_modules, with their content types and security headers; unknown
// paths are 404; the history, jobs and events endpoints answer JSON that
// follows a sim scenario and the SDK telemetry fed to the agent, and refuse
// bad parameters.
#include "anxin/agent/page.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "anxin/agent/agent.h"
#include "anxin/agent/web_assets.h"
#include "anxin/base/testing.h"
#include "anxin/device/registry.h"

namespace anxin::agent {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Two NPUs; NPU 1 raises a minor error code 1 s in.
constexpr const char* kScenario = R"(name: page-test
description: two NPUs, NPU 1 raises an error code at 1 s
seed: 3
devices:
  count: 2
  model: Ascend910C
  ports: 2
  baseline:
    temperature: 50
    power: 300
    utilisation: 80
    hbm_used: 40GiB
events:
  - {at: 1s, device: 1, kind: error_raise, code: 80CB8009, severity: minor, text: page test}
)";

class PageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string scenario = dir_.Write("page-test.yaml", kScenario);
    auto backend = device::CreateBackend("sim", {.scenario = scenario});
    ASSERT_THAT(backend, IsOk());
    backend_ = std::move(*backend);
    AgentOptions o;
    o.node = "node-a";
    o.port = 0;
    o.interval = 100ms;
    auto agent = Agent::Create(*backend_, o);
    ASSERT_THAT(agent, IsOk());
    agent_ = std::move(*agent);
    ASSERT_THAT(agent_->Start(), IsOk());
    client_.emplace("127.0.0.1", agent_->port(), HttpClientOptions{.timeout = 5000ms});
  }

  HttpResponse Get(const std::string& path) {
    auto r = client_->Get(path);
    EXPECT_THAT(r, IsOk()) << path;
    return r ? *r : HttpResponse{.status = 0};
  }

  nlohmann::json GetJson(const std::string& path) {
    HttpResponse r = Get(path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json") << path;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  TempDir dir_;
  std::unique_ptr<device::DeviceBackend> backend_;
  std::unique_ptr<Agent> agent_;
  std::optional<HttpClient> client_;
};

std::string Source(const std::string& relative) {
  return ReadTextFile(std::string(ANXIN_SOURCE_DIR) + "/" + relative);
}

TEST_F(PageTest, ServesTheBuiltInFilesWithTheirTypes) {
  struct Expected {
    const char* path;
    const char* file;
    const char* type;
  };
  const Expected files[] = {
      {"/", "web/index.html", "text/html; charset=utf-8"},
      {"/app.js", "web/app.js", "text/javascript; charset=utf-8"},
      {"/style.css", "web/style.css", "text/css; charset=utf-8"},
      {"/vendor/uPlot.iife.min.js", "web/node_modules/uplot/dist/uPlot.iife.min.js",
       "text/javascript; charset=utf-8"},
      {"/vendor/uPlot.min.css", "web/node_modules/uplot/dist/uPlot.min.css",
       "text/css; charset=utf-8"},
      {"/vendor/uPlot.LICENSE", "web/node_modules/uplot/LICENSE", "text/plain; charset=utf-8"},
  };
  EXPECT_EQ(internal::WebAssets().size(), std::size(files));
  for (const Expected& f : files) {
    HttpResponse r = Get(f.path);
    EXPECT_EQ(r.status, 200) << f.path;
    EXPECT_EQ(r.content_type, f.type) << f.path;
    const std::string want = Source(f.file);
    ASSERT_FALSE(want.empty()) << f.file;
    EXPECT_TRUE(r.body == want) << f.path << " differs from " << f.file;
    EXPECT_THAT(r.Header("Content-Security-Policy").value_or(""),
                HasSubstr("script-src 'self'; style-src 'self'; connect-src 'self'"))
        << f.path;
    EXPECT_EQ(r.Header("X-Content-Type-Options"), "nosniff") << f.path;
  }
  EXPECT_THAT(Get("/vendor/uPlot.LICENSE").body, HasSubstr("MIT"));
}

TEST_F(PageTest, UnknownPathsAre404) {
  for (const char* path :
       {"/index.html", "/nope", "/vendor/", "/vendor/uPlot", "/appxjs", "/app.jsx", "/api/v1/"}) {
    EXPECT_EQ(Get(path).status, 404) << path;
  }
  // The agent's other endpoints are still there.
  EXPECT_EQ(Get("/metrics").status, 200);
}

TEST_F(PageTest, ThePageUsesRelativeUrlsOnly) {
  // Behind a reverse proxy under a path prefix, or an ssh tunnel, an
  // absolute path or another origin would miss the agent.
  const std::string html = Get("/").body;
  const std::regex attr(R"re((src|href)="([^"]*)")re");
  int urls = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attr); it != std::sregex_iterator();
       ++it) {
    const std::string url = (*it)[2];
    ++urls;
    EXPECT_FALSE(url.starts_with("/")) << url;
    EXPECT_EQ(url.find("://"), std::string::npos) << url;
  }
  EXPECT_GE(urls, 8);
  const std::string js = Get("/app.js").body;
  const std::regex fetched(R"re(getJSON\('([^']*)')re");
  int calls = 0;
  for (auto it = std::sregex_iterator(js.begin(), js.end(), fetched); it != std::sregex_iterator();
       ++it) {
    const std::string url = (*it)[1];
    ++calls;
    EXPECT_THAT(url, StartsWith("api/v1/"));
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(js.find("://"), std::string::npos);
}

TEST_F(PageTest, HistoryFollowsTheScenario) {
  nlohmann::json h;
  ASSERT_TRUE(WaitFor([&] {
    h = GetJson("/api/v1/history");
    return h["devices"].size() == 2 && h["devices"][0]["t"].size() >= 3;
  })) << h.dump();
  EXPECT_EQ(h["node"], "node-a");
  EXPECT_THAT(h["source"].get<std::string>(), HasSubstr("sim"));
  EXPECT_EQ(h["interval_seconds"], 0.1);
  EXPECT_EQ(h["window_seconds"], 600.0);
  EXPECT_EQ(h["points"], 3600);  // 10 min at 100 ms is past the cap
  const auto& d = h["devices"][1];
  EXPECT_EQ(d["label"], "NPU 1");
  EXPECT_EQ(d["model"], "Ascend910C");
  EXPECT_EQ(d["links"].size(), 2u);
  const size_t n = d["t"].size();
  for (const char* key :
       {"hbm_used_bytes", "temperature_celsius", "power_watts", "utilisation_percent"}) {
    EXPECT_EQ(d[key].size(), n) << key;
  }
  EXPECT_NEAR(d["temperature_celsius"][0].get<double>(), 50, 5);
  EXPECT_NEAR(d["hbm_used_bytes"][0].get<double>() / (1ull << 30), 40, 1);

  // since: only newer points.
  const double last = d["t"][n - 1];
  auto newer = GetJson("/api/v1/history?since=" + nlohmann::json(last).dump());
  for (double t : newer["devices"][1]["t"]) EXPECT_GT(t, last);

  // The error code raised 1 s in, once: the sim pushes it as a fault event
  // and the samples show it too.
  nlohmann::json e;
  ASSERT_TRUE(WaitFor([&] {
    e = GetJson("/api/v1/events");
    for (const auto& ev : e["events"])
      if (ev["kind"] == "error_raised") return true;
    return false;
  })) << e.dump();
  int raised = 0;
  for (const auto& ev : e["events"]) {
    if (ev["kind"] != "error_raised") continue;
    ++raised;
    EXPECT_EQ(ev["device"], 1);
    EXPECT_EQ(ev["label"], "NPU 1");
    EXPECT_THAT(ev["time"].get<std::string>(), HasSubstr("T"));
  }
  EXPECT_EQ(raised, 1);
  // A few more passes must not repeat it.
  const size_t passes = GetJson("/api/v1/history")["devices"][1]["t"].size();
  ASSERT_TRUE(
      WaitFor([&] { return GetJson("/api/v1/history")["devices"][1]["t"].size() >= passes + 3; }));
  raised = 0;
  const nlohmann::json later = GetJson("/api/v1/events");
  for (const auto& ev : later["events"]) raised += ev["kind"] == "error_raised";
  EXPECT_EQ(raised, 1);
  const uint64_t next = e["next"];
  EXPECT_GE(next, 1u);
  EXPECT_EQ(GetJson("/api/v1/events?after=" + std::to_string(next + 100))["events"].size(), 0u);
}

TEST_F(PageTest, JobsShowWhatTheSdkReported) {
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"], nlohmann::json::array());
  monitor::SdkDatagram d;
  d.sender.job = "llm-7b";
  d.sender.rank = 3;
  d.sender.world_size = 8;
  d.events.push_back(
      {.time_ns = 1, .body = monitor::SdkStepEnd{.step = 41, .duration_ns = 250'000'000}});
  d.events.push_back({.time_ns = 2,
                      .body = monitor::SdkCollective{.op = monitor::SdkCollectiveOp::kAllReduce,
                                                     .bytes = 1ull << 30,
                                                     .duration_ns = 10'000'000}});
  d.events.push_back(
      {.time_ns = 3, .body = monitor::SdkKernel{.duration_ns = 1'000'000, .name = "gemm"}});
  d.events.push_back(
      {.time_ns = 4, .body = monitor::SdkKernel{.duration_ns = 3'000'000, .name = "gemm"}});
  agent_->jobs().Consume(d);
  nlohmann::json j;
  ASSERT_TRUE(WaitFor([&] {
    j = GetJson("/api/v1/jobs");
    return j["jobs"].size() == 1 && j["jobs"][0]["t"].size() >= 2;
  })) << j.dump();
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["job"], "llm-7b");
  EXPECT_EQ(job["ranks"], 1);
  EXPECT_EQ(job["world_size"], 8);
  EXPECT_EQ(job["last_step"], 41);
  EXPECT_EQ(job["step_seconds"][0], 0.25);
  // nccl-tests' all_reduce factor over 8 ranks: 2 * 7 / 8.
  const double busbw = (1ull << 30) / 0.01 * 2 * 7 / 8;
  EXPECT_NEAR(job["busbw_bytes_per_second"]["all_reduce"][0].get<double>(), busbw, busbw * 1e-5);
  EXPECT_EQ(job["kernel_jitter_ratio"]["gemm"][0], 3.0);
}

TEST_F(PageTest, BadParametersAre400) {
  for (const char* path : {"/api/v1/history?since=yesterday", "/api/v1/history?since=-1",
                           "/api/v1/jobs?since=1e999", "/api/v1/history?since=nan"}) {
    HttpResponse r = Get(path);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_THAT(r.body, HasSubstr("since: expected unix seconds like 1764694650.5, got '")) << path;
  }
  HttpResponse r = Get("/api/v1/events?after=12x");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body,
            "{\"error\":\"after: expected an event's seq, a whole number like 12, got "
            "'12x'\"}\n");
}

}  // namespace
}  // namespace anxin::agent
