// A fault-injecting TCP relay for partition tests: listens on 127.0.0.1 (a
// port the kernel picks at run time) and forwards every connection to a
// target, until the test says otherwise:
// - Stall(): the route goes dark. Not a byte moves either way and new
//   connections wait in the listen queue; both ends' TCP stacks keep their
//   connections open, as behind a cut link. Pass() delivers what waited.
// - Delay(d): every chunk arrives d late, in order.
// - Reset(): every connection is closed with a RST, and new ones are reset
//   as soon as they are accepted, until Pass().
// - Pass(): forwards again.
//
//   TcpRelay relay("127.0.0.1", etcd_port);
//   ASSERT_TRUE(relay.Start());
//   client.Connect("127.0.0.1", relay.port());   // or relay.Endpoint()
//   relay.Stall();                               // ... the client's calls time out
//   relay.Pass();                                // ... and now they go through
//
// Thread safety: the mode setters may be called from any thread; one thread
// of its own moves the bytes.
#ifndef ANXIN_TESTS_SUPPORT_TCP_RELAY_H_
#define ANXIN_TESTS_SUPPORT_TCP_RELAY_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <list>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace anxin::testing {

class TcpRelay {
 public:
  enum class Mode { kPass, kStall, kReset };

  TcpRelay(std::string target_host, int target_port)
      : host_(std::move(target_host)), target_port_(target_port) {}
  ~TcpRelay() {
    quit_ = true;
    if (thread_.joinable()) thread_.join();
    for (Conn& c : conns_) c.Close(false);
    if (listen_ >= 0) ::close(listen_);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Listens and starts forwarding; false (and a test failure) when it cannot.
  bool Start() {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_, 256) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "tcp relay: cannot listen on 127.0.0.1: " << std::strerror(errno);
      return false;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
    return true;
  }

  int port() const { return port_; }
  std::string Endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  void Pass() {
    delay_ms_ = 0;
    mode_ = Mode::kPass;
  }
  void Stall() { mode_ = Mode::kStall; }
  void Reset() { mode_ = Mode::kReset; }
  void Delay(std::chrono::milliseconds d) {
    delay_ms_ = d.count();
    mode_ = Mode::kPass;
  }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  using Steady = std::chrono::steady_clock;
  struct Chunk {
    Steady::time_point due;
    std::string bytes;
  };
  // One direction of a connection.
  struct Pipe {
    std::deque<Chunk> queue;
    size_t buffered = 0;
    bool eof = false;  // the source closed; shut the sink down once drained
    bool shut = false;
  };
  struct Conn {
    int client = -1;
    int upstream = -1;
    Pipe up, down;  // client -> upstream, upstream -> client
    bool dead = false;
    void Close(bool rst) {
      for (int* fd : {&client, &upstream}) {
        if (*fd < 0) continue;
        if (rst) {
          linger l{1, 0};
          ::setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        ::close(*fd);
        *fd = -1;
      }
      dead = true;
    }
  };
  static constexpr size_t kMaxBuffered = 4 << 20;

  int ConnectUpstream() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(target_port_));
    ::inet_pton(AF_INET, host_.c_str(), &a.sin_addr);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (fd >= 0) ::close(fd);
      return -1;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  void Accept() {
    for (;;) {
      int fd = ::accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      ++accepted_;
      Conn c;
      c.client = fd;
      if (mode_ == Mode::kReset || (c.upstream = ConnectUpstream()) < 0) {
        c.Close(true);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns_.push_back(std::move(c));
    }
  }

  // Reads what from has into p (due after the delay).
  void Read(int from, Pipe& p, Conn& c) {
    if (p.eof || p.buffered >= kMaxBuffered) return;
    char buf[65536];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n > 0) {
      p.queue.push_back({Steady::now() + std::chrono::milliseconds(delay_ms_.load()),
                         std::string(buf, static_cast<size_t>(n))});
      p.buffered += static_cast<size_t>(n);
    } else if (n == 0) {
      p.eof = true;
    } else if (errno != EAGAIN && errno != EINTR) {
      c.Close(true);  // a reset on one side resets the other
    }
  }

  // Writes what is due of p to to.
  void Write(int to, Pipe& p, Conn& c) {
    const auto now = Steady::now();
    while (!p.queue.empty() && p.queue.front().due <= now) {
      Chunk& ch = p.queue.front();
      const ssize_t n = ::send(to, ch.bytes.data(), ch.bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) c.Close(true);
        return;
      }
      p.buffered -= static_cast<size_t>(n);
      if (static_cast<size_t>(n) < ch.bytes.size()) {
        ch.bytes.erase(0, static_cast<size_t>(n));
        return;
      }
      p.queue.pop_front();
    }
    if (p.queue.empty() && p.eof && !p.shut) {
      ::shutdown(to, SHUT_WR);
      p.shut = true;
    }
  }

  // What to wait for on the socket that feeds `in` and is fed by `out`.
  static short Events(const Pipe& in, const Pipe& out, Steady::time_point now) {
    short e = 0;
    if (!in.eof && in.buffered < kMaxBuffered) e |= POLLIN;
    if (!out.queue.empty() && out.queue.front().due <= now) e |= POLLOUT;
    return e;
  }

  void Loop() {
    while (!quit_) {
      const Mode mode = mode_.load();
      if (mode == Mode::kReset) {
        for (Conn& c : conns_) c.Close(true);
      }
      std::vector<pollfd> fds;
      if (mode != Mode::kStall) fds.push_back({listen_, POLLIN, 0});
      if (mode == Mode::kPass) {
        const auto now = Steady::now();
        for (Conn& c : conns_) {
          fds.push_back({c.client, Events(c.up, c.down, now), 0});
          fds.push_back({c.upstream, Events(c.down, c.up, now), 0});
        }
      }
      // Short timeouts: delayed chunks fall due and mode changes take hold.
      ::poll(fds.data(), fds.size(), 10);
      if (mode_.load() != mode) continue;
      if (mode != Mode::kStall) Accept();
      if (mode == Mode::kPass) {
        for (Conn& c : conns_) {
          if (c.dead) continue;
          Read(c.client, c.up, c);
          if (!c.dead) Read(c.upstream, c.down, c);
          if (!c.dead) Write(c.upstream, c.up, c);
          if (!c.dead) Write(c.client, c.down, c);
          if (!c.dead && c.up.shut && c.down.shut) c.Close(false);
        }
      }
      conns_.remove_if([](const Conn& c) { return c.dead; });
    }
  }

  std::string host_;
  int target_port_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<bool> quit_{false};
  std::atomic<int> accepted_{0};
  std::list<Conn> conns_;  // the relay's thread only
  std::thread thread_;
};

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_SUPPORT_TCP_RELAY_H_
