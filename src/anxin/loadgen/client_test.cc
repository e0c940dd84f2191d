// The load tester against a scripted server on 127.0.0.1: tokens delayed on
// a known schedule, streams broken on purpose. Timings are checked by what
// the schedule guarantees (a token sent after 100 ms cannot arrive sooner),
// counts and error kinds exactly.
#include "anxin/loadgen/client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <stop_token>
#include <thread>

#include "anxin/base/testing.h"
#include "anxin/loadgen/bench.h"
#include "anxin/loadgen/scripted_server_testing.h"

namespace anxin::loadgen {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using testing::CompletionChunk;
using ::testing::HasSubstr;
using testing::HttpChunk;
using testing::Script;
using testing::ScriptedRequest;
using testing::ScriptedServer;
using testing::SseHead;
using testing::SseScript;

constexpr int64_t kMs = 1000000;

std::vector<Prompt> Prompts(int n, const std::string& prefix = "case") {
  std::vector<Prompt> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        {.text = prefix + ":" + std::to_string(i), .input_tokens = 3, .output_tokens = 5});
  }
  return out;
}

LoadOptions Options(const ScriptedServer& server, int64_t concurrency) {
  LoadOptions o;
  o.target = *ParseUrl(server.url());
  o.request.model = "m";
  o.arrivals.kind = ArrivalSpec::kConcurrency;
  o.arrivals.concurrency = concurrency;
  o.timeout_s = 20;
  return o;
}

// Every request gets its head and one token, then nothing.
Script OneTokenThenHang(const ScriptedRequest&) {
  Script s;
  s.steps.push_back({0, SseHead() + HttpChunk(CompletionChunk("x"))});
  s.end = Script::End::kHang;
  return s;
}

// Four streams, a 60 s deadline no test waits for, and `stop` to end them.
LoadOptions StoppableOptions(const ScriptedServer& server, const std::stop_source& stop) {
  LoadOptions o = Options(server, 4);
  o.timeout_s = 60;
  o.stop = stop.get_token();
  return o;
}

// Which case a request is: the N in the prompt "case:N".
int CaseOf(const ScriptedRequest& req) {
  size_t at = req.body.find("case:");
  return at == std::string::npos ? -1 : std::atoi(req.body.c_str() + at + 5);
}

TEST(Client, StreamedMetricsFollowTheSchedule) {
  ScriptedServer server([](const ScriptedRequest&) {
    return SseScript({"a", "b", "c", "d", "e"}, /*first_ms=*/100, /*gap_ms=*/20,
                     /*usage_prompt_tokens=*/7);
  });
  auto run = RunLoad(Prompts(3), Options(server, 1));
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->records.size(), 3u);
  int64_t previous_end = 0;
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.ok()) << r.error << ": " << r.error_detail;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_EQ(r.input_tokens, 7);
    EXPECT_EQ(r.output_source, TokenSource::kUsage);
    EXPECT_EQ(r.chunk_ns.size(), 5u);
    // Closed loop: due when the one before ended, sent at once.
    EXPECT_GE(r.due_ns, previous_end);
    EXPECT_EQ(r.sent_ns, r.due_ns);
    EXPECT_GE(r.ttft_s(), 0.100);
    EXPECT_GE(r.e2e_s(), 0.180);
    EXPECT_LT(r.e2e_s(), 10.0);
    EXPECT_DOUBLE_EQ(r.tpot_s(), (r.e2e_s() - r.ttft_s()) / 4);
    EXPECT_TRUE(std::is_sorted(r.chunk_ns.begin(), r.chunk_ns.end()));
    previous_end = r.end_ns;
  }
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.output_tokens, 15);
  EXPECT_EQ(s.itl.count, 12);
  EXPECT_GE(run->duration_s, 3 * 0.180);
  // One kept-alive connection carried all three.
  EXPECT_EQ(run->loop.connections, 1);
  EXPECT_EQ(server.connections(), 1);
  auto body = nlohmann::json::parse(server.seen()[0].body);
  EXPECT_EQ(body["max_tokens"], 5);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(server.seen()[0].path, "/v1/completions");
}

