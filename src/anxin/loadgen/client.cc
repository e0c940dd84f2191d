#include "anxin/loadgen/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <queue>

#include "anxin/base/url.h"
#include "anxin/loadgen/sse.h"
#include "anxin/net/event_loop.h"
#include "anxin/net/http_response.h"

namespace anxin::loadgen {
namespace {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ThreadCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

Result<sockaddr_in> Resolve(const Target& target) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(target.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable(fmt::format("cannot resolve host '{}': {} (check the --url)", target.host,
                                   gai_strerror(rc)));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  addr.sin_port = htons(target.port);
  return addr;
}

class Loop;

// One request in flight: receives the response body and its events.
struct Active final : net::BodySink, SseSink {
  Loop* loop = nullptr;
  int64_t rec = -1;
  int64_t deadline_ns = 0;
  bool mode_set = false;
  bool streaming = false;  // a 2xx text/event-stream body
  SseParser sse;
  std::string body;  // the non-streamed body (or an error body, capped)
  std::string text;  // generated text, when a tokenizer counts it
  bool got_done = false;
  int64_t usage_prompt = -1, usage_completion = -1;
  int64_t text_chunks = 0;
  size_t text_bytes = 0;
  std::string error, detail;  // the first failure seen inside the body
  int attempts = 0;

  void OnHead(const net::ResponseHead& head) override;
  void OnBody(std::string_view bytes) override;
  void OnEvent(std::string_view data) override;
};

struct Conn {
  int fd = -1;
  uint64_t id = 0;     // unique per connection, unlike fd
  uint64_t watch = 0;  // the event loop's watch of fd
  enum class State { kConnecting, kWriting, kReading, kIdle } state = State::kConnecting;
  std::string out;
  size_t out_off = 0;
  net::ResponseReader parser;
  bool reused = false;
  bool got_bytes = false;
  std::unique_ptr<Active> active;
};

class Loop {
 public:
  Loop(const std::vector<Prompt>& prompts, const LoadOptions& o, sockaddr_in addr)
      : prompts_(prompts), o_(o), addr_(addr) {}
  ~Loop();

  Result<RunResult> Run();

  // For Active.
  int64_t now() const { return now_; }
  const LoadOptions& options() const { return o_; }
  RequestRecord& record(int64_t i) { return records_[static_cast<size_t>(i)]; }
  void ChunkEvent(Active& a, std::string_view data);

 private:
  void Tick() { now_ = MonotonicNs() - start_; }
  void Send(int64_t rec, int attempts);
  Conn* OpenConn(int64_t rec, std::string* error);
  void TryWrite(Conn* c);
  void TryRead(Conn* c);
  void OnEvent(Conn* c, uint32_t events);
  void Complete(Conn* c);
  void Fail(Conn* c, std::string kind, std::string detail);
  void Finish(Conn* c, bool reuse);
  void CloseConn(Conn* c);
  // The kept-alive connection died before the request's first byte came
  // back: closes it and sends the request once more on a fresh one.
  void RetryOnNewConnection(Conn* c);
  void StartNext();
  // Stops sending and ends every open request as cancelled.
  void Cancel();
  std::string BuildRequest(const Prompt& p) const;

  // Per round of the event loop: what became due, the stop flag, progress;
  // returns when the loop must wake next.
  int64_t Round();

