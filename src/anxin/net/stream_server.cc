#include "anxin/net/stream_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace anxin::net {

StreamServer::StreamServer(EventLoop& loop, StreamServerOptions options)
    : loop_(loop), options_(std::move(options)) {}

StreamServer::~StreamServer() { Shutdown(); }

Status StreamServer::Listen() {
  RaiseOpenFileLimit();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.port));
  if (::inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument(
        fmt::format("'{}' is not an IPv4 address (use 127.0.0.1 or 0.0.0.0)", options_.host));
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return std::unexpected(ErrnoError(errno, "socket"));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    listen_fd_ = -1;
    return Unavailable(
        fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, std::strerror(e)));
  }
  if (::listen(listen_fd_, 4096) != 0) return std::unexpected(ErrnoError(errno, "listen"));
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  listen_watch_ = loop_.Watch(listen_fd_, EPOLLIN, [this](uint32_t) { Accept(); });
  sweep_timer_ = loop_.RunAfter(std::chrono::seconds(1), [this] { Sweep(); });
  return Ok();
}

void StreamServer::Shutdown() {
  if (listen_fd_ >= 0) {
    loop_.Unwatch(listen_watch_);
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  if (sweep_timer_) loop_.CancelTimer(sweep_timer_);
  sweep_timer_ = 0;
  std::vector<ConnId> ids;
  for (auto& [id, c] : conns_) ids.push_back(id);
  for (ConnId id : ids) Close(id);
}

void StreamServer::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or out of descriptors: try again on the next event
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      ++stats_.refused_over_limit;
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      [[maybe_unused]] ssize_t n = ::send(fd, kBusy.data(), kBusy.size(), MSG_NOSIGNAL);
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const ConnId id = next_++;
    Conn& c = conns_[id];
    c.fd = fd;
    c.last_active = EventLoop::Clock::now();
    c.watch = loop_.Watch(fd, EPOLLIN | EPOLLRDHUP, [this, id](uint32_t ev) { OnEvents(id, ev); });
    ++stats_.accepted;
    stats_.open = conns_.size();
  }
}

void StreamServer::OnEvents(ConnId id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (events & EPOLLOUT) {
    Flush(id);
    it = conns_.find(id);
    if (it == conns_.end()) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    Conn& c = it->second;
    const size_t cap = options_.max_head_bytes + options_.max_body_bytes + 4096;
    char buf[16384];
    for (;;) {
      if (c.in.size() >= cap) {
        c.reading = false;  // a full pipelined request waits; read again when it is served
        UpdateInterest(c);
        break;
      }
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        c.last_active = EventLoop::Clock::now();
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        Close(id);  // the client went away (or the socket failed)
        return;
      }
      if (errno == EINTR) continue;
      break;
    }
    if (!c.busy) ProcessInput(id);
  }
}

void StreamServer::ProcessInput(ConnId id) {
  if (auto it = conns_.find(id); it != conns_.end()) it->second.in_process = true;
  for (;;) {
    auto it = conns_.find(id);
    if (it == conns_.end()) break;
    Conn& c = it->second;
    if (c.busy || c.closing || c.in.empty()) break;
    RequestHead head;
    size_t used = 0;
    WireStatus s = ParseRequestHead(c.in, options_.max_head_bytes, &head, &used);
    if (s == WireStatus::kNeedMore) break;
    auto reject = [&](int status, std::string msg) {
      ++stats_.bad_requests;
      c.busy = true;
      c.close_after = true;
      const std::string body =
          fmt::format(R"({{"error":{{"message":"{}","type":"invalid_request_error","code":{}}}}})",
                      msg, status);
      Send(id, ResponseHeadBytes(status, "application/json", body.size(), false) + body);
      FinishResponse(id);
    };
    if (s == WireStatus::kTooLarge) {
      reject(431, fmt::format("request head larger than {} bytes", options_.max_head_bytes));
      break;
    }
    if (s == WireStatus::kBad) {
      reject(400, "malformed request: " + head.error);
      break;
    }
    ServerRequest req;
    req.conn = id;
    size_t total = used;
    if (head.chunked) {
      ChunkedDecoder dec;
      size_t consumed = 0;
      std::string_view rest = std::string_view(c.in).substr(used);
      if (dec.Feed(rest, &consumed, &req.body) == WireStatus::kBad) {
        reject(400, "malformed chunked request body");
        break;
      }
      if (req.body.size() > options_.max_body_bytes) {
        reject(413, fmt::format("request body larger than {} bytes", options_.max_body_bytes));
        break;
      }
      if (!dec.done()) break;
      total += consumed;
    } else {
      if (head.content_length > options_.max_body_bytes) {
        reject(413, fmt::format("request body larger than {} bytes", options_.max_body_bytes));
        break;
      }
      if (c.in.size() - used < head.content_length) {
        // curl and others wait (a second, for curl) for this before sending
        // a large body.
        auto expect = head.Find("expect");
        if (expect && expect->size() == 12 && !c.continue_sent && head.minor_version >= 1 &&
            strncasecmp(expect->data(), "100-continue", expect->size()) == 0) {
          c.continue_sent = true;
          Send(id, "HTTP/1.1 100 Continue\r\n\r\n");
        }
        break;
      }
      req.body = c.in.substr(used, head.content_length);
      total += head.content_length;
    }
    req.raw = c.in.substr(0, total);
    c.continue_sent = false;
    c.in.erase(0, total);
    c.busy = true;
    c.close_after = !head.keep_alive;
    req.head = std::move(head);
    req.received = EventLoop::Clock::now();
    ++stats_.requests;
    if (!c.reading) {
      c.reading = true;
      UpdateInterest(c);
    }
    if (on_request_) {
      on_request_(req);
    } else {
      Respond(id, 404, "text/plain", "no handler\n");
    }
  }
  if (auto it = conns_.find(id); it != conns_.end()) it->second.in_process = false;
}

