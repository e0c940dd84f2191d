#include "anxin/notify/delivery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "anxin/base/testing.h"

namespace anxin::notify {
namespace {

using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using namespace std::chrono_literals;

TEST(FeishuSign, MatchesTheDocumentedAlgorithm) {
  // python3: base64(hmac.new(b"1599360473\ndemo-secret", b"", sha256).digest())
  EXPECT_EQ(FeishuSign(1599360473, "demo-secret"), "3/MaVZ8JLIy4TUG+7KSFJqvUkTKd+HWY8g+56DZWq8s=");
}

TEST(RateLimiter, FivePerSecondHundredPerMinute) {
  RateLimiter l(5, 100);
  auto t = RateLimiter::Clock::time_point{} + 1h;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(l.Wait(t), RateLimiter::Clock::duration::zero());
    l.Record(t);
  }
  EXPECT_EQ(l.Wait(t), std::chrono::duration_cast<RateLimiter::Clock::duration>(1s));
  // 100 sends spread over 20 s fill the minute.
  for (int s = 1; s < 20; ++s) {
    for (int i = 0; i < 5; ++i) l.Record(t + s * 1s);
  }
  EXPECT_EQ(l.Wait(t + 25s), std::chrono::duration_cast<RateLimiter::Clock::duration>(35s));
  l.BlockUntil(t + 200s);
  EXPECT_EQ(l.Wait(t + 100s), std::chrono::duration_cast<RateLimiter::Clock::duration>(100s));
}

// A sink that answers from a script and records what it was given.
class ScriptedSink : public Sink {
 public:
  explicit ScriptedSink(std::vector<SendResult::Kind> script) : script_(std::move(script)) {}
  SendResult Send(const SpoolMessage& m) override {
    std::lock_guard lock(mu);
    SendResult r;
    r.kind = calls < script_.size() ? script_[calls] : SendResult::Kind::kDelivered;
    r.detail = "scripted";
    ++calls;
    if (r.kind == SendResult::Kind::kDelivered) delivered.push_back(m.body);
    return r;
  }
  std::mutex mu;
  size_t calls = 0;
  std::vector<std::string> delivered;

 private:
  std::vector<SendResult::Kind> script_;
};

TEST(Dispatcher, RetriesInOrderDropsRejectedCounts) {
  TempDir dir;
  auto spool = Spool::Open(dir.path());
  ASSERT_TRUE(spool.has_value());
  for (const char* body : {"1", "2", "3", "4"}) {
    ASSERT_TRUE((*spool)->Write([&](SpoolTx& tx) {
      return tx.Enqueue({.receiver = "r", .group_key = "g", .body = body});
    }));
  }
  NotifyConfig config;
  config.receivers.push_back({.name = "r", .type = ReceiverType::kWebhook, .url = "http://x"});
  config.backoff_initial_s = 0.01;
  config.backoff_max_s = 0.05;
  monitor::Registry registry;
  auto metrics = DeliveryMetrics::Register(registry);
  ASSERT_TRUE(metrics.has_value());
  using K = SendResult::Kind;
  auto sink = std::make_unique<ScriptedSink>(
      std::vector<K>{K::kRetry, K::kRateLimited, K::kDelivered, K::kRejected, K::kRetry});
  ScriptedSink* raw = sink.get();
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::move(sink));
  Dispatcher d(config, **spool, *metrics, std::move(sinks));
  ASSERT_TRUE(d.Start().has_value());
  EXPECT_TRUE(WaitFor([&] { return (*spool)->messages() == 0; }, 20s));
  d.Stop();
  EXPECT_EQ((*spool)->messages(), 0u);
  // 1 retried twice then sent; 2 rejected; 3 retried once then sent; 4 sent.
  EXPECT_EQ(raw->delivered, (std::vector<std::string>{"1", "3", "4"}));
  EXPECT_EQ(metrics->sent->WithLabels({"r"}).value(), 3);
  EXPECT_EQ(metrics->failed->WithLabels({"r"}).value(), 1);
  EXPECT_EQ(metrics->retried->WithLabels({"r", "rate_limited"}).value(), 1);
  EXPECT_EQ(metrics->retried->WithLabels({"r", "unreachable"}).value(), 2);
}

TEST(FileSink, AppendsLines) {
  TempDir dir;
  ReceiverConfig r{.name = "audit", .type = ReceiverType::kFile, .path = dir / "a.jsonl"};
  auto sink = MakeSink(r, 1);
  ASSERT_TRUE(sink.has_value());
  EXPECT_EQ((*sink)->Send({.body = R"({"a":1})"}).kind, SendResult::Kind::kDelivered);
  EXPECT_EQ((*sink)->Send({.body = R"({"a":2})"}).kind, SendResult::Kind::kDelivered);
  EXPECT_EQ(dir.Read("a.jsonl"), "{\"a\":1}\n{\"a\":2}\n");
  ReceiverConfig bad{.name = "x", .type = ReceiverType::kFile, .path = dir / "no/such/dir/f"};
  EXPECT_EQ((*MakeSink(bad, 1))->Send({.body = "x"}).kind, SendResult::Kind::kRetry);
}

}  // namespace
}  // namespace anxin::notify
