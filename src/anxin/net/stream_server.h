// An HTTP/1.1 server on an EventLoop for long-lived streaming responses: one
// thread holds thousands of connections, each response is written as it is
// produced (whole, chunked, or as raw bytes passed through from elsewhere),
// and a client that goes away is reported so its work can stop. base/http.h
// (a thread per connection in flight) cannot hold that many open streams.
//
//   EventLoop loop;  ANXIN_TRY(loop.Init());
//   StreamServer server(loop, {.port = 0});
//   server.set_on_request([&](ServerRequest& r) {
//     server.BeginStream(r.conn, 200, "text/event-stream", {});
//     server.StreamChunk(r.conn, "data: hello\n\n");
//     server.EndStream(r.conn);
//   });
//   server.set_on_close([&](ConnId /*c*/) { /* cancel the work of connection c */ });
//   ANXIN_TRY(server.Listen());
//   loop.Run();
//
// Each connection serves one request at a time (pipelined requests wait);
// every request gets exactly one response: Respond, BeginStream ... EndStream,
// or SendRaw ... FinishRaw. Limits: head and body sizes (431 / 413), bytes
// buffered for a slow reader (the connection is closed past it), idle time,
// and the number of connections.
//
// Thread safety: everything on the loop's thread.
#ifndef ANXIN_NET_STREAM_SERVER_H_
#define ANXIN_NET_STREAM_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/net/event_loop.h"
#include "anxin/net/http_wire.h"

namespace anxin::net {

using ConnId = uint64_t;

struct StreamServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free port (see port())
  size_t max_head_bytes = 64 << 10;
  size_t max_body_bytes = 8 << 20;
  size_t max_buffered_bytes = 16 << 20;  // unsent bytes per connection before it is dropped
  int max_connections = 50000;
  std::chrono::seconds idle_timeout{120};  // no request (or no complete one) for this long
};

struct ServerRequest {
  ConnId conn = 0;
  RequestHead head;
  std::string body;
  std::string raw;  // head and body exactly as received (the gate forwards them)
  EventLoop::Clock::time_point received{};
};

struct StreamServerStats {
  uint64_t accepted = 0, open = 0, requests = 0, bad_requests = 0, dropped_slow_readers = 0,
           refused_over_limit = 0, idle_closed = 0;
};

class StreamServer {
 public:
  StreamServer(EventLoop& loop, StreamServerOptions options);
  ~StreamServer();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  // Binds and listens. kUnavailable when the address is taken or not local.
  [[nodiscard]] Status Listen();
  int port() const { return port_; }

  void set_on_request(std::function<void(ServerRequest&)> fn) { on_request_ = std::move(fn); }
  // The connection closed (client gone, or Close); called for every connection
  // that had a request in flight, before its id is forgotten.
  void set_on_close(std::function<void(ConnId)> fn) { on_close_ = std::move(fn); }
  // The connection's unsent bytes fell below half the limit after being above
  // it (for a producer that paused).
  void set_on_drain(std::function<void(ConnId)> fn) { on_drain_ = std::move(fn); }

  void Respond(ConnId c, int status, std::string_view content_type, std::string_view body,
               const std::vector<Header>& extra = {});
  void BeginStream(ConnId c, int status, std::string_view content_type,
                   const std::vector<Header>& extra = {});
  void StreamChunk(ConnId c, std::string_view data);
  void EndStream(ConnId c);
  void SendRaw(ConnId c, std::string_view bytes);
  // Ends a raw response; keep_alive false closes once sent.
  void FinishRaw(ConnId c, bool keep_alive);
  void Close(ConnId c);
  // Closes the listener and every connection.
  void Shutdown();

  bool Alive(ConnId c) const { return conns_.contains(c); }
  size_t Buffered(ConnId c) const;
  size_t buffer_limit() const { return options_.max_buffered_bytes; }
  const StreamServerStats& stats() const { return stats_; }

 private:
  struct Conn {
    int fd = -1;
    uint64_t watch = 0;
    std::string in, out;
    size_t out_off = 0;
    bool busy = false;         // a request is being answered
    bool close_after = false;  // close once the response is sent
    bool closing = false;
    bool reading = true;
    bool above_half = false;
    bool in_process = false;     // ProcessInput is running for it (no re-entry)
    bool continue_sent = false;  // "100 Continue" answered the current request's Expect
    EventLoop::Clock::time_point last_active{};
  };
  void Accept();
  void OnEvents(ConnId id, uint32_t events);
  void ProcessInput(ConnId id);
  void Send(ConnId id, std::string_view bytes);
  void Flush(ConnId id);
  void UpdateInterest(Conn& c);
  void FinishResponse(ConnId id);
  void Sweep();

  EventLoop& loop_;
  StreamServerOptions options_;
  int listen_fd_ = -1;
  uint64_t listen_watch_ = 0;
  uint64_t sweep_timer_ = 0;
  int port_ = 0;
  ConnId next_ = 1;
  std::unordered_map<ConnId, Conn> conns_;
  std::function<void(ServerRequest&)> on_request_;
  std::function<void(ConnId)> on_close_;
  std::function<void(ConnId)> on_drain_;
  StreamServerStats stats_;
};

}  // namespace anxin::net

#endif  // ANXIN_NET_STREAM_SERVER_H_
