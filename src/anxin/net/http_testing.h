// Test helpers for the serving simulator and the gate: a blocking HTTP/1.1
// client over raw sockets that keeps many exchanges open at once, with a
// deadline on everything, and an SSE splitter.
//
//   #include <gtest/gtest.h>
//
//   int port = 8000;                                  // a SimServer's port()
//   std::string body = R"({"prompt": "hi", "stream": true})";
//   auto rs = testing::RunExchanges(port, {testing::Post("/v1/completions", body)}, 10s);
//   EXPECT_EQ(rs[0].status, 200);
//   for (const std::string& data : testing::SseData(rs[0].body)) {
//     EXPECT_FALSE(data.empty());                     // one SSE event's data
//   }
#ifndef ANXIN_NET_HTTP_TESTING_H_
#define ANXIN_NET_HTTP_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "anxin/net/http_wire.h"

namespace anxin::net::testing {

inline std::string Post(const std::string& path, const std::string& body, bool keep_alive = false) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         (keep_alive ? "" : "Connection: close\r\n") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
inline std::string Get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
}

inline int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Exchange {
  int fd = -1;
  std::string raw;  // every byte received
  int status = 0;
  std::string head;       // the response head
  std::string body;       // decoded (chunked or not)
  bool complete = false;  // the whole response arrived
  bool closed = false;    // the server closed the connection
  // Offsets into raw where each read ended (to see streaming happen).
  std::vector<std::pair<std::chrono::steady_clock::time_point, size_t>> arrivals;
};

// Feeds what arrived; sets complete when the response's framing says so.
inline void Decode(Exchange& x, bool eof) {
  ResponseHead h;
  size_t used = 0;
  if (ParseResponseHead(x.raw, 1 << 20, &h, &used) != WireStatus::kOk) return;
  x.status = h.status;
  x.head = x.raw.substr(0, used);
  std::string_view rest = std::string_view(x.raw).substr(used);
  if (h.chunked) {
    ChunkedDecoder d;
    size_t consumed = 0;
    std::string payload;
    d.Feed(rest, &consumed, &payload);
    x.body = payload;
    x.complete = d.done();
  } else if (h.content_length) {
    x.body = std::string(rest.substr(0, *h.content_length));
    x.complete = rest.size() >= *h.content_length;
  } else {
    x.body = std::string(rest);
    x.complete = eof;
  }
}

// Sends every request on its own connection at once, then reads them all
// until each response is complete or the deadline passes.
inline std::vector<Exchange> RunExchanges(int port, const std::vector<std::string>& requests,
                                          std::chrono::milliseconds timeout) {
  std::vector<Exchange> xs(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    xs[i].fd = Connect(port);
    if (xs[i].fd >= 0) {
      [[maybe_unused]] ssize_t n =
          ::send(xs[i].fd, requests[i].data(), requests[i].size(), MSG_NOSIGNAL);
    } else {
      xs[i].closed = true;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].complete && !xs[i].closed) {
        pfds.push_back({xs[i].fd, POLLIN, 0});
        which.push_back(i);
      }
    }
    if (pfds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(left.count())) <= 0) continue;
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!pfds[k].revents) continue;
      Exchange& x = xs[which[k]];
      char buf[65536];
      const ssize_t n = ::recv(x.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        x.raw.append(buf, static_cast<size_t>(n));
        x.arrivals.emplace_back(std::chrono::steady_clock::now(), x.raw.size());
        Decode(x, false);
      } else {
        x.closed = true;
        Decode(x, true);
      }
    }
  }
  for (Exchange& x : xs)
    if (x.fd >= 0) ::close(x.fd);
  return xs;
}

inline Exchange RunOne(int port, const std::string& request,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return RunExchanges(port, {request}, timeout)[0];
}

// The payloads of the `data:` lines of an SSE body, in order.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(pos, end - pos);
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    pos = end + 1;
  }
  return out;
}

}  // namespace anxin::net::testing

#endif  // ANXIN_NET_HTTP_TESTING_H_