TEST(Client, BrokenResponsesAreCountedByKind) {
  ScriptedServer server([](const ScriptedRequest& req) {
    Script s;
    switch (CaseOf(req)) {
      case 0:  // 5xx with an OpenAI error body
        s.steps.push_back(
            {0, testing::JsonResponse(503, R"({"object":"error","message":"overloaded"})")});
        break;
      case 1:  // the stream drops after two tokens
        s = SseScript({"a", "b", "c"}, 10, 10);
        s.steps.resize(3);
        s.end = Script::End::kClose;
        break;
      case 2:  // an event that is not JSON
        s.steps.push_back({0, SseHead() + HttpChunk("data: {\"choices\": [\n\n")});
        s.end = Script::End::kHang;
        break;
      case 3:  // one token, then nothing: the client's deadline ends it
        s.steps.push_back({0, SseHead() + HttpChunk(CompletionChunk("x"))});
        s.end = Script::End::kHang;
        break;
      case 4:  // not HTTP at all
        s.steps.push_back({0, "HELLO THERE\r\n\r\n"});
        s.end = Script::End::kClose;
        break;
      case 5:  // a clean end of the body without data: [DONE]
        s.steps.push_back({0, SseHead() + HttpChunk(CompletionChunk("x")) + "0\r\n\r\n"});
        break;
      case 6:  // an error event inside the stream
        s.steps.push_back(
            {0, SseHead() + HttpChunk(CompletionChunk("x")) +
                    HttpChunk("data: {\"error\":{\"message\":\"kv cache full\"}}\n\n") +
                    HttpChunk("data: [DONE]\n\n") + "0\r\n\r\n"});
        break;
      case 7:  // closed before any response
        s.end = Script::End::kClose;
        break;
      default:
        s = SseScript({"ok", "ok"}, 0, 0, 3);
    }
    return s;
  });
  LoadOptions o = Options(server, 3);
  o.timeout_s = 0.5;
  auto run = RunLoad(Prompts(10), o);
  ASSERT_THAT(run, IsOk());
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_EQ(s.requests, 10);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 8);
  std::map<std::string, int64_t> want = {
      {"http_503", 1},       {"dropped", 2},    {"malformed_event", 1}, {"timeout", 1},
      {"malformed_http", 1}, {"incomplete", 1}, {"server_error", 1}};
  EXPECT_EQ(s.errors, want);
  const auto& r = run->records;
  EXPECT_EQ(r[0].error_detail, "overloaded");
  EXPECT_EQ(r[0].http_status, 503);
  EXPECT_THAT(r[1].error_detail, HasSubstr("chunked body"));
  EXPECT_EQ(r[6].error_detail, "kv cache full");
  EXPECT_GE(r[3].e2e_s(), 0.5);
  EXPECT_EQ(r[8].output_tokens, 2);
  EXPECT_EQ(r[9].output_tokens, 2);
}

TEST(Client, RefusedConnectionsAreErrorsNotCrashes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);  // nothing listens there now
  auto target = ParseUrl("http://127.0.0.1:" + std::to_string(port));
  ASSERT_THAT(target, IsOk());
  EXPECT_THAT(ProbeServer(*target, 2),
              HasCode(ErrorCode::kUnavailable, HasSubstr("is the server running")));
  LoadOptions o;
  o.target = *target;
  o.arrivals.concurrency = 4;
  auto run = RunLoad(Prompts(500), o);
  ASSERT_THAT(run, IsOk());
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_EQ(s.failed, 500);
  EXPECT_EQ(s.errors.at("connect"), 500);
}

TEST(Client, OpenLoopCountsLatencyFromWhenRequestsWereDue) {
  // Due every 20 ms, but the cap of 1 and a 100 ms server make request k
  // wait: its latency counts from 20k ms, not from when it could be sent.
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"x"}, 100, 0, 1); });
  LoadOptions o = Options(server, 1);
  o.arrivals = {.kind = ArrivalSpec::kConstant, .rate = 50, .concurrency = 1};
  auto run = RunLoad(Prompts(5), o);
  ASSERT_THAT(run, IsOk());
  for (int k = 0; k < 5; ++k) {
    const RequestRecord& r = run->records[static_cast<size_t>(k)];
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.due_ns, k * 20 * kMs);
    // Sent once the k before it each took >= 100 ms.
    EXPECT_GE(r.sent_ns, k * 100 * kMs);
    EXPECT_GE(r.e2e_s(), ((k + 1) * 100 - k * 20) * 1e-3);
    EXPECT_GE(r.ttft_s(), ((k + 1) * 100 - k * 20) * 1e-3);
  }
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_GE(s.send_delay.max, 0.320);
  EXPECT_EQ(run->loop.peak_open, 1);
}

TEST(Client, HoldsHundredsOfOpenStreams) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"a", "b"}, 300, 10, 2); });
  auto run = RunLoad(Prompts(256), Options(server, 256));
  ASSERT_THAT(run, IsOk());
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_EQ(s.completed, 256);
  EXPECT_EQ(run->loop.peak_open, 256);
  EXPECT_EQ(run->loop.connections, 256);
}

