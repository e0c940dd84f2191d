// `anxin bench serve` end to end: the built program against a scripted server
// on 127.0.0.1, checking its JSON, CSV, SVG, sweep and exit statuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "anxin/base/testing.h"
#include "anxin/loadgen/scripted_server_testing.h"

namespace anxin::loadgen {
namespace {

using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using testing::Script;
using testing::ScriptedRequest;
using testing::ScriptedServer;
using testing::SseScript;

TEST(BenchServeCli, JsonCsvAndSvgOfOneRun) {
  ScriptedServer server([](const ScriptedRequest&) {
    return SseScript({"a", "b", "c", "d"}, 30, 5, 11);
  });
  TempDir dir;
  auto out = RunAnxin({"--json",
                       "bench",
                       "serve",
                       "--url",
                       server.url(),
                       "--model",
                       "m",
                       "-c",
                       "2",
                       "-n",
                       "6",
                       "--output-tokens",
                       "4",
                       "--slo",
                       "ttft=10s,tpot=5s",
                       "--csv",
                       dir / "r.csv",
                       "--svg",
                       dir / "c.svg",
                       "--no-progress"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  auto j = nlohmann::json::parse(out.stdout_text);
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["output_tokens"], 24);
  EXPECT_EQ(j["input_tokens"], 66);
  EXPECT_EQ(j["output_token_source"], "usage");
  EXPECT_GE(j["ttft_ms"]["p50"].get<double>(), 30);
  EXPECT_EQ(j["slo"]["good"], 6);
  EXPECT_EQ(j["arrivals"], "concurrency 2");
  EXPECT_EQ(j["load_tester"]["peak_open_streams"], 2);
  std::string csv = dir.Read("r.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_THAT(dir.Read("c.svg"), HasSubstr("</svg>"));
  EXPECT_EQ(server.requests(), 6);
  auto body = nlohmann::json::parse(server.seen()[0].body);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["max_tokens"], 4);
}

TEST(BenchServeCli, SweepNamesTheBestConcurrency) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"a", "b"}, 20, 1, 1); });
  TempDir dir;
  auto out =
      RunAnxin({"bench", "serve", "--url", server.url(), "-n", "8", "--sweep", "concurrency=1,4",
                "--slo", "ttft=10s", "--no-progress", "--svg", dir / "sweep.svg"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  // Without waiting, 4 streams at once give more goodput than 1.
  EXPECT_THAT(out.stdout_text, HasSubstr("best concurrency: 4"));
  EXPECT_THAT(out.stdout_text, HasSubstr("TTFT p50"));
  EXPECT_EQ(server.requests(), 16);
  EXPECT_THAT(dir.Read("sweep.svg"), HasSubstr("best concurrency = 4"));
}

TEST(BenchServeCli, MissedSlosExitOne) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"a", "b"}, 150, 1, 1); });
  auto out = RunAnxin(
      {"bench", "serve", "--url", server.url(), "-n", "3", "--slo", "ttft=50ms", "--no-progress"});
  EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("goodput         0.00 req/s"));
  auto sweep = RunAnxin({"bench", "serve", "--url", server.url(), "-n", "2", "--sweep",
                         "concurrency=1,2", "--slo", "ttft=50ms", "--no-progress"});
  EXPECT_EQ(sweep.exit_code, 1);
  EXPECT_THAT(sweep.stdout_text, HasSubstr("no concurrency meets ttft=50ms"));
}

TEST(BenchServeCli, ErrorsAreCountedAndShown) {
  ScriptedServer server([](const ScriptedRequest& req) {
    Script s;
    if (req.body.find("\"max_tokens\":1,") != std::string::npos ||
        req.body.find("\"max_tokens\":1}") != std::string::npos) {
      s.steps.push_back({0, testing::JsonResponse(500, R"({"error":{"message":"boom"}})")});
      return s;
    }
    return SseScript({"a"}, 0, 0, 1);
  });
  TempDir dir;
  std::string data = dir.Write("d.jsonl",
                               "{\"prompt\":\"p1\",\"output_tokens\":1}\n"
                               "{\"prompt\":\"p2\",\"output_tokens\":2}\n");
  auto out = RunAnxin(
      {"bench", "serve", "--url", server.url(), "--dataset", data, "-n", "4", "--no-progress"});
  EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text, HasSubstr("2 completed, 2 failed, of 4"));
  EXPECT_THAT(out.stdout_text, HasSubstr("errors          http_500 2"));
}

TEST(BenchServeCli, BadInputAndDeadServers) {
  auto dead = RunAnxin({"bench", "serve", "--url", "http://127.0.0.1:1", "--no-progress"});
  EXPECT_EQ(dead.exit_code, 3);
  EXPECT_THAT(dead.stderr_text, HasSubstr("error: cannot connect to 127.0.0.1:1"));
  auto bad_slo = RunAnxin({"bench", "serve", "--slo", "ttft=soon"});
  EXPECT_EQ(bad_slo.exit_code, 2);
  EXPECT_THAT(bad_slo.stderr_text, HasSubstr("--slo"));
  auto bad_api = RunAnxin({"bench", "serve", "--api", "grpc"});
  EXPECT_EQ(bad_api.exit_code, 2);
  auto no_rate = RunAnxin({"bench", "serve", "--arrival", "gamma"});
  EXPECT_EQ(no_rate.exit_code, 2);
  EXPECT_THAT(no_rate.stderr_text, HasSubstr("give --rate too"));
  auto bad_sweep = RunAnxin({"bench", "serve", "--sweep", "batch=1,2"});
  EXPECT_EQ(bad_sweep.exit_code, 2);
  TempDir dir;
  std::string data = dir.Write("d.jsonl", "{\"prompt\":\"ok\"}\nnot json\n");
  auto bad_data = RunAnxin({"bench", "serve", "--dataset", data});
  EXPECT_EQ(bad_data.exit_code, 2);
  EXPECT_THAT(bad_data.stderr_text, HasSubstr("d.jsonl:2"));
  auto https = RunAnxin({"bench", "serve", "--url", "https://x"});
  EXPECT_NE(https.exit_code, 0);
  EXPECT_THAT(https.stderr_text, HasSubstr("https is not supported"));
  auto help = RunAnxin({"bench", "serve", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.stdout_text, HasSubstr("--sweep"));
}

}  // namespace
}  // namespace anxin::loadgen
