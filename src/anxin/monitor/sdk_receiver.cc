#include "anxin/monitor/sdk_receiver.h"

#include <errno.h>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>
#include <vector>

namespace anxin::monitor {
namespace {

constexpr size_t kMaxSenders = 4096;

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty()) return InvalidArgument("SDK socket path is empty");
  if (path.size() >= sizeof(addr.sun_path))
    return InvalidArgument(fmt::format(
        "SDK socket path {} is {} bytes; a Unix socket path holds at most {}: choose a shorter one",
        path, path.size(), sizeof(addr.sun_path) - 1));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace

// ---- SdkForwarder -------------------------------------------------------

SdkForwarder::SdkForwarder(std::string path, std::chrono::milliseconds retry_interval)
    : path_(std::move(path)), retry_interval_(retry_interval) {}

SdkForwarder::~SdkForwarder() {
  if (fd_ >= 0) close(fd_);
}

bool SdkForwarder::Forward(std::span<const uint8_t> datagram) {
  std::lock_guard lock(mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) {
      auto now = std::chrono::steady_clock::now();
      if (now < next_try_) break;
      next_try_ = now + retry_interval_;
      auto addr = SocketAddress(path_);
      if (!addr) break;
      int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      if (connect(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0) {
        close(fd);
        break;
      }
      fd_ = fd;
    }
    ssize_t n = send(fd_, datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      forwarded_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;  // full: drop
    // The other receiver went away (or was replaced): reconnect once now.
    close(fd_);
    fd_ = -1;
    next_try_ = {};
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

// ---- SdkReceiver --------------------------------------------------------

struct SdkReceiver::Metrics {
  Counter* datagrams = nullptr;
  Counter* events = nullptr;
  std::array<Counter*, kSdkRejectReasons> rejected{};
  Counter* dropped = nullptr;
  Counter* unsent = nullptr;
  Counter* lost = nullptr;
  Counter* forwarded = nullptr;
  Counter* forward_failed = nullptr;
};

// What the receiver remembers per sender to turn cumulative header counts
// into increments and to see gaps in sequence numbers.
struct SdkReceiver::Senders {
  struct Seen {
    uint64_t sequence = 0;
    uint64_t dropped = 0;
    uint64_t unsent = 0;
    uint64_t last_used = 0;
  };
  std::map<std::pair<uint32_t, std::string>, Seen> by_key;
  uint64_t clock = 0;
};

Result<std::unique_ptr<SdkReceiver>> SdkReceiver::Start(SdkReceiverOptions options,
                                                        Callback on_datagram,
                                                        RejectCallback on_reject) {
  std::unique_ptr<SdkReceiver> r(
      new SdkReceiver(std::move(options), std::move(on_datagram), std::move(on_reject)));
  ANXIN_TRY(r->Bind());
  if (r->options_.registry) {
    Registry& reg = *r->options_.registry;
    auto m = std::make_unique<Metrics>();
    const std::string& node = r->options_.node;
    ANXIN_ASSIGN_OR_RETURN(auto* d, reg.AddCounter("anxin_sdk_datagrams_received_total",
                                                   "SDK datagrams accepted.", {"node"}));
    m->datagrams = &d->WithLabels({node});
    ANXIN_ASSIGN_OR_RETURN(auto* e, reg.AddCounter("anxin_sdk_events_received_total",
                                                   "SDK events in accepted datagrams.", {"node"}));
    m->events = &e->WithLabels({node});
    ANXIN_ASSIGN_OR_RETURN(
        auto* rej,
        reg.AddCounter("anxin_sdk_datagrams_rejected_total",
                       "SDK datagrams refused by the decoder, by reason.", {"node", "reason"}));
    for (size_t i = 0; i < kSdkRejectReasons; ++i)
      m->rejected[i] =
          &rej->WithLabels({node, SdkRejectReasonName(static_cast<SdkRejectReason>(i))});
    ANXIN_ASSIGN_OR_RETURN(
        auto* dr, reg.AddCounter("anxin_sdk_events_dropped_total",
                                 "Events SDK senders dropped while connected (buffer full), as "
                                 "their datagrams report.",
                                 {"node"}));
    m->dropped = &dr->WithLabels({node});
    ANXIN_ASSIGN_OR_RETURN(
        auto* un,
        reg.AddCounter("anxin_sdk_events_unsent_total",
                       "Events SDK senders made while no agent was connected.", {"node"}));
    m->unsent = &un->WithLabels({node});
    ANXIN_ASSIGN_OR_RETURN(
        auto* lo, reg.AddCounter("anxin_sdk_datagrams_lost_total",
                                 "Gaps in SDK senders' datagram sequence numbers.", {"node"}));
    m->lost = &lo->WithLabels({node});
    if (r->forwarder_) {
      ANXIN_ASSIGN_OR_RETURN(
          auto* fw, reg.AddCounter("anxin_sdk_datagrams_forwarded_total",
                                   "SDK datagrams relayed to the next receiver, by result.",
                                   {"node", "result"}));
      m->forwarded = &fw->WithLabels({node, "ok"});
      m->forward_failed = &fw->WithLabels({node, "failed"});
    }
    r->metrics_ = std::move(m);
  }
  SdkReceiver* raw = r.get();
  try {
    r->thread_ = std::make_unique<std::thread>([raw] { raw->Run(); });
  } catch (const std::system_error& e) {
    return Internal(fmt::format("SDK receiver: cannot start its thread: {}", e.what()));
  }
  return r;
}

SdkReceiver::SdkReceiver(SdkReceiverOptions options, Callback on_datagram, RejectCallback on_reject)
    : options_(std::move(options)),
      on_datagram_(std::move(on_datagram)),
      on_reject_(std::move(on_reject)),
      senders_(std::make_unique<Senders>()) {
  if (!options_.forward_path.empty())
    forwarder_ = std::make_unique<SdkForwarder>(options_.forward_path);
}

Status SdkReceiver::Bind() {
  const std::string& path = options_.socket_path;
  ANXIN_ASSIGN_OR_RETURN(sockaddr_un addr, SocketAddress(path));
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return NotFound(fmt::format("SDK socket {}: directory {} does not exist: create it first", path,
                                parent.string()));
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return FailedPrecondition(fmt::format(
          "SDK socket {} exists and is not a socket: remove it or choose another path", path));
    // A socket someone still reads is in use; one nobody reads was left by
    // a receiver that died and may be replaced.
    int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return std::unexpected(ErrnoError(errno, "socket"));
    int rc = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    int err = errno;
    close(probe);
    if (rc == 0)
      return FailedPrecondition(fmt::format(
          "SDK socket {} is in use by another receiver (an agent or `anxin run`): stop it or "
          "choose another path",
          path));
    if (err != ECONNREFUSED) return std::unexpected(ErrnoError(err, "probe SDK socket " + path));
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return std::unexpected(ErrnoError(errno, "remove stale SDK socket " + path));
  }
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return std::unexpected(ErrnoError(errno, "socket"));
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd_);
    fd_ = -1;
    return std::unexpected(ErrnoError(err, "bind SDK socket " + path));
  }
  if (chmod(path.c_str(), options_.socket_mode) != 0)
    spdlog::warn("SDK socket {}: chmod {:o}: {}", path, options_.socket_mode, strerror(errno));
  if (stat(path.c_str(), &st) == 0) inode_ = st.st_ino;
  int want = options_.receive_buffer_bytes;
  if (want > 0 && setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) != 0)
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return std::unexpected(ErrnoError(errno, "eventfd"));
  return Ok();
}

