#include "anxin/serve/sim/sim_server.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/testing.h"
#include "anxin/net/http_testing.h"
#include "anxin/serve/sim/sim_text.h"

namespace anxin::serve::sim {
namespace {

using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace std::chrono_literals;
using net::testing::Get;
using net::testing::Post;
using net::testing::RunExchanges;
using net::testing::RunOne;
using net::testing::SseData;

SimServerOptions Options(int blocks, int cap, double time_scale) {
  SimServerOptions o;
  o.engine.shape = {4, 2, 64};
  o.engine.format = kv::ParseKvFormat("int4").value();
  o.engine.num_blocks = blocks;
  o.engine.max_num_seqs = cap;
  o.engine.watermark = 0;
  o.time_scale = time_scale;
  return o;
}

// Polls the server's snapshot until pred holds or 20 s pass.
template <typename Pred>
bool WaitFor(const SimServer& s, Pred pred) {
  return ::anxin::testing::WaitFor([&] { return pred(s.Snapshot()); }, 20s);
}

TEST(SimServer, CompletionWithUsage) {
  SimServer sim(Options(256, 8, 0));
  ASSERT_THAT(sim.Start(), IsOk());
  // An independent HTTP client (cpp-httplib) reads the answer.
  HttpClient client("127.0.0.1", sim.port());
  auto r = client.Post("/v1/completions",
                       R"({"model":"m","prompt":"The quick brown fox","max_tokens":5})");
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["prompt_tokens"], SimTokenize("The quick brown fox").size());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const std::string text = j["choices"][0]["text"];
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 5);
}

TEST(SimServer, ChatStreamEndsWithUsageAndDone) {
  SimServer sim(Options(256, 8, 0));
  ASSERT_THAT(sim.Start(), IsOk());
  auto x = RunOne(sim.port(), Post("/v1/chat/completions", R"({
      "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
      "max_tokens": 6, "stream": true, "stream_options": {"include_usage": true}})"));
  ASSERT_TRUE(x.complete) << x.raw;
  EXPECT_EQ(x.status, 200);
  EXPECT_THAT(x.head, HasSubstr("text/event-stream"));
  auto events = SseData(x.body);
  ASSERT_EQ(events.size(), 1u + 6 + 1 + 1);  // role, 6 tokens, usage, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  for (int i = 1; i <= 6; ++i) {
    json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_FALSE(e["choices"][0]["delta"]["content"].get<std::string>().empty());
    EXPECT_EQ(e["choices"][0]["finish_reason"].is_null(), i < 6);
  }
  json usage = json::parse(events[7]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  EXPECT_EQ(events[8], "[DONE]");
}

TEST(SimServer, StreamsTokensAsStepsFinish) {
  // 20 tokens at ~10 ms of simulated (and here wall) time each arrive in
  // separate reads, not in one piece at the end.
  SimServer sim(Options(256, 8, 1.0));
  ASSERT_THAT(sim.Start(), IsOk());
  auto x = RunOne(sim.port(),
                  Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 20, "stream": true})"));
  ASSERT_TRUE(x.complete);
  EXPECT_EQ(SseData(x.body).size(), 21u);
  EXPECT_GE(x.arrivals.size(), 10u);
}

