#include "anxin/notify/delivery.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "anxin/base/http.h"
#include "anxin/base/strings.h"

namespace anxin::notify {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double RetryAfterSeconds(const HttpResponse& r) {
  auto h = r.Header("Retry-After");
  if (!h) return 0;
  const std::optional<double> v = ParseDouble(*h);
  return v && *v > 0 && *v < 3600 ? *v : 0;
}

std::string Snippet(std::string_view body) {
  std::string s(body.substr(0, 200));
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// Classifies an HTTP answer by status; 2xx is left to the caller.
SendResult ByStatus(const HttpResponse& r) {
  SendResult out;
  out.detail = "HTTP " + std::to_string(r.status) + ": " + Snippet(r.body);
  if (r.status == 429) {
    out.kind = SendResult::Kind::kRateLimited;
    out.retry_after_s = RetryAfterSeconds(r);
  } else if (r.status >= 500 || r.status == 408) {
    out.kind = SendResult::Kind::kRetry;
    out.retry_after_s = RetryAfterSeconds(r);
  } else {
    out.kind = SendResult::Kind::kRejected;
  }
  return out;
}

// "https://host:port/path?q" -> ("https://host:port", "/path?q").
Result<std::pair<std::string, std::string>> SplitUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return InvalidArgument("the URL has no scheme");
  const size_t path = url.find('/', scheme + 3);
  if (path == std::string::npos) return std::pair<std::string, std::string>(url, "/");
  return std::pair<std::string, std::string>(url.substr(0, path), url.substr(path));
}

class HttpSink : public Sink {
 public:
  HttpSink(const ReceiverConfig& r, HttpClient client, std::string path,
           std::function<int64_t()> now_s)
      : receiver_(r),
        client_(std::move(client)),
        path_(std::move(path)),
        now_s_(std::move(now_s)) {}

  SendResult Send(const SpoolMessage& m) override {
    const bool bot =
        receiver_.type == ReceiverType::kFeishu || receiver_.type == ReceiverType::kLark;
    if (!bot) return Post(m.body, false);
    SendResult r = Post(Signed(m.body), true);
    if (r.kind == SendResult::Kind::kRejected && r.detail.starts_with("code 9499") &&
        !m.fallback.empty() && m.fallback != m.body) {
      spdlog::warn("receiver '{}' refused the card ({}); sending it as text", receiver_.name,
                   r.detail);
      return Post(Signed(m.fallback), true);
    }
    return r;
  }

 private:
  std::string Signed(const std::string& body) const {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return body;
    if (!receiver_.secret.empty()) {
      const int64_t ts = now_s_ ? now_s_() : UnixNow();
      j["timestamp"] = std::to_string(ts);
      j["sign"] = FeishuSign(ts, receiver_.secret);
    }
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  SendResult Post(const std::string& body, bool bot) {
    auto res = client_.Post(path_, body, "application/json; charset=utf-8");
    SendResult out;
    if (!res) {
      out.kind = SendResult::Kind::kRetry;
      out.detail = std::string(ErrorCodeName(res.error().code())) + ": " + res.error().message();
      return out;
    }
    if (!res->ok()) return ByStatus(*res);
    if (!bot) {
      out.kind = SendResult::Kind::kDelivered;
      return out;
    }
    // Feishu/Lark answer 200 with a code: 0 is success.
    json j = json::parse(res->body, nullptr, false);
    int64_t code = -1;
    std::string msg;
    if (j.is_object()) {
      for (const char* key : {"code", "StatusCode"}) {
        if (j.contains(key) && j[key].is_number_integer()) {
          code = j[key].get<int64_t>();
          break;
        }
      }
      for (const char* key : {"msg", "StatusMessage"}) {
        if (j.contains(key) && j[key].is_string()) {
          msg = j[key].get<std::string>();
          break;
        }
      }
    }
    out.detail = "code " + std::to_string(code) + ": " + Snippet(msg.empty() ? res->body : msg);
    if (code == 0) {
      out.kind = SendResult::Kind::kDelivered;
    } else if (code == 11232) {
      out.kind = SendResult::Kind::kRateLimited;
      out.retry_after_s = RetryAfterSeconds(*res);
    } else if (code == -1) {
      out.kind = SendResult::Kind::kRetry;  // not the bot API's answer: a proxy's page?
    } else {
      out.kind = SendResult::Kind::kRejected;
    }
    return out;
  }

  const ReceiverConfig& receiver_;
  HttpClient client_;
  std::string path_;
  std::function<int64_t()> now_s_;
};

class FileSink : public Sink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {}
  SendResult Send(const SpoolMessage& m) override {
    SendResult out;
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) {
      out.detail = "cannot open " + path_ + ": " + std::strerror(errno);
      return out;
    }
    std::string line = m.body + "\n";
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        out.detail = "cannot write " + path_ + ": " + std::strerror(errno);
        ::close(fd);
        return out;
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
      out.detail = "cannot fsync " + path_ + ": " + std::strerror(errno);
      ::close(fd);
      return out;
    }
    ::close(fd);
    out.kind = SendResult::Kind::kDelivered;
    return out;
  }

 private:
  std::string path_;
};

}  // namespace