  const std::vector<Prompt>& prompts_;
  const LoadOptions& o_;
  sockaddr_in addr_;
  net::EventLoop loop_;
  int64_t next_progress_ = 0;
  int64_t stop_at_ = -1;
  int64_t start_ = 0;
  int64_t now_ = 0;
  std::vector<RequestRecord> records_;
  std::vector<int64_t> offsets_ns_;
  std::vector<Conn*> conn_of_rec_;
  std::vector<std::unique_ptr<Conn>> conns_;     // by fd
  std::vector<int> idle_;                        // fds of kept-alive connections
  std::deque<int64_t> waiting_;                  // due, waiting for a slot under the cap
  using Deadline = std::pair<int64_t, int64_t>;  // (deadline, record)
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<>> deadlines_;
  int64_t next_ = 0;   // next prompt to become due
  int64_t limit_ = 0;  // prompts that will be sent (shrinks when --duration ends)
  int64_t open_ = 0;   // requests sent and not finished
  int64_t finished_ = 0;
  int64_t failed_ = 0;
  int64_t end_ns_ = 0;
  uint64_t next_conn_id_ = 0;
  std::string request_head_;
  LoopStats stats_;
  std::vector<char> buf_ = std::vector<char>(256 * 1024);
};

void Active::OnHead(const net::ResponseHead& head) {
  RequestRecord& r = loop->record(rec);
  r.http_status = head.status;
  mode_set = true;
  streaming = head.status / 100 == 2 && head.MediaType() == "text/event-stream";
}

void Active::OnBody(std::string_view bytes) {
  if (streaming) {
    if (!error.empty()) return;
    if (auto s = sse.Feed(bytes, *this); !s) {
      error = "malformed_event";
      detail = s.error().message();
    }
    return;
  }
  size_t cap = loop->record(rec).http_status / 100 == 2 ? (size_t{64} << 20) : 4096;
  if (body.size() < cap) body.append(bytes.substr(0, cap - body.size()));
}

void Active::OnEvent(std::string_view data) { loop->ChunkEvent(*this, data); }

void Loop::ChunkEvent(Active& a, std::string_view data) {
  if (!a.error.empty()) return;
  Chunk c = ParseChunk(o_.request.api, data, o_.tokenizer != nullptr);
  RequestRecord& r = record(a.rec);
  switch (c.kind) {
    case Chunk::kDone:
      a.got_done = true;
      return;
    case Chunk::kError:
      a.error = "server_error";
      a.detail = c.message;
      return;
    case Chunk::kMalformed:
      a.error = "malformed_event";
      a.detail = c.message;
      return;
    case Chunk::kData:
      break;
  }
  if (c.prompt_tokens >= 0) a.usage_prompt = c.prompt_tokens;
  if (c.completion_tokens >= 0) a.usage_completion = c.completion_tokens;
  if (c.text_bytes > 0) {
    if (r.first_token_ns < 0) r.first_token_ns = now_;
    r.chunk_ns.push_back(now_);
    ++a.text_chunks;
    a.text_bytes += c.text_bytes;
    if (o_.tokenizer) a.text += c.text;
  }
}

Loop::~Loop() {
  for (auto& c : conns_) {
    if (c && c->fd >= 0) ::close(c->fd);
  }
}

std::string Loop::BuildRequest(const Prompt& p) const {
  std::string body = BuildBody(o_.request, p.text, p.output_tokens);
  std::string req = request_head_;
  req += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  req += body;
  return req;
}

Conn* Loop::OpenConn(int64_t rec, std::string* error) {
  (void)rec;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = fmt::format("socket: {}", std::strerror(errno));
    return nullptr;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto conn = std::make_unique<Conn>();
  conn->fd = fd;
  conn->id = ++next_conn_id_;
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof(addr_));
  if (rc < 0 && errno != EINPROGRESS) {
    *error =
        fmt::format("connect to {}:{}: {}", o_.target.host, o_.target.port, std::strerror(errno));
    ::close(fd);
    return nullptr;
  }
  conn->state = rc == 0 ? Conn::State::kWriting : Conn::State::kConnecting;
  Conn* raw = conn.get();
  conn->watch = loop_.Watch(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            [this, raw](uint32_t events) { OnEvent(raw, events); });
  if (conn->watch == 0) {
    *error = fmt::format("epoll_ctl: {}", std::strerror(errno));
    ::close(fd);
    return nullptr;
  }
  ++stats_.connections;
  if (conns_.size() <= static_cast<size_t>(fd)) conns_.resize(static_cast<size_t>(fd) + 1);
  conns_[static_cast<size_t>(fd)] = std::move(conn);
  return conns_[static_cast<size_t>(fd)].get();
}

void Loop::Send(int64_t rec, int attempts) {
  RequestRecord& r = record(rec);
  if (attempts == 0) {
    r.sent_ns = now_;
    ++open_;
    stats_.peak_open = std::max(stats_.peak_open, open_);
    deadlines_.push({now_ + static_cast<int64_t>(o_.timeout_s * 1e9), rec});
  }
  Conn* c = nullptr;
  while (!idle_.empty() && attempts == 0) {
    int fd = idle_.back();
    idle_.pop_back();
    Conn* cand =
        static_cast<size_t>(fd) < conns_.size() ? conns_[static_cast<size_t>(fd)].get() : nullptr;
    if (cand && cand->state == Conn::State::kIdle && !cand->active) {
      c = cand;
      c->reused = true;
      c->state = Conn::State::kWriting;
      break;
    }
  }
  std::string error;
  if (!c) c = OpenConn(rec, &error);
  auto active = std::make_unique<Active>();
  active->loop = this;
  active->rec = rec;
  active->attempts = attempts;
  if (!c) {
    // Count it like any failed request; there is no connection to release.
    r.error = "connect";
    r.error_detail = error;
    r.end_ns = now_;
    --open_;
    ++finished_;
    ++failed_;
    end_ns_ = std::max(end_ns_, now_);
    return;
  }
  c->active = std::move(active);
  c->parser.Reset();
  c->got_bytes = false;
  c->out = BuildRequest(prompts_[static_cast<size_t>(rec)]);
  c->out_off = 0;
  conn_of_rec_[static_cast<size_t>(rec)] = c;
  if (c->state == Conn::State::kWriting) TryWrite(c);
}

void Loop::RetryOnNewConnection(Conn* c) {
  int64_t rec = c->active->rec;
  c->active.reset();
  CloseConn(c);
  ++stats_.retries;
  Send(rec, 1);
}

void Loop::TryWrite(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = ::send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      if (c->reused && c->active && c->active->attempts == 0) {
        // The server closed the kept-alive connection before we used it.
        RetryOnNewConnection(c);
        return;
      }
      Fail(c, "dropped", fmt::format("sending the request: {}", std::strerror(errno)));
      return;
    }
    c->out_off += static_cast<size_t>(n);
  }
  c->out.clear();
  c->out_off = 0;
  // The response arrives as a new readable edge; reading here could recurse
  // through the next request on this connection.
  c->state = Conn::State::kReading;
}