SdkReceiver::~SdkReceiver() { Stop(); }

void SdkReceiver::Stop() {
  std::lock_guard lock(stop_mu_);
  if (thread_) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
    thread_->join();
    thread_.reset();
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
    // Remove the file only if it is still ours.
    struct stat st {};
    if (inode_ != 0 && lstat(options_.socket_path.c_str(), &st) == 0 && st.st_ino == inode_)
      unlink(options_.socket_path.c_str());
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
    wake_fd_ = -1;
  }
}

SdkReceiverStats SdkReceiver::stats() const {
  SdkReceiverStats s;
  s.datagrams = datagrams_.load(std::memory_order_relaxed);
  s.events = events_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kSdkRejectReasons; ++i)
    s.rejected[i] = rejected_[i].load(std::memory_order_relaxed);
  s.sender_dropped = sender_dropped_.load(std::memory_order_relaxed);
  s.sender_unsent = sender_unsent_.load(std::memory_order_relaxed);
  s.datagrams_lost = lost_.load(std::memory_order_relaxed);
  if (forwarder_) {
    s.forwarded = forwarder_->forwarded();
    s.forward_failed = forwarder_->failed();
  }
  return s;
}

void SdkReceiver::Run() {
  // One byte more than the largest datagram, and MSG_TRUNC, so that an
  // oversized one is seen as such rather than cut to a valid-looking size.
  std::vector<uint8_t> buf(kSdkMaxDatagramBytes + 1);
  pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    int rc = poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      spdlog::error("SDK receiver {}: poll: {}", options_.socket_path, strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    // Drain what is queued before polling again.
    for (;;) {
      ssize_t n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          spdlog::warn("SDK receiver {}: recv: {}", options_.socket_path, strerror(errno));
        break;
      }
      size_t real = static_cast<size_t>(n);
      Handle(std::span(buf.data(), std::min(real, buf.size())), real);
    }
  }
}

