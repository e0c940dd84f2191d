#include "anxin/serve/gate/gate.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "anxin/base/testing.h"
#include "anxin/net/http_testing.h"
#include "anxin/serve/sim/sim_server.h"

namespace anxin::serve::gate {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using net::testing::Get;
using net::testing::Post;
using net::testing::RunExchanges;
using net::testing::RunOne;
using net::testing::SseData;

// An upstream whose answers are scripted byte for byte, with delays.
class ScriptedUpstream {
 public:
  ScriptedUpstream() : server_(loop_, {}) {
    EXPECT_THAT(loop_.Init(), IsOk());
    server_.set_on_request([this](net::ServerRequest& r) { Handle(r); });
    server_.set_on_close([this](net::ConnId) {
      ++closed_mid_request_;
      --active_;
    });
    EXPECT_THAT(server_.Listen(), IsOk());
    thread_ = std::thread([this] { loop_.Run(); });
  }
  ~ScriptedUpstream() {
    loop_.Post([this] { server_.Shutdown(); });
    loop_.Stop();
    thread_.join();
  }
  int port() const { return server_.port(); }
  int max_active() const { return max_active_.load(); }
  int closed_mid_request() const { return closed_mid_request_.load(); }
  // Requests for /hang that reached this server (the gate forwards after it
  // admits, so admission alone does not mean the upstream has the request).
  int hangs() const { return hangs_.load(); }

  static constexpr std::string_view kStreamHead =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Odd:  spaced \r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  static std::vector<std::string> StreamPieces() {
    return {"f;ext=1\r\ndata: {\"a\":1}\n\n\r\n", "10\r\n: comment line\n\n\r\n",
            "e\r\ndata: [DONE]\n\n\r\n", "0\r\nX-Trailer: t\r\n\r\n"};
  }

