#include "anxin/serve/gate/gate.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <deque>
#include <set>
#include <thread>

#include "anxin/base/config.h"
#include "anxin/base/strings.h"
#include "anxin/net/prom_text.h"

namespace anxin::serve::gate {
namespace {

using Clock = net::EventLoop::Clock;
using json = nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

json GateSnapshot::ToJson() const {
  json j = {{"in_flight", in_flight},
            {"queued", queued},
            {"max_in_flight_seen", max_in_flight_seen},
            {"max_queued_seen", max_queued_seen},
            {"admitted", admitted},
            {"forwarded_bypass", forwarded_bypass},
            {"upstream_connects", upstream_connects},
            {"upstream_reused", upstream_reused},
            {"connections_open", http.open}};
  for (const auto& [route, r] : routes) {
    json jr;
    for (const auto& [code, n] : r.codes) jr["codes"][std::to_string(code)] = n;
    for (const auto& [k, n] : r.rejected) jr["rejected"][k] = n;
    for (const auto& [k, n] : r.errors) jr["errors"][k] = n;
    j["routes"][route] = jr;
  }
  return j;
}

struct Gate::Impl {
  explicit Impl(GateOptions o) : options(std::move(o)), server(loop, options.http) {}

  struct Pending {
    net::ConnId conn = 0;
    std::string raw, route;
    bool head_request = false, client_keep_alive = true, counted = false;
    Clock::time_point received{};
    uint64_t timer = 0;
  };
  enum class State { kConnecting, kSending, kHead, kBody, kIdle };
  enum class Framing { kNone, kLength, kChunked, kClose };
  struct Upstream {
    int fd = -1;
    uint64_t watch = 0;
    State state = State::kConnecting;
    bool reused = false, forwarded = false, got_bytes = false, paused = false;
    int retries = 0;
    std::string out, in;
    size_t out_off = 0;
    Framing framing = Framing::kNone;
    uint64_t remaining = 0;
    net::ChunkedDecoder dec;
    bool response_keep_alive = true;
    std::shared_ptr<Pending> req;
    Clock::time_point started{}, last_activity{}, connect_deadline{};
  };
  struct RouteMetrics {
    GateRouteStats stats;
    net::Histogram queue_wait{&net::LatencyBuckets()}, ttfb{&net::LatencyBuckets()},
        total{&net::LatencyBuckets()};
  };

  GateOptions options;
  net::EventLoop loop;
  net::StreamServer server;
  std::thread thread;
  sockaddr_in upstream_addr{};
  uint64_t next_up = 1;
  std::unordered_map<uint64_t, Upstream> ups;
  std::unordered_map<net::ConnId, uint64_t> up_by_conn;
  std::vector<uint64_t> idle;
  std::deque<std::shared_ptr<Pending>> queue;
  std::map<std::string, RouteMetrics> routes;
  std::set<std::string> route_names;
  int in_flight = 0, max_in_flight = 0, max_queued = 0;
  uint64_t admitted = 0, bypassed = 0, connects = 0, reused = 0;
  double service_ewma = 0;  // seconds a gated request holds its slot
  uint64_t sweep_timer = 0;

  std::string RouteOf(const std::string& path) {
    if (route_names.contains(path)) return path;
    if (static_cast<int>(route_names.size()) < options.max_routes) {
      route_names.insert(path);
      return path;
    }
    return "other";
  }

  int RetryAfter() const {
    if (options.retry_after_seconds > 0) return options.retry_after_seconds;
    const double wait = service_ewma * (static_cast<double>(queue.size()) + 1) /
                        std::max(1, options.max_concurrency);
    return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 60.0));
  }

  void Reject(const std::shared_ptr<Pending>& p, const std::string& reason, std::string message) {
    RouteMetrics& rm = routes[p->route];
    ++rm.stats.rejected[reason];
    ++rm.stats.codes[429];
    json body;
    body["error"] = {{"message", message},
                     {"type", "rate_limit_exceeded"},
                     {"param", nullptr},
                     {"code", reason}};
    server.Respond(p->conn, 429, "application/json", body.dump(),
                   {{"Retry-After", std::to_string(RetryAfter())}});
  }