std::string FeishuSign(int64_t timestamp, const std::string& secret) {
  const std::string key = std::to_string(timestamp) + "\n" + secret;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  static const unsigned char kEmpty[1] = {0};
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), kEmpty, 0, mac, &len);
  std::string out(4 * ((len + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), mac, static_cast<int>(len));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::unique_ptr<Sink>> MakeSink(const ReceiverConfig& r, double timeout_s,
                                       std::function<int64_t()> now_s) {
  if (r.type == ReceiverType::kFile) return std::unique_ptr<Sink>(new FileSink(r.path));
  ANXIN_ASSIGN_OR_RETURN(auto parts, SplitUrl(r.url));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto client = HttpClient::ForUrl(
      parts.first,
      {.connect_timeout = std::min(timeout, std::chrono::milliseconds(5000)), .timeout = timeout});
  if (!client) {
    return InvalidArgument("receiver '" + r.name + "': bad URL (" + client.error().message() + ")");
  }
  return std::unique_ptr<Sink>(new HttpSink(r, std::move(*client), parts.second, std::move(now_s)));
}

Clock::duration RateLimiter::Wait(Clock::time_point now) {
  while (!sent_.empty() && now - sent_.front() >= std::chrono::minutes(1)) sent_.pop_front();
  Clock::duration wait = blocked_until_ > now ? blocked_until_ - now : Clock::duration::zero();
  if (sent_.size() >= static_cast<size_t>(per_minute_)) {
    wait = std::max(wait, sent_[sent_.size() - per_minute_] + std::chrono::minutes(1) - now);
  }
  if (sent_.size() >= static_cast<size_t>(per_second_)) {
    wait = std::max(wait, sent_[sent_.size() - per_second_] + std::chrono::seconds(1) - now);
  }
  return std::max(wait, Clock::duration::zero());
}
void RateLimiter::Record(Clock::time_point now) { sent_.push_back(now); }
void RateLimiter::BlockUntil(Clock::time_point t) { blocked_until_ = std::max(blocked_until_, t); }

Result<DeliveryMetrics> DeliveryMetrics::Register(monitor::Registry& registry) {
  DeliveryMetrics m;
  ANXIN_ASSIGN_OR_RETURN(m.sent,
                         registry.AddCounter("anxin_notify_sent_messages_total",
                                             "Messages a receiver accepted.", {"receiver"}));
  ANXIN_ASSIGN_OR_RETURN(m.retried,
                         registry.AddCounter("anxin_notify_retried_messages_total",
                                             "Send attempts that will be retried, by reason "
                                             "(rate_limited, server_error, unreachable).",
                                             {"receiver", "reason"}));
  ANXIN_ASSIGN_OR_RETURN(
      m.failed,
      registry.AddCounter("anxin_notify_failed_messages_total",
                          "Messages a receiver rejected for good (dropped).", {"receiver"}));
  return m;
}

struct Dispatcher::Worker {
  const ReceiverConfig* receiver = nullptr;
  std::unique_ptr<Sink> sink;
  RateLimiter limiter{5, 100};
  bool limited = false;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool woken = false;
  std::mt19937_64 rng{std::random_device{}()};
  std::thread thread;
};

Dispatcher::Dispatcher(const NotifyConfig& config, Spool& spool, DeliveryMetrics metrics,
                       std::vector<std::unique_ptr<Sink>> sinks)
    : config_(config), spool_(spool), metrics_(metrics), given_sinks_(std::move(sinks)) {}

Dispatcher::~Dispatcher() { Stop(); }

Status Dispatcher::Start() {
  for (size_t i = 0; i < config_.receivers.size(); ++i) {
    auto w = std::make_unique<Worker>();
    w->receiver = &config_.receivers[i];
    if (i < given_sinks_.size() && given_sinks_[i]) {
      w->sink = std::move(given_sinks_[i]);
    } else {
      ANXIN_ASSIGN_OR_RETURN(w->sink, MakeSink(*w->receiver, config_.send_timeout_s));
    }
    w->limited =
        w->receiver->type == ReceiverType::kFeishu || w->receiver->type == ReceiverType::kLark;
    w->limiter = RateLimiter(config_.rate_per_second, config_.rate_per_minute);
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* raw = w.get();
    w->thread = std::thread([this, raw] { Run(*raw); });
  }
  return Ok();
}

void Dispatcher::Wake(const std::string& receiver) {
  for (auto& w : workers_) {
    if (w->receiver->name == receiver) {
      std::lock_guard lock(w->mu);
      w->woken = true;
      w->cv.notify_one();
    }
  }
}

void Dispatcher::WakeAll() {
  for (auto& w : workers_) Wake(w->receiver->name);
}

void Dispatcher::Stop() {
  for (auto& w : workers_) {
    std::lock_guard lock(w->mu);
    w->stop = true;
    w->cv.notify_one();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void Dispatcher::Run(Worker& w) {
  const std::string& name = w.receiver->name;
  // Sleeps up to d; false when stopping.
  auto sleep = [&](Clock::duration d) {
    std::unique_lock lock(w.mu);
    w.cv.wait_for(lock, d, [&] { return w.stop || w.woken; });
    w.woken = false;
    return !w.stop;
  };
  auto stopping = [&] {
    std::lock_guard lock(w.mu);
    return w.stop;
  };
  // A message sent whose deletion failed (a full disk): never sent again by
  // this process; the deletion is retried first.
  std::optional<int64_t> undeleted;
  while (!stopping()) {
    if (undeleted) {
      if (auto st = spool_.Delete(*undeleted); !st) {
        spdlog::error("notify: receiver '{}': {}", name, st.error().message());
        if (!sleep(std::chrono::seconds(1))) break;
        continue;
      }
      undeleted.reset();
    }
    auto head = spool_.Head(name);
    if (!head) {
      spdlog::error("notify: receiver '{}': {}", name, head.error().message());
      if (!sleep(std::chrono::seconds(1))) break;
      continue;
    }
    if (!*head) {
      if (!sleep(std::chrono::seconds(1))) break;
      continue;
    }
    const SpoolMessage& m = **head;
    const int64_t wait_ms = m.next_attempt_ms - UnixNowMs();
    if (wait_ms > 0) {
      // Woken early by new messages: they queue behind this one anyway.
      sleep(std::chrono::milliseconds(std::min<int64_t>(wait_ms, 1000)));
      continue;
    }
    if (w.limited) {
      const auto d = w.limiter.Wait(Clock::now());
      if (d > Clock::duration::zero()) {
        sleep(d);
        continue;
      }
      w.limiter.Record(Clock::now());
    }
    SendResult r = w.sink->Send(m);
    const std::string detail = config_.Redact(r.detail);
    Status st = Ok();
    switch (r.kind) {
      case SendResult::Kind::kDelivered:
        st = spool_.Delete(m.id);
        if (!st) undeleted = m.id;
        metrics_.sent->WithLabels({name}).Inc();
        spdlog::debug("notify: receiver '{}' took message {}", name, m.id);
        break;
      case SendResult::Kind::kRejected:
        st = spool_.Delete(m.id);
        if (!st) undeleted = m.id;
        metrics_.failed->WithLabels({name}).Inc();
        spdlog::error("notify: receiver '{}' rejected message {} (group {}): {}; dropped it", name,
                      m.id, m.group_key, detail);
        break;
      case SendResult::Kind::kRateLimited:
      case SendResult::Kind::kRetry: {
        const bool limited = r.kind == SendResult::Kind::kRateLimited;
        double delay = std::min(config_.backoff_max_s, config_.backoff_initial_s *
                                                           std::pow(2.0, std::min(m.attempts, 30)));
        // Full jitter over the upper half keeps retries of many receivers apart.
        delay *= std::uniform_real_distribution<double>(0.5, 1.0)(w.rng);
        if (r.retry_after_s > 0) delay = std::max(delay, r.retry_after_s);
        if (limited) {
          if (r.retry_after_s <= 0) delay = std::max(delay, 1.0);
          w.limiter.BlockUntil(Clock::now() +
                               std::chrono::milliseconds(static_cast<int64_t>(delay * 1000)));
        }
        const char* reason = limited                        ? "rate_limited"
                             : r.detail.starts_with("HTTP") ? "server_error"
                                                            : "unreachable";
        metrics_.retried->WithLabels({name, reason}).Inc();
        spdlog::warn("notify: receiver '{}', message {}: {} (attempt {}); retrying in {:.1f} s",
                     name, m.id, detail, m.attempts + 1, delay);
        st = spool_.Reschedule(m.id, m.attempts + 1,
                               UnixNowMs() + static_cast<int64_t>(delay * 1000));
        break;
      }
    }
    if (!st) {
      spdlog::error("notify: receiver '{}': {}", name, st.error().message());
      if (!sleep(std::chrono::seconds(1))) break;
    }
  }
}

}  // namespace anxin::notify