void StreamServer::Send(ConnId id, std::string_view bytes) {
  auto it = conns_.find(id);
  if (it == conns_.end() || bytes.empty()) return;
  Conn& c = it->second;
  if (c.out.size() - c.out_off == 0) {
    c.out.clear();
    c.out_off = 0;
    const ssize_t n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      Close(id);
      return;
    }
    if (n > 0) bytes.remove_prefix(static_cast<size_t>(n));
    if (bytes.empty()) return;
  }
  c.out.append(bytes);
  const size_t pending = c.out.size() - c.out_off;
  if (pending > options_.max_buffered_bytes) {
    ++stats_.dropped_slow_readers;
    Close(id);
    return;
  }
  if (pending > options_.max_buffered_bytes / 2) c.above_half = true;
  UpdateInterest(c);
}

void StreamServer::Flush(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  while (c.out_off < c.out.size()) {
    const ssize_t n =
        ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Close(id);
    return;
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  } else if (c.out_off > (1 << 20)) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  UpdateInterest(c);
  const size_t pending = c.out.size() - c.out_off;
  if (pending == 0 && c.closing) {
    Close(id);
    return;
  }
  if (c.above_half && pending <= options_.max_buffered_bytes / 2) {
    c.above_half = false;
    if (on_drain_) on_drain_(id);
  }
}

void StreamServer::UpdateInterest(Conn& c) {
  uint32_t ev = EPOLLRDHUP;
  if (c.reading) ev |= EPOLLIN;
  if (c.out.size() > c.out_off) ev |= EPOLLOUT;
  loop_.Modify(c.watch, ev);
}

void StreamServer::FinishResponse(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  c.busy = false;
  c.last_active = EventLoop::Clock::now();
  if (c.close_after) {
    c.closing = true;
    c.reading = false;
    if (c.out.size() == c.out_off) {
      Close(id);
    } else {
      UpdateInterest(c);
    }
    return;
  }
  if (!c.in_process && !c.in.empty()) ProcessInput(id);
}

void StreamServer::Respond(ConnId c, int status, std::string_view content_type,
                           std::string_view body, const std::vector<Header>& extra) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  std::string bytes =
      ResponseHeadBytes(status, content_type, body.size(), !it->second.close_after, extra);
  bytes.append(body);
  Send(c, bytes);
  FinishResponse(c);
}

void StreamServer::BeginStream(ConnId c, int status, std::string_view content_type,
                               const std::vector<Header>& extra) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  Send(c, ResponseHeadBytes(status, content_type, std::nullopt, !it->second.close_after, extra));
}

void StreamServer::StreamChunk(ConnId c, std::string_view data) {
  if (!data.empty()) Send(c, ChunkBytes(data));
}

void StreamServer::EndStream(ConnId c) {
  Send(c, ChunkBytes(""));
  FinishResponse(c);
}

void StreamServer::SendRaw(ConnId c, std::string_view bytes) { Send(c, bytes); }

void StreamServer::FinishRaw(ConnId c, bool keep_alive) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  if (!keep_alive) it->second.close_after = true;
  FinishResponse(c);
}

void StreamServer::Close(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn c = std::move(it->second);
  conns_.erase(it);
  loop_.Unwatch(c.watch);
  ::close(c.fd);
  stats_.open = conns_.size();
  if (c.busy && on_close_) on_close_(id);
}

size_t StreamServer::Buffered(ConnId id) const {
  auto it = conns_.find(id);
  return it == conns_.end() ? 0 : it->second.out.size() - it->second.out_off;
}

void StreamServer::Sweep() {
  const auto now = EventLoop::Clock::now();
  std::vector<ConnId> idle;
  for (const auto& [id, c] : conns_) {
    if (!c.busy && now - c.last_active > options_.idle_timeout) idle.push_back(id);
  }
  for (ConnId id : idle) {
    ++stats_.idle_closed;
    Close(id);
  }
  sweep_timer_ = loop_.RunAfter(std::chrono::seconds(1), [this] { Sweep(); });
}

}  // namespace anxin::net