  void ReplyError(const std::shared_ptr<Pending>& p, int status, const std::string& kind,
                  const std::string& message) {
    RouteMetrics& rm = routes[p->route];
    ++rm.stats.errors[kind];
    ++rm.stats.codes[status];
    json body;
    body["error"] = {
        {"message", message}, {"type", "upstream_error"}, {"param", nullptr}, {"code", kind}};
    server.Respond(p->conn, status, "application/json", body.dump());
  }

  void OnRequest(net::ServerRequest& r) {
    const std::string& path = r.head.path;
    if (path == options.metrics_path) {
      server.Respond(r.conn, 200, "text/plain; version=0.0.4", Metrics());
      return;
    }
    if (path == "/gate/stats") {
      server.Respond(r.conn, 200, "application/json", Snap().ToJson().dump(2) + "\n");
      return;
    }
    auto p = std::make_shared<Pending>();
    p->conn = r.conn;
    p->raw = std::move(r.raw);
    p->route = RouteOf(path);
    p->head_request = r.head.method == "HEAD";
    p->client_keep_alive = r.head.keep_alive;
    p->received = r.received;
    if (std::find(options.bypass.begin(), options.bypass.end(), path) != options.bypass.end()) {
      ++bypassed;
      StartUpstream(p);
      return;
    }
    if (in_flight < options.max_concurrency && queue.empty()) {
      Admit(p);
      return;
    }
    if (static_cast<int>(queue.size()) >= options.max_queue) {
      Reject(p, "queue_full",
             fmt::format("{} requests are in flight and {} queued (the gate's limits): retry later",
                         in_flight, queue.size()));
      return;
    }
    p->timer = loop.RunAfter(
        std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(options.queue_timeout_seconds)),
        [this, p] {
          auto it = std::find(queue.begin(), queue.end(), p);
          if (it == queue.end()) return;
          queue.erase(it);
          p->timer = 0;
          routes[p->route].queue_wait.Observe(Seconds(Clock::now() - p->received));
          Reject(p, "queue_timeout",
                 fmt::format("waited {:g} s in the gate's queue without a free slot: retry later",
                             options.queue_timeout_seconds));
        });
    queue.push_back(p);
    max_queued = std::max(max_queued, static_cast<int>(queue.size()));
  }

  void Admit(const std::shared_ptr<Pending>& p) {
    p->counted = true;
    ++in_flight;
    ++admitted;
    max_in_flight = std::max(max_in_flight, in_flight);
    routes[p->route].queue_wait.Observe(Seconds(Clock::now() - p->received));
    StartUpstream(p);
  }

  void AdmitWaiting() {
    while (in_flight < options.max_concurrency && !queue.empty()) {
      auto p = queue.front();
      queue.pop_front();
      if (p->timer) loop.CancelTimer(p->timer);
      p->timer = 0;
      if (!server.Alive(p->conn)) continue;
      Admit(p);
    }
  }

  void Release(const std::shared_ptr<Pending>& p) {
    if (!p->counted) return;
    p->counted = false;
    --in_flight;
    const double held = Seconds(Clock::now() - p->received);
    service_ewma = service_ewma == 0 ? held : 0.9 * service_ewma + 0.1 * held;
    AdmitWaiting();
  }

  void StartUpstream(const std::shared_ptr<Pending>& p) {
    while (!idle.empty()) {
      const uint64_t id = idle.back();
      idle.pop_back();
      auto it = ups.find(id);
      if (it == ups.end()) continue;
      Upstream& u = it->second;
      ++reused;
      Begin(id, u, p, /*reused=*/true);
      u.state = State::kSending;
      WriteOut(id);
      return;
    }
    Connect(p, 0);
  }

  void Begin(uint64_t id, Upstream& u, const std::shared_ptr<Pending>& p, bool was_reused) {
    u.req = p;
    u.reused = was_reused;
    u.out = p->raw;
    u.out_off = 0;
    u.in.clear();
    u.forwarded = u.got_bytes = u.paused = false;
    u.framing = Framing::kNone;
    u.remaining = 0;
    u.dec = net::ChunkedDecoder();
    u.started = u.last_activity = Clock::now();
    up_by_conn[p->conn] = id;
  }

  void Connect(const std::shared_ptr<Pending>& p, int retries) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ReplyError(p, 503, "unreachable", "the gate is out of sockets");
      Release(p);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ++connects;
    const uint64_t id = next_up++;
    Upstream& u = ups[id];
    u.fd = fd;
    u.retries = retries;
    Begin(id, u, p, false);
    u.state = State::kConnecting;
    u.connect_deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.connect_timeout_seconds));
    const int rc =
        ::connect(fd, reinterpret_cast<const sockaddr*>(&upstream_addr), sizeof(upstream_addr));
    if (rc != 0 && errno != EINPROGRESS) {
      Fail(id, 502, "unreachable",
           fmt::format("cannot connect to the upstream {}:{}: {}", options.upstream_host,
                       options.upstream_port, std::strerror(errno)));
      return;
    }
    u.watch = loop.Watch(fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP,
                         [this, id](uint32_t ev) { OnUpEvents(id, ev); });
  }

  void SetInterest(Upstream& u) {
    uint32_t ev = EPOLLRDHUP;
    if (!u.paused) ev |= EPOLLIN;
    if (u.state == State::kConnecting || (u.state == State::kSending && u.out_off < u.out.size())) {
      ev |= EPOLLOUT;
    }
    loop.Modify(u.watch, ev);
  }

  void OnUpEvents(uint64_t id, uint32_t ev) {
    auto it = ups.find(id);
    if (it == ups.end()) return;
    Upstream& u = it->second;
    if (u.state == State::kIdle) {
      // A pooled connection that speaks or closes is no longer usable.
      CloseUpstream(id);
      return;
    }
    if (u.state == State::kConnecting) {
      if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(u.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        Fail(id, 502, "unreachable",
             fmt::format("cannot connect to the upstream {}:{}: {}", options.upstream_host,
                         options.upstream_port, std::strerror(err)));
        return;
      }
      u.state = State::kSending;
    }
    if (u.state == State::kSending && (ev & EPOLLOUT)) {
      WriteOut(id);
      if (!ups.contains(id)) return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ReadIn(id);
  }

  void WriteOut(uint64_t id) {
    Upstream& u = ups.at(id);
    while (u.out_off < u.out.size()) {
      const ssize_t n =
          ::send(u.fd, u.out.data() + u.out_off, u.out.size() - u.out_off, MSG_NOSIGNAL);
      if (n > 0) {
        u.out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      UpstreamGone(id);
      return;
    }
    if (u.out_off == u.out.size()) {
      u.out.clear();
      u.out_off = 0;
      if (u.state == State::kSending) u.state = State::kHead;
    }
    SetInterest(u);
  }

  void ReadIn(uint64_t id) {
    char buf[32768];
    for (;;) {
      auto it = ups.find(id);
      if (it == ups.end()) return;
      Upstream& u = it->second;
      if (u.paused) return;
      const ssize_t n = ::recv(u.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        u.got_bytes = true;
        u.last_activity = Clock::now();
        OnBytes(id, std::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      UpstreamGone(id);
      return;
    }
  }

  void Forward(uint64_t id, std::string_view bytes) {
    Upstream& u = ups.at(id);
    u.forwarded = true;
    const net::ConnId conn = u.req->conn;
    server.SendRaw(conn, bytes);
    // The client may have been dropped for not reading (that closes u too).
    auto it = ups.find(id);
    if (it == ups.end()) return;
    if (server.Buffered(conn) > server.buffer_limit() / 2 && !it->second.paused) {
      it->second.paused = true;
      SetInterest(it->second);
    }
  }

  void OnBytes(uint64_t id, std::string_view bytes) {
    Upstream* u = &ups.at(id);
    if (u->state == State::kSending) u->state = State::kHead;  // an early answer
    if (u->state == State::kHead) {
      u->in.append(bytes);
      for (;;) {
        net::ResponseHead head;
        size_t used = 0;
        const net::WireStatus s = net::ParseResponseHead(u->in, 64 << 10, &head, &used);
        if (s == net::WireStatus::kNeedMore) return;
        if (s != net::WireStatus::kOk) {
          Fail(id, 502, "bad_response",
               "the upstream's response is not valid HTTP/1.1: " + head.error);
          return;
        }
        RouteMetrics& rm = routes[u->req->route];
        const std::string rest = u->in.substr(used);
        if (head.status >= 100 && head.status < 200 && head.status != 101) {
          Forward(id, std::string_view(u->in).substr(0, used));
          if (!ups.contains(id)) return;
          u = &ups.at(id);
          u->in = rest;
          continue;
        }
        rm.ttfb.Observe(Seconds(Clock::now() - u->req->received));
        ++rm.stats.codes[head.status];
        if (u->req->head_request || head.status == 204 || head.status == 304 ||
            head.status == 101) {
          u->framing = Framing::kNone;
        } else if (head.chunked) {
          u->framing = Framing::kChunked;
        } else if (head.content_length) {
          u->framing = Framing::kLength;
          u->remaining = *head.content_length;
        } else {
          u->framing = Framing::kClose;
        }
        u->response_keep_alive = head.keep_alive && head.status != 101;
        u->state = State::kBody;
        Forward(id, std::string_view(u->in).substr(0, used));
        if (!ups.contains(id)) return;
        ups.at(id).in.clear();
        Body(id, rest);
        return;
      }
    }
    if (u->state == State::kBody) Body(id, bytes);
  }

  void Body(uint64_t id, std::string_view bytes) {
    Upstream& u = ups.at(id);
    switch (u.framing) {
      case Framing::kNone:
        Complete(id, bytes.empty());
        return;
      case Framing::kLength: {
        const size_t take = std::min<uint64_t>(u.remaining, bytes.size());
        u.remaining -= take;
        const bool done = u.remaining == 0;
        const bool extra = take < bytes.size();
        if (take) Forward(id, bytes.substr(0, take));
        if (!ups.contains(id)) return;
        if (done) Complete(id, !extra);
        return;
      }
      case Framing::kChunked: {
        size_t consumed = 0;
        if (u.dec.Feed(bytes, &consumed) != net::WireStatus::kOk) {
          if (consumed) Forward(id, bytes.substr(0, consumed));
          if (ups.contains(id)) Fail(id, 502, "bad_response", "malformed chunked body upstream");
          return;
        }
        const bool done = u.dec.done();
        const bool extra = consumed < bytes.size();
        if (consumed) Forward(id, bytes.substr(0, consumed));
        if (!ups.contains(id)) return;
        if (done) Complete(id, !extra);
        return;
      }
      case Framing::kClose:
        if (!bytes.empty()) Forward(id, bytes);
        return;
    }
  }

  // The response is complete; reuse the upstream connection when it can be.
  void Complete(uint64_t id, bool reusable) {
    Upstream& u = ups.at(id);
    auto p = u.req;
    RouteMetrics& rm = routes[p->route];
    rm.total.Observe(Seconds(Clock::now() - p->received));
    up_by_conn.erase(p->conn);
    const bool close_client = !p->client_keep_alive || u.framing == Framing::kClose;
    const bool keep = reusable && u.response_keep_alive && u.framing != Framing::kClose &&
                      static_cast<int>(idle.size()) < options.max_idle_upstream;
    u.req.reset();
    if (keep) {
      u.state = State::kIdle;
      u.paused = false;
      u.last_activity = Clock::now();
      SetInterest(u);
      idle.push_back(id);
    } else {
      CloseUpstream(id);
    }
    server.FinishRaw(p->conn, !close_client);
    Release(p);
  }

  void UpstreamGone(uint64_t id) {
    Upstream& u = ups.at(id);
    if (u.state == State::kBody && u.framing == Framing::kClose) {
      Complete(id, false);
      return;
    }
    if (!u.got_bytes && u.reused && u.retries == 0 && u.req) {
      // A kept-alive connection the upstream had closed: try once afresh.
      auto p = u.req;
      up_by_conn.erase(p->conn);
      u.req.reset();
      CloseUpstream(id);
      Connect(p, 1);
      return;
    }
    Fail(id, 502, u.forwarded ? "truncated" : "upstream_closed",
         "the upstream closed the connection before the response was complete");
  }

  // Ends the exchange: the client gets an error status if nothing was
  // forwarded yet, else its connection is closed (the response is cut short).
  void Fail(uint64_t id, int status, const std::string& kind, const std::string& message) {
    auto it = ups.find(id);
    if (it == ups.end()) return;
    auto p = it->second.req;
    const bool forwarded = it->second.forwarded;
    it->second.req.reset();
    CloseUpstream(id);
    if (!p) return;
    up_by_conn.erase(p->conn);
    if (!forwarded) {
      ReplyError(p, status, kind, message);
    } else {
      ++routes[p->route].stats.errors[kind];
      server.Close(p->conn);
    }
    Release(p);
  }

  void CloseUpstream(uint64_t id) {
    auto it = ups.find(id);
    if (it == ups.end()) return;
    if (it->second.watch) loop.Unwatch(it->second.watch);
    ::close(it->second.fd);
    if (it->second.req) up_by_conn.erase(it->second.req->conn);
    ups.erase(it);
  }

  void OnClientClose(net::ConnId conn) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if ((*it)->conn == conn) {
        auto p = *it;
        queue.erase(it);
        if (p->timer) loop.CancelTimer(p->timer);
        ++routes[p->route].stats.errors["client_gone"];
        return;
      }
    }
    auto u = up_by_conn.find(conn);
    if (u == up_by_conn.end()) return;
    const uint64_t id = u->second;
    up_by_conn.erase(u);
    auto it = ups.find(id);
    if (it == ups.end()) return;
    auto p = it->second.req;
    it->second.req.reset();
    CloseUpstream(id);  // the server sees the close and stops generating
    if (p) {
      ++routes[p->route].stats.errors["client_gone"];
      Release(p);
    }
  }

  void OnDrain(net::ConnId conn) {
    auto u = up_by_conn.find(conn);
    if (u == up_by_conn.end()) return;
    auto it = ups.find(u->second);
    if (it == ups.end() || !it->second.paused) return;
    it->second.paused = false;
    SetInterest(it->second);
    ReadIn(u->second);
  }

  void Sweep() {
    const auto now = Clock::now();
    const auto idle_limit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options.upstream_idle_timeout_seconds));
    std::vector<std::pair<uint64_t, int>> expired;  // id, 0 connect / 1 idle / 2 pooled
    for (const auto& [id, u] : ups) {
      if (u.state == State::kConnecting && now > u.connect_deadline)
        expired.push_back({id, 0});
      else if (u.state == State::kIdle && now - u.last_activity > std::chrono::seconds(60))
        expired.push_back({id, 2});
      else if (u.state != State::kIdle && !u.paused && now - u.last_activity > idle_limit)
        expired.push_back({id, 1});
    }
    for (const auto& [id, kind] : expired) {
      if (kind == 2) {
        CloseUpstream(id);
      } else if (kind == 0) {
        Fail(id, 504, "timeout",
             fmt::format("no connection to the upstream {}:{} within {:g} s", options.upstream_host,
                         options.upstream_port, options.connect_timeout_seconds));
      } else {
        Fail(id, 504, "timeout",
             fmt::format("the upstream sent nothing for {:g} s",
                         options.upstream_idle_timeout_seconds));
      }
    }
    sweep_timer = loop.RunAfter(std::chrono::milliseconds(250), [this] { Sweep(); });
  }

  GateSnapshot Snap() const {
    GateSnapshot s;
    s.in_flight = in_flight;
    s.queued = static_cast<int>(queue.size());
    s.max_in_flight_seen = max_in_flight;
    s.max_queued_seen = max_queued;
    s.admitted = admitted;
    s.forwarded_bypass = bypassed;
    s.upstream_connects = connects;
    s.upstream_reused = reused;
    for (const auto& [route, rm] : routes) s.routes[route] = rm.stats;
    s.http = server.stats();
    return s;
  }

  std::string Metrics() const {
    net::PromText p;
    for (const auto& [route, rm] : routes)
      for (const auto& [code, n] : rm.stats.codes)
        p.Counter("anxin_gate_requests_total", "Responses by route and status",
                  {{"route", route}, {"code", std::to_string(code)}}, n);
    for (const auto& [route, rm] : routes)
      for (const auto& [reason, n] : rm.stats.rejected)
        p.Counter("anxin_gate_rejected_total", "Requests answered 429 by the gate",
                  {{"route", route}, {"reason", reason}}, n);
    for (const auto& [route, rm] : routes)
      for (const auto& [kind, n] : rm.stats.errors)
        p.Counter("anxin_gate_upstream_errors_total", "Exchanges that failed, by kind",
                  {{"route", route}, {"kind", kind}}, n);
    for (const auto& [route, rm] : routes)
      if (rm.queue_wait.count())
        p.Histogram("anxin_gate_queue_wait_seconds", "Time from arrival to a free slot",
                    {{"route", route}}, rm.queue_wait);
    for (const auto& [route, rm] : routes)
      if (rm.ttfb.count())
        p.Histogram("anxin_gate_time_to_first_byte_seconds",
                    "Time from arrival to the upstream's response head", {{"route", route}},
                    rm.ttfb);
    for (const auto& [route, rm] : routes)
      if (rm.total.count())
        p.Histogram("anxin_gate_request_seconds", "Time from arrival to the last byte",
                    {{"route", route}}, rm.total);
    p.Gauge("anxin_gate_in_flight", "Gated requests upstream now", {}, in_flight);
    p.Gauge("anxin_gate_in_flight_max", "Most gated requests upstream at once", {}, max_in_flight);
    p.Gauge("anxin_gate_queue_depth", "Requests waiting for a slot", {}, queue.size());
    p.Gauge("anxin_gate_max_concurrency", "The concurrency cap", {}, options.max_concurrency);
    p.Gauge("anxin_gate_max_queue", "The queue's capacity", {}, options.max_queue);
    p.Counter("anxin_gate_upstream_connections_total", "Upstream connections opened", {}, connects);
    p.Gauge("anxin_gate_connections_open", "Open client connections", {}, server.stats().open);
    return p.str();
  }
};