TEST(Client, TritonGenerateStreamAndEstimatedCounts) {
  ScriptedServer server([](const ScriptedRequest&) {
    Script s;
    std::string body = SseHead();
    for (const char* t : {"one", "two", "three"}) {
      body +=
          HttpChunk(fmt::format("data: {{\"model_name\":\"ens\",\"text_output\":\"{}\"}}\n\n", t));
    }
    s.steps.push_back({0, body + "0\r\n\r\n"});
    return s;
  });
  LoadOptions o = Options(server, 2);
  o.request = {.api = Api::kTriton, .model = "ens"};
  auto run = RunLoad(Prompts(4), o);
  ASSERT_THAT(run, IsOk());
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.ok()) << r.error << " " << r.error_detail;
    EXPECT_EQ(r.output_tokens, 3);  // one per streamed response
    EXPECT_EQ(r.output_source, TokenSource::kEstimate);
    EXPECT_EQ(r.input_tokens, 3);  // from the prompt
  }
  EXPECT_EQ(server.seen()[0].path, "/v2/models/ens/generate_stream");
  auto body = nlohmann::json::parse(server.seen()[0].body);
  EXPECT_EQ(body["text_input"].get<std::string>().substr(0, 5), "case:");
  EXPECT_EQ(body["max_tokens"], 5);
}

TEST(Client, TokenizerCountsWhenThereIsNoUsage) {
  constexpr const char* kVocab = R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},
                                     "merges":["a b"]}})";
  auto tok = Tokenizer::FromJson(kVocab, "t");
  ASSERT_THAT(tok, IsOk());
  // Two streamed chunks, "abab" and "ab": the text "ababab" is 3 tokens.
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"abab", "ab"}, 0, 0); });
  LoadOptions o = Options(server, 1);
  o.tokenizer = &*tok;
  auto run = RunLoad(Prompts(1), o);
  ASSERT_THAT(run, IsOk());
  EXPECT_EQ(run->records[0].output_tokens, 3);
  EXPECT_EQ(run->records[0].output_source, TokenSource::kTokenizer);
}

TEST(Client, NonStreamedChatUsesTheUsageObject) {
  ScriptedServer server([](const ScriptedRequest&) {
    Script s;
    s.steps.push_back({30, testing::JsonResponse(200, R"({"choices":[{"message":{"role":"assistant",
              "content":"four words right here"}}],"usage":{"prompt_tokens":9,"completion_tokens":4}})")});
    return s;
  });
  LoadOptions o = Options(server, 1);
  o.request = {.api = Api::kChat, .model = "m", .stream = false};
  auto run = RunLoad(Prompts(2), o);
  ASSERT_THAT(run, IsOk());
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.ok()) << r.error << " " << r.error_detail;
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_EQ(r.input_tokens, 9);
    EXPECT_EQ(r.first_token_ns, r.end_ns);
    EXPECT_GE(r.e2e_s(), 0.030);
  }
  EXPECT_EQ(server.seen()[0].path, "/v1/chat/completions");
}

TEST(Client, StaleKeptAliveConnectionsAreRetried) {
  // The server closes each connection after its response without saying so
  // (no Connection: close): the next request on it must go out again on a
  // fresh connection, not fail.
  ScriptedServer server([](const ScriptedRequest&) {
    Script s = SseScript({"x"}, 0, 0, 1);
    s.end = Script::End::kClose;
    return s;
  });
  auto run = RunLoad(Prompts(20), Options(server, 1));
  ASSERT_THAT(run, IsOk());
  Summary s = Summarize(run->records, run->duration_s, Slo{});
  EXPECT_EQ(s.completed, 20);
  EXPECT_EQ(server.requests(), 20);
}

TEST(Client, DurationStopsNewRequests) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"x"}, 50, 0, 1); });
  LoadOptions o = Options(server, 1);
  o.duration_s = 0.3;
  auto run = RunLoad(Prompts(1000), o);
  ASSERT_THAT(run, IsOk());
  // At most 0.3 s / 50 ms + 1 requests started.
  EXPECT_LE(run->records.size(), 7u);
  EXPECT_GE(run->records.size(), 1u);
  for (const RequestRecord& r : run->records) EXPECT_TRUE(r.ok());
}