 private:
  void Handle(net::ServerRequest& r) {
    const net::ConnId c = r.conn;
    ++active_;
    max_active_ = std::max(max_active_.load(), active_.load());
    const std::string& path = r.head.path;
    if (path == "/stream") {
      server_.SendRaw(c, kStreamHead);
      auto pieces = std::make_shared<std::vector<std::string>>(StreamPieces());
      SendPieces(c, pieces, 0, 20ms);
    } else if (path == "/slow") {
      server_.BeginStream(c, 200, "text/event-stream");
      Tick(c, 10, 30ms);
    } else if (path == "/close-early") {
      server_.SendRaw(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
      loop_.RunAfter(20ms, [this, c] {
        --active_;
        server_.Close(c);
      });
    } else if (path == "/bad") {
      server_.SendRaw(c, "NOT HTTP AT ALL\r\n\r\n");
      loop_.RunAfter(20ms, [this, c] {
        --active_;
        server_.Close(c);
      });
    } else if (path == "/hang") {
      ++hangs_;  // Never answers.
    } else {
      --active_;
      server_.Respond(c, 200, "text/plain", "ok " + path);
    }
  }
  void SendPieces(net::ConnId c, std::shared_ptr<std::vector<std::string>> p, size_t i,
                  std::chrono::milliseconds gap) {
    loop_.RunAfter(gap, [=, this] {
      if (!server_.Alive(c)) return;
      server_.SendRaw(c, (*p)[i]);
      if (i + 1 < p->size()) {
        SendPieces(c, p, i + 1, gap);
      } else {
        --active_;
        server_.FinishRaw(c, true);
      }
    });
  }
  void Tick(net::ConnId c, int left, std::chrono::milliseconds gap) {
    loop_.RunAfter(gap, [=, this] {
      if (!server_.Alive(c)) return;
      server_.StreamChunk(c, "data: tick\n\n");
      if (left > 1) {
        Tick(c, left - 1, gap);
      } else {
        --active_;
        server_.EndStream(c);
      }
    });
  }

  net::EventLoop loop_;
  net::StreamServer server_;
  std::thread thread_;
  std::atomic<int> active_{0}, max_active_{0}, closed_mid_request_{0}, hangs_{0};
};

GateOptions Options(int upstream_port, int cap, int queue) {
  GateOptions o;
  o.upstream_port = upstream_port;
  o.max_concurrency = cap;
  o.max_queue = queue;
  return o;
}

TEST(GateOptions, FromFlags) {
  auto o = MakeGateOptions({.upstream = "http://localhost:8001/",
                            .queue_timeout = "2s",
                            .bypass = "/health,,/v1/models"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->upstream_host, "127.0.0.1");
  EXPECT_EQ(o->upstream_port, 8001);
  EXPECT_EQ(o->queue_timeout_seconds, 2);
  EXPECT_EQ(o->bypass, (std::vector<std::string>{"/health", "/v1/models"}));
  EXPECT_THAT(MakeGateOptions({.upstream = "https://127.0.0.1:8000"}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("https is not proxied")));
  EXPECT_THAT(MakeGateOptions({.upstream = "http://127.0.0.1:99999"}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("not a number from 1 to 65535")));
  EXPECT_THAT(MakeGateOptions({.upstream = "http://127.0.0.1:8000", .queue_timeout = "soon"}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--queue-timeout")));
}

TEST(Gate, PassesStreamsThroughByteForByte) {
  ScriptedUpstream up;
  Gate gate(Options(up.port(), 4, 4));
  ASSERT_THAT(gate.Start(), IsOk());
  auto direct = RunOne(up.port(), Post("/stream", "{}"));
  auto via = RunOne(gate.port(), Post("/stream", "{}"));
  ASSERT_TRUE(direct.complete);
  ASSERT_TRUE(via.complete) << via.raw;
  EXPECT_EQ(via.raw, direct.raw);
  std::string expected(ScriptedUpstream::kStreamHead);
  for (const auto& p : ScriptedUpstream::StreamPieces()) expected += p;
  EXPECT_EQ(via.raw, expected);
  // It arrived in pieces as the upstream sent them, not buffered to the end.
  EXPECT_GE(via.arrivals.size(), 3u);
}

TEST(Gate, CapHoldsAndTheQueueDrainsInOrder) {
  ScriptedUpstream up;
  Gate gate(Options(up.port(), 2, 16));
  ASSERT_THAT(gate.Start(), IsOk());
  std::vector<std::string> reqs(8, Post("/slow", "{}"));
  auto xs = RunExchanges(gate.port(), reqs, 30s);
  for (const auto& x : xs) {
    ASSERT_TRUE(x.complete) << x.raw;
    EXPECT_EQ(x.status, 200);
    EXPECT_EQ(SseData(x.body).size(), 10u);
  }
  GateSnapshot s = gate.Snapshot();
  EXPECT_EQ(s.max_in_flight_seen, 2);
  EXPECT_EQ(up.max_active(), 2);
  EXPECT_GE(s.max_queued_seen, 4);
  EXPECT_EQ(s.routes["/slow"].codes[200], 8u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(Gate, QueueFullAnswers429WithRetryAfter) {
  ScriptedUpstream up;
  Gate gate(Options(up.port(), 1, 0));
  ASSERT_THAT(gate.Start(), IsOk());
  const int hold = net::testing::Connect(gate.port());
  const std::string hang = Post("/hang", "{}");
  ::send(hold, hang.data(), hang.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitFor([&] { return gate.Snapshot().in_flight == 1; }, 10s));
  auto x = RunOne(gate.port(), Post("/v1/completions", "{}"));
  EXPECT_EQ(x.status, 429);
  EXPECT_THAT(x.head, HasSubstr("Retry-After: "));
  EXPECT_THAT(x.body, HasSubstr("queue_full"));
  ::close(hold);
}

TEST(Gate, QueueDeadlineAnswers429) {
  ScriptedUpstream up;
  GateOptions o = Options(up.port(), 1, 4);
  o.queue_timeout_seconds = 0.3;
  o.retry_after_seconds = 7;
  Gate gate(o);
  ASSERT_THAT(gate.Start(), IsOk());
  const int hold = net::testing::Connect(gate.port());
  const std::string hang = Post("/hang", "{}");
  ::send(hold, hang.data(), hang.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitFor([&] { return gate.Snapshot().in_flight == 1; }, 10s));
  const auto start = std::chrono::steady_clock::now();
  auto x = RunOne(gate.port(), Post("/v1/completions", "{}"));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(x.status, 429);
  EXPECT_THAT(x.head, HasSubstr("Retry-After: 7"));
  EXPECT_THAT(x.body, HasSubstr("queue_timeout"));
  EXPECT_GE(waited, 250ms);
  EXPECT_EQ(gate.Snapshot().routes["/v1/completions"].rejected["queue_timeout"], 1u);
  ::close(hold);
}

TEST(Gate, ClientThatLeavesFreesItsSlotAndClosesUpstream) {
  ScriptedUpstream up;
  GateOptions o = Options(up.port(), 1, 4);
  o.queue_timeout_seconds = 10;
  Gate gate(o);
  ASSERT_THAT(gate.Start(), IsOk());
  const int a = net::testing::Connect(gate.port());
  const std::string hang = Post("/hang", "{}");
  ::send(a, hang.data(), hang.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(WaitFor([&] { return gate.Snapshot().in_flight == 1; }, 10s));
  ASSERT_TRUE(WaitFor([&] { return up.hangs() == 1; }, 10s));
  ::close(a);
  auto b = RunOne(gate.port(), Get("/other"), 8s);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "ok /other");
  EXPECT_TRUE(WaitFor([&] { return up.closed_mid_request() == 1; }, 10s));
  EXPECT_EQ(up.closed_mid_request(), 1);
  EXPECT_EQ(gate.Snapshot().routes["/hang"].errors["client_gone"], 1u);
}

TEST(Gate, UpstreamFailuresAreCountedNeverHung) {
  ScriptedUpstream up;
  GateOptions o = Options(up.port(), 2, 4);
  o.upstream_idle_timeout_seconds = 0.3;
  Gate gate(o);
  ASSERT_THAT(gate.Start(), IsOk());
  auto bad = RunOne(gate.port(), Post("/bad", "{}"));
  EXPECT_EQ(bad.status, 502);
  EXPECT_THAT(bad.body, HasSubstr("bad_response"));
  auto cut = RunOne(gate.port(), Post("/close-early", "{}"));
  EXPECT_EQ(cut.status, 200);
  EXPECT_FALSE(cut.complete);
  EXPECT_TRUE(cut.closed);
  auto hang = RunOne(gate.port(), Post("/hang", "{}"));
  EXPECT_EQ(hang.status, 504);
  GateSnapshot s = gate.Snapshot();
  EXPECT_EQ(s.routes["/bad"].errors["bad_response"], 1u);
  EXPECT_EQ(s.routes["/close-early"].errors["truncated"], 1u);
  EXPECT_EQ(s.routes["/hang"].errors["timeout"], 1u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(Gate, UnreachableUpstreamIs502) {
  int port;
  {
    ScriptedUpstream gone;
    port = gone.port();
  }
  Gate gate(Options(port, 2, 4));
  ASSERT_THAT(gate.Start(), IsOk());
  auto x = RunOne(gate.port(), Post("/v1/completions", "{}"));
  EXPECT_EQ(x.status, 502);
  EXPECT_THAT(x.body, HasSubstr("unreachable"));
}

TEST(Gate, InFrontOfTheSimulatorTheCapHoldsAndMetricsArePerRoute) {
  sim::SimServerOptions so;
  so.engine.shape = {4, 2, 64};
  so.engine.num_blocks = 512;
  so.engine.max_num_seqs = 64;
  so.time_scale = 0.2;
  sim::SimServer sim(so);
  ASSERT_THAT(sim.Start(), IsOk());
  Gate gate(Options(sim.port(), 3, 64));
  ASSERT_THAT(gate.Start(), IsOk());
  std::vector<std::string> reqs;
  for (int i = 0; i < 12; ++i) {
    reqs.push_back(
        Post("/v1/chat/completions",
             R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"stream":true})",
             /*keep_alive=*/true));
  }
  reqs.push_back(Get("/health"));
  auto xs = RunExchanges(gate.port(), reqs, 60s);
  for (size_t i = 0; i + 1 < xs.size(); ++i) {
    ASSERT_TRUE(xs[i].complete) << xs[i].raw;
    EXPECT_EQ(SseData(xs[i].body).back(), "[DONE]");
  }
  EXPECT_EQ(xs.back().status, 200);
  EXPECT_EQ(sim.Snapshot().engine.max_running, 3);
  const std::string m = RunOne(gate.port(), Get("/gate/metrics")).body;
  EXPECT_THAT(
      m, HasSubstr("anxin_gate_requests_total{route=\"/v1/chat/completions\",code=\"200\"} 12"));
  EXPECT_THAT(m, HasSubstr("anxin_gate_requests_total{route=\"/health\",code=\"200\"} 1"));
  EXPECT_THAT(m, HasSubstr("anxin_gate_in_flight_max 3"));
  EXPECT_THAT(
      m, HasSubstr("anxin_gate_time_to_first_byte_seconds_bucket{route=\"/v1/chat/completions\""));
}

}  // namespace
}  // namespace anxin::serve::gate