Gate::Gate(GateOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Gate::~Gate() { Stop(); }

Status Gate::Start() {
  Impl& m = *impl_;
  const GateOptions& o = m.options;
  if (o.max_concurrency < 1) return InvalidArgument("--max-concurrency must be at least 1");
  if (o.max_queue < 0) return InvalidArgument("--max-queue must not be negative");
  if (!(o.queue_timeout_seconds > 0)) return InvalidArgument("--queue-timeout must be positive");
  m.upstream_addr.sin_family = AF_INET;
  m.upstream_addr.sin_port = htons(static_cast<uint16_t>(o.upstream_port));
  if (o.upstream_port <= 0 || o.upstream_port > 65535 ||
      ::inet_pton(AF_INET, o.upstream_host.c_str(), &m.upstream_addr.sin_addr) != 1) {
    return InvalidArgument(
        fmt::format("upstream {}:{}: give an IPv4 address and a port, e.g. http://127.0.0.1:8000",
                    o.upstream_host, o.upstream_port));
  }
  ANXIN_TRY(m.loop.Init());
  m.server.set_on_request([&m](net::ServerRequest& r) { m.OnRequest(r); });
  m.server.set_on_close([&m](net::ConnId c) { m.OnClientClose(c); });
  m.server.set_on_drain([&m](net::ConnId c) { m.OnDrain(c); });
  ANXIN_TRY(m.server.Listen());
  m.sweep_timer = m.loop.RunAfter(std::chrono::milliseconds(250), [&m] { m.Sweep(); });
  m.thread = std::thread([&m] { m.loop.Run(); });
  return Ok();
}

void Gate::Stop() {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  m.loop.Post([&m] {
    m.server.Shutdown();
    std::vector<uint64_t> ids;
    for (const auto& [id, u] : m.ups) ids.push_back(id);
    for (uint64_t id : ids) m.CloseUpstream(id);
  });
  m.loop.Stop();
  m.thread.join();
}

int Gate::port() const { return impl_->server.port(); }

GateSnapshot Gate::Snapshot() const {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return m.Snap();
  return m.loop.CallAndWait([&m] { return m.Snap(); }, std::chrono::seconds(10))
      .value_or(GateSnapshot{});
}

std::string Gate::MetricsText() const {
  Impl& m = *impl_;
  return m.loop.CallAndWait([&m] { return m.Metrics(); }, std::chrono::seconds(10)).value_or("");
}

namespace {

Status ParseUpstream(const std::string& url, GateOptions& o) {
  std::string_view s = url;
  if (s.starts_with("https://")) {
    return InvalidArgument(
        "--upstream: https is not proxied; point the gate at the server's "
        "plain-HTTP port");
  }
  if (s.starts_with("http://")) s.remove_prefix(7);
  if (!s.empty() && s.back() == '/') s.remove_suffix(1);
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || s.find('/') != std::string_view::npos) {
    return InvalidArgument(fmt::format(
        "--upstream '{}': give http://HOST:PORT with an IPv4 address, e.g. http://127.0.0.1:8000",
        url));
  }
  o.upstream_host = std::string(s.substr(0, colon));
  if (o.upstream_host == "localhost") o.upstream_host = "127.0.0.1";
  int port = 0;
  auto [p, ec] = std::from_chars(s.data() + colon + 1, s.data() + s.size(), port);
  if (ec != std::errc() || p != s.data() + s.size() || port <= 0 || port > 65535) {
    return InvalidArgument(fmt::format("--upstream '{}': bad port", url));
  }
  o.upstream_port = port;
  return Ok();
}

}  // namespace

Result<GateOptions> MakeGateOptions(const GateRequest& r) {
  GateOptions go;
  ANXIN_TRY(ParseUpstream(r.upstream, go));
  go.http.host = r.host;
  go.http.port = r.port;
  go.max_concurrency = r.max_concurrency;
  go.max_queue = r.max_queue;
  go.retry_after_seconds = r.retry_after;
  go.metrics_path = r.metrics_path;
  struct {
    const std::string& text;
    const char* flag;
    double* out;
  } durations[] = {{r.queue_timeout, "--queue-timeout", &go.queue_timeout_seconds},
                   {r.connect_timeout, "--connect-timeout", &go.connect_timeout_seconds},
                   {r.idle_timeout, "--upstream-idle-timeout", &go.upstream_idle_timeout_seconds}};
  for (auto& d : durations) {
    auto v = ParseSeconds(d.text);
    if (!v) return std::unexpected(v.error().With(d.flag));
    *d.out = *v;
  }
  go.bypass.clear();
  for (std::string_view item : Split(r.bypass, ',')) {
    if (!item.empty()) go.bypass.emplace_back(item);
  }
  return go;
}

}  // namespace anxin::serve::gate