TEST(SimServer, RejectsBadRequestsWithOpenAiErrors) {
  SimServerOptions o = Options(16, 8, 0);
  o.engine.max_model_len = 64;
  SimServer sim(o);
  ASSERT_THAT(sim.Start(), IsOk());
  const int p = sim.port();
  struct Case {
    std::string request;
    int status;
    std::string message;
  } cases[] = {
      {Post("/v1/completions", "{not json"), 400, "not a JSON object"},
      {Post("/v1/completions", R"({"max_tokens": 3})"), 400, "'prompt' is required"},
      {Post("/v1/completions", R"({"prompt": "x", "max_tokens": "3"})"), 400, "integer"},
      {Post("/v1/completions", R"({"prompt": "x", "max_tokens": 100})"), 400, "context of 64"},
      {Post("/v1/completions", R"({"prompt": "x", "top_p": 3})"), 400, "top_p"},
      {Post("/v1/chat/completions", R"({"messages": []})"), 400, "messages"},
      {Get("/v1/completions"), 405, "POST"},
      {Get("/nowhere"), 404, "no route"},
      {"BROKEN\r\n\r\n", 400, "malformed"},
  };
  for (const Case& c : cases) {
    auto x = RunOne(p, c.request);
    EXPECT_EQ(x.status, c.status) << c.request;
    EXPECT_THAT(x.body, HasSubstr(c.message)) << c.request;
    if (x.status != 404 && c.status != 405 && c.request != "BROKEN\r\n\r\n") {
      EXPECT_TRUE(json::parse(x.body, nullptr, false).contains("error")) << x.body;
    }
  }
  EXPECT_EQ(RunOne(p, Get("/health")).status, 200);
  auto models = RunOne(p, Get("/v1/models"));
  EXPECT_THAT(models.body, HasSubstr("anxin-sim"));
}

// Many concurrent streams through few blocks: the cap holds, blocks run out
// and sequences are preempted, and still every request gets all its tokens.
TEST(SimServer, CapHoldsNoRequestLostPreemptionWhenBlocksRunOut) {
  const int kRequests = 60, kTokens = 80, kCap = 6;
  SimServer sim(Options(/*blocks=*/30, kCap, /*time_scale=*/0));
  ASSERT_THAT(sim.Start(), IsOk());
  std::vector<std::string> reqs;
  for (int i = 0; i < kRequests; ++i) {
    reqs.push_back(
        Post("/v1/completions", json({{"prompt", "request " + std::to_string(i) +
                                                     " asks about the weather "
                                                     "in a city far away and wants a long answer"},
                                      {"max_tokens", kTokens},
                                      {"stream", true},
                                      {"stream_options", {{"include_usage", true}}}})
                                    .dump()));
  }
  auto xs = RunExchanges(sim.port(), reqs, 60s);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(xs[i].complete) << "request " << i << " lost: " << xs[i].raw.substr(0, 300);
    ASSERT_EQ(xs[i].status, 200);
    auto events = SseData(xs[i].body);
    ASSERT_EQ(events.size(), kTokens + 2u) << i;
    EXPECT_EQ(json::parse(events[kTokens])["usage"]["completion_tokens"], kTokens);
    EXPECT_EQ(events.back(), "[DONE]");
  }
  SimSnapshot s = sim.Snapshot();
  EXPECT_EQ(s.engine.completed, static_cast<uint64_t>(kRequests));
  EXPECT_LE(s.engine.max_running, kCap);
  EXPECT_EQ(s.engine.max_running, kCap);
  EXPECT_GT(s.engine.preemptions, 0u);
  EXPECT_EQ(s.engine.blocks.used_blocks, 0);
  EXPECT_EQ(s.engine.running + s.engine.waiting, 0);
  const std::string metrics = RunOne(sim.port(), Get("/metrics")).body;
  EXPECT_THAT(metrics,
              HasSubstr("anxin_sim_preemptions_total " + std::to_string(s.engine.preemptions)));
  EXPECT_THAT(metrics,
              HasSubstr("anxin_sim_requests_total{route=\"/v1/completions\",code=\"200\"} 60"));
}

TEST(SimServer, ClientThatLeavesCancelsItsRequest) {
  SimServer sim(Options(256, 8, 1.0));
  ASSERT_THAT(sim.Start(), IsOk());
  const int fd = net::testing::Connect(sim.port());
  ASSERT_GE(fd, 0);
  const std::string req =
      Post("/v1/completions", R"({"prompt": "long", "max_tokens": 3000, "stream": true})");
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  ASSERT_TRUE(WaitFor(sim, [](const SimSnapshot& s) { return s.engine.running == 1; }));
  ::close(fd);
  ASSERT_TRUE(WaitFor(sim, [](const SimSnapshot& s) {
    return s.engine.cancelled == 1 && s.engine.running == 0 && s.engine.blocks.used_blocks == 0;
  }));
  EXPECT_EQ(sim.Snapshot().client_disconnects, 1u);
}