void Loop::TryRead(Conn* c) {
  while (true) {
    ssize_t n = ::recv(c->fd, buf_.data(), buf_.size(), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      if (!c->active) {
        CloseConn(c);
        return;
      }
      if (c->reused && !c->got_bytes && c->active->attempts == 0) {
        RetryOnNewConnection(c);
        return;
      }
      Fail(c, "dropped", fmt::format("reading the response: {}", std::strerror(errno)));
      return;
    }
    Tick();
    if (!c->active) {
      // Bytes or a close on an idle kept-alive connection: it is done for.
      CloseConn(c);
      return;
    }
    if (n == 0) {
      if (c->reused && !c->got_bytes && c->active->attempts == 0) {
        RetryOnNewConnection(c);
        return;
      }
      if (auto s = c->parser.Finish(); !s) {
        Fail(c, "dropped", s.error().message());
        return;
      }
      Complete(c);
      return;
    }
    c->got_bytes = true;
    Active& a = *c->active;
    // The head reaches a.OnHead first, which routes the body by status and
    // content type.
    if (auto st = c->parser.Feed(std::string_view(buf_.data(), static_cast<size_t>(n)), a); !st) {
      Fail(c, "malformed_http", st.error().message());
      return;
    }
    if (!a.error.empty()) {
      Fail(c, a.error, a.detail);
      return;
    }
    if (c->parser.done()) {
      Complete(c);
      return;
    }
  }
}