TEST(Client, StopEndsOpenRequestsAsCancelled) {
  // The server never finishes; the stop flag (set here once four streams
  // are open, as a signal handler would) ends the run without waiting for
  // the 60 s timeout.
  ScriptedServer server(OneTokenThenHang);
  std::stop_source stop;
  LoadOptions o = StoppableOptions(server, stop);
  o.progress_interval_s = 0.01;
  o.progress = [&](const Progress& p) {
    if (p.open == 4) stop.request_stop();
  };
  auto run = RunLoad(Prompts(100), o);
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->records.size(), 4u);
  for (const RequestRecord& r : run->records) EXPECT_EQ(r.error, "cancelled");
  EXPECT_LT(run->loop.wall_s, 30);
}

TEST(Client, AStopFromAnotherThreadWakesASleepingLoop) {
  // No progress callback and a 60 s deadline: the loop sleeps in epoll until
  // the stop (requested by another thread, as the signal watcher of
  // StopOnSignals does) wakes it.
  ScriptedServer server(OneTokenThenHang);
  std::stop_source stop;
  LoadOptions o = StoppableOptions(server, stop);
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.request_stop();
  });
  auto run = RunLoad(Prompts(100), o);
  ASSERT_THAT(run, IsOk());
  ASSERT_EQ(run->records.size(), 4u);
  for (const RequestRecord& r : run->records) EXPECT_EQ(r.error, "cancelled");
  EXPECT_LT(run->loop.wall_s, 30);
}

TEST(Client, AnIdleLoopSleeps) {
  // One slow request and no progress callback: the loop must wait in epoll,
  // not spin (each wake-up is counted).
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"x"}, 1500, 0, 1); });
  auto run = RunLoad(Prompts(1), Options(server, 1));
  ASSERT_THAT(run, IsOk());
  EXPECT_TRUE(run->records[0].ok());
  EXPECT_LT(run->loop.wakeups, 50);
}

TEST(Client, SweepRunsEachConcurrency) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"a", "b"}, 20, 5, 1); });
  BenchPlan plan;
  plan.load = Options(server, 1);
  plan.slo = *ParseSlo("ttft=5s");
  plan.sweep = *ParseSweep("concurrency=1,4");
  std::vector<int64_t> seen;
  plan.on_point = [&](const ArrivalSpec& a) { seen.push_back(a.concurrency); };
  auto result = RunBench(Prompts(8), plan);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 4}));
  ASSERT_EQ(result->points.size(), 2u);
  EXPECT_EQ(result->points[0].loop.peak_open, 1);
  EXPECT_EQ(result->points[1].loop.peak_open, 4);
  for (const SweepPoint& p : result->points) {
    EXPECT_EQ(p.summary.completed, 8);
    EXPECT_TRUE(p.meets);
  }
  std::string csv = BenchCsv(*result, plan.sweep);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 17);
  EXPECT_EQ(csv.substr(0, 18), "concurrency,index,");
}

TEST(Client, SweepRunsEachRateOpenLoop) {
  ScriptedServer server([](const ScriptedRequest&) { return SseScript({"a"}, 0, 0, 1); });
  BenchPlan plan;
  plan.load = Options(server, 1);  // closed loop: the rate sweep makes it Poisson, uncapped
  plan.sweep = *ParseSweep("rate=20,40");
  std::vector<ArrivalSpec> seen;
  plan.on_point = [&](const ArrivalSpec& a) { seen.push_back(a); };
  auto result = RunBench(Prompts(6), plan);
  ASSERT_THAT(result, IsOk());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].kind, ArrivalSpec::kPoisson);
  EXPECT_EQ(seen[1].rate, 40);
  EXPECT_EQ(seen[1].concurrency, 0);
  // The due times are the Poisson schedule of each rate (seed 0).
  for (size_t p = 0; p < 2; ++p) {
    auto offsets = ArrivalOffsets(seen[p], 6, 0);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(result->records[p][i].due_ns, static_cast<int64_t>(offsets[i] * 1e9));
    }
    EXPECT_EQ(result->points[p].summary.completed, 6);
  }
}

TEST(Client, UrlParsing) {
  auto t = ParseUrl("http://localhost:8000/v1/completions");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->host, "localhost");
  EXPECT_EQ(t->port, 8000);
  EXPECT_EQ(t->path, "/v1/completions");
  EXPECT_EQ(ParseUrl("127.0.0.1")->port, 80);
  EXPECT_THAT(ParseUrl("https://x"), HasCode(ErrorCode::kUnimplemented));
  EXPECT_THAT(ParseUrl("http://x:99999"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseUrl("http://:80"), HasCode(ErrorCode::kInvalidArgument));
  LoadOptions o;
  o.target.host = "no-such-host.invalid";
  EXPECT_THAT(RunLoad(Prompts(1), o), HasCode(ErrorCode::kUnavailable));
}

}  // namespace
}  // namespace anxin::loadgen
