#include "anxin/base/http.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A gate a handler waits at until the test opens it.
class Gate {
 public:
  void Arrive() {
    std::unique_lock lock(mu_);
    arrived_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool WaitArrived() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 20s, [&] { return arrived_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool arrived_ = false;
  bool open_ = false;
};

TEST(HttpTest, RoutesOnAFreeLoopbackPort) {
  HttpServer server;
  server.Get("/hello", [](const HttpRequest& req) {
    return HttpResponse::Text(200, "hello " + req.Query("name").value_or("world") + "\n");
  });
  server.Get(R"(/devices/(\d+))", [](const HttpRequest& req) {
    return HttpResponse::Json(200, "{\"index\":" + req.path_groups.at(0) + "}");
  });
  server.Post("/echo", [](const HttpRequest& req) {
    HttpResponse r = HttpResponse::Text(201, req.body);
    r.headers.emplace_back("X-Seen-Type", req.Header("content-type").value_or("?"));
    r.headers.emplace_back("X-Token", req.Header("X-TOKEN").value_or("none"));
    return r;
  });
  server.Get("/boom", [](const HttpRequest&) -> HttpResponse {
    throw std::runtime_error("handler failed");
  });
  ASSERT_THAT(server.Start(), IsOk());
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));

  HttpClient client("127.0.0.1", server.port(), {.headers = {{"X-Token", "t0k"}}});
  auto hello = client.Get("/hello?name=npu%203");
  ASSERT_THAT(hello, IsOk());
  EXPECT_EQ(hello->status, 200);
  EXPECT_TRUE(hello->ok());
  EXPECT_EQ(hello->body, "hello npu 3\n");
  EXPECT_THAT(hello->content_type, HasSubstr("text/plain"));

  auto dev = client.Get("/devices/7");
  ASSERT_THAT(dev, IsOk());
  EXPECT_EQ(dev->body, "{\"index\":7}");
  EXPECT_EQ(dev->content_type, "application/json");

  auto echo = client.Post("/echo", "payload \"with\" quotes\n", "text/csv");
  ASSERT_THAT(echo, IsOk());
  EXPECT_EQ(echo->status, 201);
  EXPECT_EQ(echo->body, "payload \"with\" quotes\n");
  EXPECT_EQ(echo->Header("x-seen-type").value_or(""), "text/csv");
  EXPECT_EQ(echo->Header("X-Token").value_or(""), "t0k");

  auto missing = client.Get("/nope");
  ASSERT_THAT(missing, IsOk());
  EXPECT_EQ(missing->status, 404);
  EXPECT_FALSE(missing->ok());
  EXPECT_EQ(missing->body, "not found: /nope\n");

  auto boom = client.Get("/boom");
  ASSERT_THAT(boom, IsOk());
  EXPECT_EQ(boom->status, 500);
  EXPECT_THAT(boom->body, HasSubstr("handler failed"));
  server.Stop();
  server.Stop();  // idempotent
}

TEST(HttpTest, LargeBodiesAreRefused) {
  HttpServer server({.max_body_bytes = 1000});
  server.Post("/in", [](const HttpRequest& req) {
    return HttpResponse::Text(200, std::to_string(req.body.size()));
  });
  ASSERT_THAT(server.Start(), IsOk());
  HttpClient client("127.0.0.1", server.port());
  auto small = client.Post("/in", std::string(1000, 'a'), "text/plain");
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(small->body, "1000");
  auto big = client.Post("/in", std::string(5000, 'a'), "text/plain");
  ASSERT_THAT(big, IsOk());
  EXPECT_EQ(big->status, 413);
}

TEST(HttpTest, ConnectionRefusedNamesHostAndPort) {
  int port;
  {
    HttpServer server;
    ASSERT_THAT(server.Start(), IsOk());
    port = server.port();
  }  // stopped: nothing listens there now
  HttpClient client("127.0.0.1", port);
  EXPECT_THAT(client.Get("/metrics"),
              HasCode(ErrorCode::kUnavailable,
                      HasSubstr("cannot connect to 127.0.0.1:" + std::to_string(port))));
}

TEST(HttpTest, PortInUseIsUnavailable) {
  HttpServer first;
  ASSERT_THAT(first.Start(), IsOk());
  HttpServer second({.port = first.port()});
  EXPECT_THAT(second.Start(),
              HasCode(ErrorCode::kUnavailable, HasSubstr(std::to_string(first.port()))));
}

TEST(HttpTest, SlowServerIsADeadline) {
  Gate gate;
  HttpServer server;
  server.Get("/slow", [&](const HttpRequest&) {
    gate.Arrive();
    return HttpResponse::Text(200, "late");
  });
  ASSERT_THAT(server.Start(), IsOk());
  HttpClient client("127.0.0.1", server.port(), {.timeout = 200ms});
  EXPECT_THAT(client.Get("/slow"),
              HasCode(ErrorCode::kDeadlineExceeded, HasSubstr("no response from 127.0.0.1:")));
  gate.Open();
}

TEST(HttpTest, StopLetsRequestsInFlightFinish) {
  Gate gate;
  HttpServer server;
  server.Get("/work", [&](const HttpRequest&) {
    gate.Arrive();
    return HttpResponse::Text(200, "done");
  });
  ASSERT_THAT(server.Start(), IsOk());
  int port = server.port();
  Result<HttpResponse> in_flight = Internal("not run");
  std::thread request([&] {
    HttpClient client("127.0.0.1", port, {.timeout = 30000ms});
    in_flight = client.Get("/work");
  });
  ASSERT_TRUE(gate.WaitArrived());
  std::thread stopper([&] { server.Stop(); });
  gate.Open();
  stopper.join();
  request.join();
  ASSERT_THAT(in_flight, IsOk());
  EXPECT_EQ(in_flight->body, "done");
  HttpClient after("127.0.0.1", port);
  EXPECT_THAT(after.Get("/work"), HasCode(ErrorCode::kUnavailable));
}

TEST(HttpTest, ForUrl) {
  auto c = HttpClient::ForUrl("http://127.0.0.1:9400/");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->base_url(), "http://127.0.0.1:9400");
  EXPECT_THAT(HttpClient::ForUrl("ftp://x"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("http:// or https://")));
  EXPECT_THAT(HttpClient::ForUrl("http://x/api"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("without a path")));
  // The default port shows in errors.
  auto refused = HttpClient::ForUrl("http://127.0.0.1", {.connect_timeout = 2000ms});
  ASSERT_THAT(refused, IsOk());
  auto r = refused->Get("/");
  if (!r) {
    EXPECT_THAT(r.error().message(), HasSubstr("127.0.0.1:80"));
  }
}

// https:// goes through TLS (the chat APIs of `anxin notify` need it): a
// plain-HTTP server on the other end fails the handshake, as an error.
TEST(HttpTest, HttpsSpeaksTls) {
  HttpServer server;
  server.Get("/", [](const HttpRequest&) { return HttpResponse::Text(200, "plain"); });
  ASSERT_THAT(server.Start(), IsOk());
  auto c = HttpClient::ForUrl("https://127.0.0.1:" + std::to_string(server.port()),
                              {.connect_timeout = 2000ms, .timeout = 2000ms});
  ASSERT_THAT(c, IsOk());
  EXPECT_THAT(c->Get("/"), HasCode(ErrorCode::kUnavailable, HasSubstr("TLS handshake")));
}

}  // namespace
}  // namespace anxin
