#include "anxin/run/rank_control.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace anxin::run {

struct RankControl::Impl {
  struct Conn {
    int fd = -1;
    std::string buf;
    std::string token;  // "" until hello
  };
  std::string address;
  int listen_fd = -1;
  int wake_fd = -1;
  std::thread thread;
  std::atomic<bool> done{false};

  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<int, Conn> conns;            // by fd
  std::map<std::string, int> by_token;  // token -> fd
  std::set<std::string> spares_ready;
  std::map<std::string, int> aborted;  // token -> generation it answered for
  std::function<void()> on_spare_ready;

  void CloseLocked(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    if (!it->second.token.empty()) {
      auto t = by_token.find(it->second.token);
      if (t != by_token.end() && t->second == fd) by_token.erase(t);
      spares_ready.erase(it->second.token);
    }
    close(fd);
    conns.erase(it);
  }

  // One line from a connection.
  void HandleLocked(Conn& c, const std::string& line, bool& spare_ready) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    if (j.contains("hello") && j["hello"].is_object()) {
      const std::string token = j["hello"].value("token", "");
      if (token.empty()) return;
      if (auto old = by_token.find(token); old != by_token.end() && old->second != c.fd) {
        return;  // a second process claiming a live token: ignore it
      }
      c.token = token;
      by_token[token] = c.fd;
    } else if (c.token.empty()) {
      return;
    } else if (j.contains("spare_ready")) {
      spares_ready.insert(c.token);
      spare_ready = true;
    } else if (j.contains("aborted") && j["aborted"].is_object()) {
      const auto& g = j["aborted"]["generation"];
      aborted[c.token] = g.is_number_integer() ? g.get<int>() : -1;
    }
  }

  void Loop() {
    for (;;) {
      std::vector<pollfd> fds = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
      {
        std::lock_guard lock(mu);
        for (const auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
      if (done.load()) break;
      if (fds[0].revents & POLLIN) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          std::lock_guard lock(mu);
          conns[fd].fd = fd;
        }
      }
      if (fds[1].revents & POLLIN) {
        uint64_t v;
        (void)!read(wake_fd, &v, sizeof(v));
      }
      bool spare_ready = false;
      std::function<void()> callback;
      {
        std::lock_guard lock(mu);
        for (size_t i = 2; i < fds.size(); ++i) {
          if (fds[i].revents == 0) continue;
          auto it = conns.find(fds[i].fd);
          if (it == conns.end()) continue;
          char buf[4096];
          const ssize_t n = recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            CloseLocked(fds[i].fd);
            continue;
          }
          if (n < 0) continue;
          Conn& c = it->second;
          c.buf.append(buf, static_cast<size_t>(n));
          for (size_t nl; (nl = c.buf.find('\n')) != std::string::npos;) {
            const std::string line = c.buf.substr(0, nl);
            c.buf.erase(0, nl + 1);
            HandleLocked(c, line, spare_ready);
          }
          if (c.buf.size() > (1 << 20)) CloseLocked(fds[i].fd);  // not a rank speaking
        }
        if (spare_ready) callback = on_spare_ready;
      }
      cv.notify_all();
      if (callback) callback();
    }
  }
};

Result<std::unique_ptr<RankControl>> RankControl::Start() {
  static std::atomic<int> counter{0};
  std::unique_ptr<RankControl> rc(new RankControl());
  rc->impl_ = std::make_unique<Impl>();
  Impl& m = *rc->impl_;
  const std::string name =
      "anxin-run-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  m.address = "@" + name;
  m.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m.listen_fd < 0) return std::unexpected(ErrnoError(errno, "rank control socket"));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(m.listen_fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 ||
      listen(m.listen_fd, 128) != 0) {
    const int e = errno;
    close(m.listen_fd);
    m.listen_fd = -1;
    return std::unexpected(ErrnoError(e, "binding the rank control socket " + m.address));
  }
  m.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m.wake_fd < 0) return std::unexpected(ErrnoError(errno, "rank control eventfd"));
  m.thread = std::thread([&m] { m.Loop(); });
  return rc;
}

RankControl::~RankControl() {
  if (!impl_) return;
  impl_->done.store(true);
  if (impl_->wake_fd >= 0) {
    const uint64_t one = 1;
    (void)!write(impl_->wake_fd, &one, sizeof(one));
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  std::lock_guard lock(impl_->mu);
  for (auto& [fd, c] : impl_->conns) close(fd);
  impl_->conns.clear();
  if (impl_->listen_fd >= 0) close(impl_->listen_fd);
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
}

const std::string& RankControl::address() const { return impl_->address; }

bool RankControl::Connected(const std::string& token) const {
  std::lock_guard lock(impl_->mu);
  return impl_->by_token.contains(token);
}

bool RankControl::SpareReady(const std::string& token) const {
  std::lock_guard lock(impl_->mu);
  return impl_->spares_ready.contains(token);
}

void RankControl::OnSpareReady(std::function<void()> callback) {
  std::lock_guard lock(impl_->mu);
  impl_->on_spare_ready = std::move(callback);
}

Status RankControl::Send(const std::string& token, const nlohmann::json& msg) {
  const std::string line = msg.dump() + "\n";
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_token.find(token);
  if (it == impl_->by_token.end()) {
    return std::unexpected(Error(ErrorCode::kUnavailable, token + ": not connected"));
  }
  if (msg.contains("abort")) impl_->aborted.erase(token);
  if (msg.contains("rejoin")) impl_->spares_ready.erase(token);
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = send(it->second, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::unexpected(ErrnoError(errno, "sending to " + token));
    off += static_cast<size_t>(n);
  }
  return Ok();
}

std::set<std::string> RankControl::WaitAborted(
    const std::vector<std::string>& tokens, int generation,
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool(const std::string&)>& gone) {
  std::set<std::string> answered;
  std::unique_lock lock(impl_->mu);
  for (;;) {
    bool all = true;
    for (const std::string& t : tokens) {
      auto it = impl_->aborted.find(t);
      if (it != impl_->aborted.end() && it->second == generation) {
        answered.insert(t);
      } else if (!gone(t)) {
        all = false;
      }
    }
    if (all || std::chrono::steady_clock::now() >= deadline) return answered;
    // A process exiting is not announced here: look again every 10 ms.
    impl_->cv.wait_until(
        lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
  }
}

void RankControl::Forget(const std::string& token) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->by_token.find(token);
  if (it != impl_->by_token.end()) impl_->CloseLocked(it->second);
  impl_->aborted.erase(token);
  impl_->spares_ready.erase(token);
  const uint64_t one = 1;  // the control thread polls the connections left
  (void)!write(impl_->wake_fd, &one, sizeof(one));
}

}  // namespace anxin::run