void SdkReceiver::Handle(std::span<const uint8_t> raw, size_t real_size) {
  SdkDatagram& d = scratch_;
  Status decoded =
      real_size > kSdkMaxDatagramBytes
          ? ResourceExhausted(fmt::format("datagram of {} bytes is over the limit of {}", real_size,
                                          kSdkMaxDatagramBytes))
          : DecodeSdkDatagram(raw, d);
  if (!decoded) {
    SdkRejectReason why = RejectReasonOf(decoded.error());
    rejected_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    if (metrics_) metrics_->rejected[static_cast<size_t>(why)]->Inc();
    spdlog::debug("SDK receiver {}: refused a datagram of {} bytes: {}", options_.socket_path,
                  real_size, decoded.error().Describe());
    if (on_reject_) on_reject_(why, decoded.error(), raw);
    return;
  }
  datagrams_.fetch_add(1, std::memory_order_relaxed);
  events_.fetch_add(d.events.size(), std::memory_order_relaxed);
  bytes_.fetch_add(raw.size(), std::memory_order_relaxed);

  // Per-sender increments of the cumulative header counts, and gaps.
  Senders& s = *senders_;
  auto key = std::make_pair(d.sender.pid, d.sender.job);
  auto it = s.by_key.find(key);
  uint64_t dropped = 0, unsent = 0, lost = 0;
  if (it == s.by_key.end()) {
    if (s.by_key.size() >= kMaxSenders) {
      auto oldest = s.by_key.begin();
      for (auto i = s.by_key.begin(); i != s.by_key.end(); ++i)
        if (i->second.last_used < oldest->second.last_used) oldest = i;
      s.by_key.erase(oldest);
    }
    dropped = d.sender.dropped_total;
    unsent = d.sender.unsent_total;
    it = s.by_key.emplace(std::move(key), Senders::Seen{}).first;
  } else {
    Senders::Seen& seen = it->second;
    if (d.sender.sequence > seen.sequence) {
      lost = d.sender.sequence - seen.sequence - 1;
    }
    // Counters only grow within one sender; a smaller value is a new
    // process that reuses the pid: count it whole.
    dropped = d.sender.dropped_total >= seen.dropped ? d.sender.dropped_total - seen.dropped
                                                     : d.sender.dropped_total;
    unsent = d.sender.unsent_total >= seen.unsent ? d.sender.unsent_total - seen.unsent
                                                  : d.sender.unsent_total;
  }
  it->second = {d.sender.sequence, d.sender.dropped_total, d.sender.unsent_total, ++s.clock};
  sender_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  sender_unsent_.fetch_add(unsent, std::memory_order_relaxed);
  lost_.fetch_add(lost, std::memory_order_relaxed);
  if (metrics_) {
    metrics_->datagrams->Inc();
    metrics_->events->Inc(static_cast<double>(d.events.size()));
    metrics_->dropped->Inc(static_cast<double>(dropped));
    metrics_->unsent->Inc(static_cast<double>(unsent));
    metrics_->lost->Inc(static_cast<double>(lost));
  }

  if (on_datagram_) on_datagram_(d, raw);
  if (forwarder_) {
    bool ok = forwarder_->Forward(raw);
    if (metrics_) (ok ? metrics_->forwarded : metrics_->forward_failed)->Inc();
  }
}

}  // namespace anxin::monitor