void Loop::Complete(Conn* c) {
  Active& a = *c->active;
  RequestRecord& r = record(a.rec);
  r.http_status = c->parser.status();
  if (r.http_status / 100 != 2) {
    std::string detail = a.body;
    Chunk parsed = ParseChunk(o_.request.api, a.body, false);
    if (parsed.kind == Chunk::kError) detail = parsed.message;
    if (detail.size() > 200) detail = detail.substr(0, 200) + "...";
    Fail(c, fmt::format("http_{}", r.http_status), detail);
    return;
  }
  if (!a.error.empty()) {
    Fail(c, a.error, a.detail);
    return;
  }
  if (a.streaming && a.sse.has_pending()) {
    // A last event without its blank line: the body's end completes it.
    if (auto s = a.sse.Feed("\n\n", a); !s) {
      Fail(c, "malformed_event", s.error().message());
      return;
    }
    if (!a.error.empty()) {
      Fail(c, a.error, a.detail);
      return;
    }
  }
  if (!a.streaming) {
    Chunk parsed = ParseChunk(o_.request.api, a.body, o_.tokenizer != nullptr);
    if (parsed.kind == Chunk::kError) {
      Fail(c, "server_error", parsed.message);
      return;
    }
    if (parsed.kind != Chunk::kData) {
      Fail(c, "malformed_event", parsed.message);
      return;
    }
    if (parsed.prompt_tokens >= 0) a.usage_prompt = parsed.prompt_tokens;
    if (parsed.completion_tokens >= 0) a.usage_completion = parsed.completion_tokens;
    a.text_bytes = parsed.text_bytes;
    a.text = std::move(parsed.text);
    if (parsed.text_bytes > 0) {
      r.first_token_ns = now_;
      r.chunk_ns.push_back(now_);
    }
  } else if (o_.request.api != Api::kTriton && !a.got_done) {
    Fail(c, "incomplete", "the event stream ended without data: [DONE]");
    return;
  }
  const Prompt& p = prompts_[static_cast<size_t>(a.rec)];
  if (a.usage_prompt >= 0) {
    r.input_tokens = a.usage_prompt;
    r.input_source = TokenSource::kUsage;
  } else {
    r.input_tokens = p.input_tokens;
    r.input_source = o_.tokenizer ? TokenSource::kTokenizer : TokenSource::kEstimate;
  }
  if (a.usage_completion >= 0) {
    r.output_tokens = a.usage_completion;
    r.output_source = TokenSource::kUsage;
  } else if (o_.tokenizer) {
    r.output_tokens = o_.tokenizer->Count(a.text);
    r.output_source = TokenSource::kTokenizer;
  } else {
    // One token per streamed chunk (servers stream token by token), or one
    // per 4 bytes of a whole body.
    r.output_tokens = a.streaming ? a.text_chunks : static_cast<int64_t>((a.text_bytes + 3) / 4);
    r.output_source = TokenSource::kEstimate;
  }
  r.end_ns = now_;
  Finish(c, o_.keep_alive && c->parser.keep_alive());
}

void Loop::Fail(Conn* c, std::string kind, std::string detail) {
  RequestRecord& r = record(c->active->rec);
  r.error = std::move(kind);
  r.error_detail = std::move(detail);
  r.end_ns = now_;
  ++failed_;
  Finish(c, false);
}

void Loop::Finish(Conn* c, bool reuse) {
  int64_t rec = c->active->rec;
  conn_of_rec_[static_cast<size_t>(rec)] = nullptr;
  c->active.reset();
  --open_;
  ++finished_;
  end_ns_ = std::max(end_ns_, now_);
  if (reuse) {
    c->state = Conn::State::kIdle;
    c->parser.Reset();
    idle_.push_back(c->fd);
  } else {
    CloseConn(c);
  }
  // The main loop starts the next request: starting it here could recurse
  // without bound when every connection fails at once.
}

