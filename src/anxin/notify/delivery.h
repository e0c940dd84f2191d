// Delivery: one worker per receiver takes the spool's messages oldest first
// and hands them to the receiver's sink, with retries, backoff and the bots'
// rate limits.
//
//   notify::NotifyConfig config;                     // ParseNotifyConfig
//   config.receivers.push_back({.name = "audit", .type = notify::ReceiverType::kFile,
//                               .path = "/tmp/alerts.jsonl"});
//   monitor::Registry registry;
//   ANXIN_ASSIGN_OR_RETURN(auto spool, notify::Spool::Open("/tmp/spool"));
//   ANXIN_ASSIGN_OR_RETURN(auto metrics, notify::DeliveryMetrics::Register(registry));
//   notify::Dispatcher dispatcher(config, *spool, metrics);
//   ANXIN_TRY(dispatcher.Start());
//   dispatcher.Wake("audit");                        // after a Write queued something
//   dispatcher.Stop();                               // sends in flight finish first
//
// Order: a receiver's messages go out one at a time in the order they were
// accepted, so the alerts of a group arrive in order. A message is deleted
// from the spool only after its receiver took it: a crash between the two
// sends it again on restart (at most once more per crash; chat APIs have no
// idempotency key to prevent that).
//
// Outcomes: accepted -> deleted and counted sent; rate limited (HTTP 429,
// Feishu code 11232) -> waits for Retry-After or the next free slot; server
// errors, time-outs and unreachable hosts -> exponential backoff with jitter
// between backoff_initial and backoff_max, without a limit on attempts;
// rejected (other 4xx, or a Feishu error code such as 19021 bad signature) ->
// logged, counted failed and deleted (retrying cannot fix it). A card the bot
// refuses as a bad request (9499) is sent once more as plain text.
//
// Thread safety: Start, Wake and Stop may be called from any thread.
#ifndef ANXIN_NOTIFY_DELIVERY_H_
#define ANXIN_NOTIFY_DELIVERY_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/notify/config.h"
#include "anxin/notify/spool.h"

namespace anxin::notify {

// Feishu/Lark's custom-bot signature for a unix time in seconds: base64 of
// HMAC-SHA256 keyed with "<timestamp>\n<secret>" over an empty message.
std::string FeishuSign(int64_t timestamp, const std::string& secret);

struct SendResult {
  enum class Kind { kDelivered, kRetry, kRateLimited, kRejected };
  Kind kind = Kind::kRetry;
  std::string detail{};      // why, for the log (secrets removed)
  double retry_after_s = 0;  // kRateLimited: what the server asked for; 0 = not said
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual SendResult Send(const SpoolMessage& message) = 0;
};

// The sink for a receiver; now_s gives the unix time for signatures.
Result<std::unique_ptr<Sink>> MakeSink(const ReceiverConfig& receiver, double timeout_s,
                                       std::function<int64_t()> now_s = nullptr);

// At most per_second sends in any second and per_minute in any minute, and
// none before a time a server named.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  RateLimiter(int per_second, int per_minute) : per_second_(per_second), per_minute_(per_minute) {}
  // How long to wait before the next send may go (zero: now).
  Clock::duration Wait(Clock::time_point now);
  void Record(Clock::time_point now);
  void BlockUntil(Clock::time_point t);

 private:
  int per_second_, per_minute_;
  std::deque<Clock::time_point> sent_{};  // the last minute's sends
  Clock::time_point blocked_until_{};
};

struct DeliveryMetrics {
  monitor::Family<monitor::Counter>* sent = nullptr;     // {receiver}
  monitor::Family<monitor::Counter>* retried = nullptr;  // {receiver, reason}
  monitor::Family<monitor::Counter>* failed = nullptr;   // {receiver}
  static Result<DeliveryMetrics> Register(monitor::Registry& registry);
};

class Dispatcher {
 public:
  // Sinks come from MakeSink unless given (tests), one per receiver in order.
  Dispatcher(const NotifyConfig& config, Spool& spool, DeliveryMetrics metrics,
             std::vector<std::unique_ptr<Sink>> sinks = {});
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // A receiver whose sink cannot be made (a bad URL) -> its error.
  Status Start();
  void Wake(const std::string& receiver);
  void WakeAll();
  void Stop();

 private:
  struct Worker;
  void Run(Worker& w);

  const NotifyConfig& config_;
  Spool& spool_;
  DeliveryMetrics metrics_;
  std::vector<std::unique_ptr<Sink>> given_sinks_{};
  std::vector<std::unique_ptr<Worker>> workers_{};
};

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_DELIVERY_H_
