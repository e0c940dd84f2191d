// A scripted HTTP server for the load tester's tests: it listens on
// 127.0.0.1 at a port the kernel picks, reads each request, and answers with
// the steps a test scripted for it (bytes to write after a delay, then keep
// the connection, close it, or hang), so tests can delay tokens on a known
// schedule and break streams on purpose.
//
//   #include <gtest/gtest.h>
//
//   testing::ScriptedServer server([](const testing::ScriptedRequest& /*req*/) {
//     return testing::SseScript({"Hello", " world"}, /*first_ms=*/50, /*gap_ms=*/10,
//                               /*usage=*/true);
//   });
//   // Point the client at server.url() and send three requests, then:
//   EXPECT_EQ(server.requests(), 3);
//
// One thread per connection (tests use at most a few hundred); the
// destructor stops every thread, also those that hang on purpose.
//
// Thread safety: the script function is called from connection threads.
#ifndef ANXIN_LOADGEN_SCRIPTED_SERVER_TESTING_H_
#define ANXIN_LOADGEN_SCRIPTED_SERVER_TESTING_H_

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace anxin::loadgen::testing {

struct ScriptedRequest {
  std::string method, path, body;
  int connection_requests = 0;  // requests on this connection before this one
};

struct ScriptStep {
  int delay_ms = 0;
  std::string bytes;
};

struct Script {
  std::vector<ScriptStep> steps;
  enum class End { kKeepAlive, kClose, kHang } end = End::kKeepAlive;
};

// Chunked-transfer framing of one piece of body.
inline std::string HttpChunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}
inline std::string SseHead(int status = 200) {
  return fmt::format(
      "HTTP/1.1 {} X\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      status);
}
inline std::string JsonResponse(int status, std::string_view body, bool close = false) {
  return fmt::format(
      "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{}", status,
      body.size(), close ? "Connection: close\r\n" : "", body);
}
inline std::string CompletionChunk(std::string_view text) {
  return fmt::format(
      "data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{{\"index\":0,"
      "\"text\":\"{}\",\"finish_reason\":null}}]}}\n\n",
      text);
}
inline std::string UsageChunk(int prompt, int completion) {
  return fmt::format(
      "data: {{\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{},"
      "\"completion_tokens\":{},\"total_tokens\":{}}}}}\n\n",
      prompt, completion, prompt + completion);
}

// A /v1/completions stream: headers at once, the first token after
// first_ms, each next one gap_ms later, then (optionally) the usage chunk
// with prompt_tokens, and data: [DONE].
inline Script SseScript(const std::vector<std::string>& tokens, int first_ms, int gap_ms,
                        int usage_prompt_tokens = -1) {
  Script s;
  s.steps.push_back({0, SseHead()});
  for (size_t i = 0; i < tokens.size(); ++i) {
    s.steps.push_back({i == 0 ? first_ms : gap_ms, HttpChunk(CompletionChunk(tokens[i]))});
  }
  std::string tail;
  if (usage_prompt_tokens >= 0) {
    tail += HttpChunk(UsageChunk(usage_prompt_tokens, static_cast<int>(tokens.size())));
  }
  tail += HttpChunk("data: [DONE]\n\n") + "0\r\n\r\n";
  s.steps.push_back({0, tail});
  return s;
}

class ScriptedServer {
 public:
  using ScriptFn = std::function<Script(const ScriptedRequest&)>;

  explicit ScriptedServer(ScriptFn fn) : fn_(std::move(fn)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 4096);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads) t.join();
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }
  std::vector<ScriptedRequest> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void AcceptLoop() {
    while (true) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      ++connections_;
      open_fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads one request; false at EOF or on error.
  static bool ReadRequest(int fd, std::string& buffer, ScriptedRequest& req) {
    while (true) {
      size_t end = buffer.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::string head = buffer.substr(0, end);
        size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
        req.method = head.substr(0, sp1);
        req.path = head.substr(sp1 + 1, sp2 - sp1 - 1);
        size_t length = 0;
        size_t cl = head.find("Content-Length: ");
        if (cl != std::string::npos) length = std::stoul(head.substr(cl + 16));
        while (buffer.size() < end + 4 + length) {
          if (!ReadMore(fd, buffer)) return false;
        }
        req.body = buffer.substr(end + 4, length);
        buffer.erase(0, end + 4 + length);
        return true;
      }
      if (!ReadMore(fd, buffer)) return false;
    }
  }
  static bool ReadMore(int fd, std::string& buffer) {
    char tmp[16384];
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buffer.append(tmp, static_cast<size_t>(n));
    return true;
  }
  // Waits ms, or less when the server stops; false when stopping.
  bool Wait(int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  }

  void Serve(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string buffer;
    int count = 0;
    ScriptedRequest req;
    while (ReadRequest(fd, buffer, req)) {
      req.connection_requests = count++;
      ++requests_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(req);
      }
      Script script = fn_(req);
      bool alive = true;
      for (const ScriptStep& step : script.steps) {
        if (step.delay_ms > 0 && !Wait(step.delay_ms)) {
          alive = false;
          break;
        }
        if (::send(fd, step.bytes.data(), step.bytes.size(), MSG_NOSIGNAL) < 0) {
          alive = false;
          break;
        }
      }
      if (!alive || script.end == Script::End::kClose) break;
      if (script.end == Script::End::kHang) {
        Wait(60 * 1000);
        break;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(open_fds_, fd);
    ::close(fd);
  }

  ScriptFn fn_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::vector<int> open_fds_;
  std::vector<ScriptedRequest> seen_;
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
};

}  // namespace anxin::loadgen::testing

#endif  // ANXIN_LOADGEN_SCRIPTED_SERVER_TESTING_H_