void Loop::CloseConn(Conn* c) {
  int fd = c->fd;
  loop_.Unwatch(c->watch);
  ::close(fd);
  conns_[static_cast<size_t>(fd)].reset();
}

void Loop::StartNext() {
  if (o_.arrivals.open_loop()) {
    while (!waiting_.empty() && (o_.arrivals.concurrency <= 0 || open_ < o_.arrivals.concurrency)) {
      int64_t rec = waiting_.front();
      waiting_.pop_front();
      Send(rec, 0);
    }
    return;
  }
  while (next_ < limit_ && open_ < std::max<int64_t>(1, o_.arrivals.concurrency)) {
    int64_t rec = next_++;
    record(rec).due_ns = now_;
    Send(rec, 0);
  }
}

void Loop::Cancel() {
  limit_ = next_;
  while (!waiting_.empty()) {
    RequestRecord& r = record(waiting_.front());
    waiting_.pop_front();
    r.error = "cancelled";
    r.error_detail = "the run was stopped before this request was sent";
    r.end_ns = now_;
    ++finished_;
    ++failed_;
  }
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn* c = conns_[i].get();
    if (c && c->active) Fail(c, "cancelled", "the run was stopped while this request was open");
  }
}

void Loop::OnEvent(Conn* c, uint32_t events) {
  Tick();
  if (c->state == Conn::State::kConnecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      Fail(c, "connect",
           fmt::format("connect to {}:{}: {}", o_.target.host, o_.target.port, std::strerror(err)));
      return;
    }
    c->state = Conn::State::kWriting;
    TryWrite(c);
    return;
  }
  if (c->state == Conn::State::kWriting && (events & EPOLLOUT)) {
    // TryWrite may close c (and a retry may reuse its descriptor).
    const int fd = c->fd;
    const uint64_t id = c->id;
    TryWrite(c);
    if (!conns_[static_cast<size_t>(fd)] || conns_[static_cast<size_t>(fd)]->id != id) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) TryRead(c);
}

int64_t Loop::Round() {
  Tick();
  if (stop_at_ >= 0 && now_ >= stop_at_ && limit_ > next_) limit_ = next_;
  if (o_.stop.stop_requested()) Cancel();
  if (o_.arrivals.open_loop()) {
    while (next_ < limit_ && offsets_ns_[static_cast<size_t>(next_)] <= now_) {
      record(next_).due_ns = offsets_ns_[static_cast<size_t>(next_)];
      waiting_.push_back(next_++);
    }
  }
  StartNext();
  while (!deadlines_.empty() && deadlines_.top().first <= now_) {
    int64_t rec = deadlines_.top().second;
    deadlines_.pop();
    Conn* c = conn_of_rec_[static_cast<size_t>(rec)];
    if (c) {
      Fail(c, "timeout", fmt::format("no complete response {:g} s after sending", o_.timeout_s));
    }
  }
  if (o_.progress && now_ >= next_progress_) {
    o_.progress({now_ * 1e-9, limit_, next_, finished_, failed_, open_});
    next_progress_ = now_ + static_cast<int64_t>(o_.progress_interval_s * 1e9);
  }
  if (next_ >= limit_ && open_ == 0 && waiting_.empty()) {
    loop_.Stop();
    return std::numeric_limits<int64_t>::max();
  }
  int64_t wake = next_progress_;
  if (!deadlines_.empty()) wake = std::min(wake, deadlines_.top().first);
  if (o_.arrivals.open_loop() && next_ < limit_) {
    wake = std::min(wake, offsets_ns_[static_cast<size_t>(next_)]);
  }
  if (stop_at_ >= 0 && limit_ > next_) wake = std::min(wake, stop_at_);
  return wake;
}