TEST(SimServer, AClientThatStopsReadingIsDroppedNotBuffered) {
  // 90000 tokens of SSE are about 15 MB: more than the kernel's socket
  // buffers and the server's 64 KiB cap together.
  SimServerOptions o = Options(8192, 8, 0);
  o.engine.max_model_len = 100000;
  o.http.max_buffered_bytes = 64 << 10;
  SimServer sim(o);
  ASSERT_THAT(sim.Start(), IsOk());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(sim.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req =
      Post("/v1/completions", R"({"prompt": "never read", "max_tokens": 90000, "stream": true})");
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  EXPECT_TRUE(WaitFor(sim, [](const SimSnapshot& s) {
    return s.http.dropped_slow_readers == 1 && s.engine.running == 0 &&
           s.engine.blocks.used_blocks == 0;
  }));
  EXPECT_LT(sim.Snapshot().engine.generated_tokens, 90000u);
  ::close(fd);
}

TEST(SimServer, FullQueueAnswers429WithRetryAfter) {
  SimServerOptions o = Options(256, 1, 1.0);
  o.engine.max_waiting = 1;
  SimServer sim(o);
  ASSERT_THAT(sim.Start(), IsOk());
  const std::string slow = Post("/v1/completions", R"({"prompt": "a", "max_tokens": 4000})");
  const int a = net::testing::Connect(sim.port()), b = net::testing::Connect(sim.port());
  ::send(a, slow.data(), slow.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitFor(sim, [](const SimSnapshot& s) { return s.engine.running == 1; }));
  ::send(b, slow.data(), slow.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitFor(sim, [](const SimSnapshot& s) { return s.engine.waiting == 1; }));
  auto x = RunOne(sim.port(), slow);
  EXPECT_EQ(x.status, 429);
  EXPECT_THAT(x.head, HasSubstr("Retry-After: 1"));
  ::close(a);
  ::close(b);
  ASSERT_TRUE(WaitFor(sim, [](const SimSnapshot& s) { return s.engine.cancelled == 2; }));
}

TEST(SimServer, AnswersExpect100ContinueBeforeTheBody) {
  SimServer sim(Options(64, 4, 0));
  ASSERT_THAT(sim.Start(), IsOk());
  const std::string body = R"({"prompt": "large", "max_tokens": 2})";
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  const int fd = net::testing::Connect(sim.port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::string got;
  char buf[4096];
  while (got.find("\r\n\r\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "no 100 Continue";
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_EQ(::send(fd, body.data(), body.size(), MSG_NOSIGNAL), static_cast<ssize_t>(body.size()));
  got.clear();
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  EXPECT_THAT(got, ::testing::StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(got, HasSubstr("\"completion_tokens\":2"));
}

TEST(SimServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  SimServer sim(Options(64, 4, 0));
  ASSERT_THAT(sim.Start(), IsOk());
  const int fd = net::testing::Connect(sim.port());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 5; ++i) {
    const std::string req =
        Post("/v1/completions", R"({"prompt": "again", "max_tokens": 3, "stream": true})",
             /*keep_alive=*/true);
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    net::testing::Exchange x;
    x.fd = fd;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!x.complete && std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      ASSERT_GT(n, 0) << "the server closed a kept-alive connection";
      x.raw.append(buf, static_cast<size_t>(n));
      net::testing::Decode(x, false);
    }
    ASSERT_TRUE(x.complete);
    EXPECT_EQ(SseData(x.body).size(), 4u);
  }
  ::close(fd);
  EXPECT_EQ(sim.Snapshot().http.accepted, 1u);
}

}  // namespace
}  // namespace anxin::serve::sim