Result<RunResult> Loop::Run() {
  const int64_t n = static_cast<int64_t>(prompts_.size());
  records_.resize(static_cast<size_t>(n));
  conn_of_rec_.assign(static_cast<size_t>(n), nullptr);
  for (int64_t i = 0; i < n; ++i) {
    records_[static_cast<size_t>(i)].index = i;
    records_[static_cast<size_t>(i)].requested_tokens =
        prompts_[static_cast<size_t>(i)].output_tokens;
  }
  limit_ = n;
  if (o_.arrivals.open_loop()) {
    for (double s : ArrivalOffsets(o_.arrivals, n, o_.seed)) {
      offsets_ns_.push_back(static_cast<int64_t>(s * 1e9));
    }
  }
  std::string path = o_.target.path.empty() ? DefaultPath(o_.request) : o_.target.path;
  request_head_ = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nAccept: {}\r\n"
      "User-Agent: anxin-bench-serve\r\n",
      path, o_.target.host, o_.target.port,
      o_.request.stream ? "text/event-stream" : "application/json");
  if (!o_.keep_alive) request_head_ += "Connection: close\r\n";
  for (const auto& [k, v] : o_.headers) request_head_ += k + ": " + v + "\r\n";

  ANXIN_TRY(loop_.Init());
  double cpu0 = ThreadCpuSeconds();
  start_ = MonotonicNs();
  now_ = 0;
  // Without a progress callback nothing is due then: the loop sleeps until a
  // socket, an arrival or a deadline needs it.
  next_progress_ = o_.progress ? static_cast<int64_t>(o_.progress_interval_s * 1e9)
                               : std::numeric_limits<int64_t>::max();
  stop_at_ = o_.duration_s > 0 ? static_cast<int64_t>(o_.duration_s * 1e9) : -1;
  const net::EventLoop::Clock::time_point start{std::chrono::nanoseconds(start_)};
  loop_.SetRoundHook([this, start] {
    const int64_t wake = Round();
    if (wake == std::numeric_limits<int64_t>::max())
      return net::EventLoop::Clock::time_point::max();
    return start + std::chrono::nanoseconds(wake);
  });
  // A stop from another thread wakes the loop; its round sees the request.
  std::stop_callback wake(o_.stop, [this] { loop_.Post([] {}); });
  loop_.Run();
  if (!loop_.run_status()) return std::unexpected(loop_.run_status().error());
  stats_.wakeups = static_cast<int64_t>(loop_.wakeups());
  RunResult result;
  stats_.cpu_s = ThreadCpuSeconds() - cpu0;
  stats_.wall_s = (MonotonicNs() - start_) * 1e-9;
  records_.resize(static_cast<size_t>(limit_));
  result.records = std::move(records_);
  result.duration_s = end_ns_ * 1e-9;
  result.loop = stats_;
  return result;
}

}  // namespace

Result<Target> ParseUrl(std::string_view url) {
  // One reading of an address across anxin (base/url.h): no scheme is http://.
  ANXIN_ASSIGN_OR_RETURN(HttpUrl u, ParseHttpUrl(url));
  if (u.scheme == "https") {
    return Unimplemented(fmt::format(
        "{}: https is not supported; use the server's plain-HTTP port or a TLS-terminating "
        "proxy in front of it",
        url));
  }
  Target t;
  t.host = u.host;
  t.port = static_cast<uint16_t>(u.port);
  if (u.path != "/") t.path = u.path;
  return t;
}

Status ProbeServer(const Target& target, double timeout_s) {
  ANXIN_ASSIGN_OR_RETURN(sockaddr_in addr, Resolve(target));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "socket"));
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  int err = rc == 0 ? 0 : errno;
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int got = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
    if (got == 0) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  ::close(fd);
  if (err != 0) {
    return Unavailable(fmt::format("cannot connect to {}:{}: {} (is the server running?)",
                                   target.host, target.port, std::strerror(err)));
  }
  return Ok();
}

Result<RunResult> RunLoad(const std::vector<Prompt>& prompts, const LoadOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(sockaddr_in addr, Resolve(options.target));
  net::RaiseOpenFileLimit();
  Loop loop(prompts, options, addr);
  return loop.Run();
}

}  // namespace anxin::loadgen
