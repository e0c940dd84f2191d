#include "anxin/run/rank_fence.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace anxin::run {
namespace {

using Steady = std::chrono::steady_clock;

// One message each way, one SOCK_SEQPACKET packet each.
struct Message {
  int32_t op = 0;
  int32_t unused = 0;
  int64_t value = 0;
};
enum Op : int32_t {
  kDeadline = 1,  // value: the fence time, CLOCK_MONOTONIC ns (steady_clock's clock)
  kGuard = 2,     // value: a process group
  kRelease = 3,
  kReset = 4,    // value: the new epoch
  kTripNow = 5,  //
  kTripped = 6,  // guard -> supervisor; value: the epoch it tripped in
};

int64_t Nanos(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// ---- The guard process: between fork and _exit only async-signal-safe
// calls on its own stack (the supervisor is multi-threaded).

constexpr int kMaxGroups = 1024;

int64_t MonotonicNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void StopGroups(const pid_t* groups, int n) {
  for (int i = 0; i < n; ++i) ::kill(-groups[i], SIGSTOP);
}

[[noreturn]] void GuardMain(int fd) {
  int64_t deadline = -1;
  bool tripped = false;
  int64_t epoch = 0;
  pid_t groups[kMaxGroups];
  int n = 0;
  auto trip = [&] {
    StopGroups(groups, n);
    tripped = true;
    Message m;
    m.op = kTripped;
    m.value = epoch;
    (void)::send(fd, &m, sizeof m, MSG_NOSIGNAL);
  };
  for (;;) {
    int timeout_ms = -1;
    if (!tripped && deadline >= 0) {
      const int64_t left = deadline - MonotonicNanos();
      timeout_ms = left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left / 1000000 + 1, 60000));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno != EINTR) ::_exit(1);
    if (ready > 0) {
      Message m;
      const ssize_t got = ::recv(fd, &m, sizeof m, MSG_DONTWAIT);
      if (got == 0) ::_exit(0);  // the supervisor is gone
      if (got < 0 && errno != EINTR && errno != EAGAIN) ::_exit(1);
      if (got == static_cast<ssize_t>(sizeof m)) {
        switch (m.op) {
          case kDeadline:
            deadline = m.value;
            break;
          case kGuard:
            if (n < kMaxGroups) groups[n++] = static_cast<pid_t>(m.value);
            if (tripped) ::kill(-static_cast<pid_t>(m.value), SIGSTOP);
            break;
          case kRelease:
            for (int i = 0; i < n; ++i) {
              if (groups[i] == static_cast<pid_t>(m.value)) {
                groups[i] = groups[--n];
                break;
              }
            }
            break;
          case kReset:
            tripped = false;
            epoch = m.value;
            break;
          case kTripNow:
            if (!tripped) trip();
            break;
          default:
            break;
        }
      }
    }
    if (!tripped && deadline >= 0 && MonotonicNanos() >= deadline) trip();
  }
}

// In the child, before GuardMain: its own process group (a stop or kill of
// the supervisor's group does not reach it), gone with the supervisor, no
// inherited descriptors but its socket, default signal handling.
[[noreturn]] void StartGuardChild(int fd, pid_t parent) {
  (void)::setpgid(0, 0);
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
    ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (fd > 3) (void)::close_range(3, static_cast<unsigned>(fd) - 1, 0);
  (void)::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  GuardMain(fd);
}

}  // namespace

RankFence::RankFence() = default;

RankFence::~RankFence() {
  if (socket_ >= 0) ::close(socket_);  // the guard reads the end of file and exits
  if (guard_ > 0) {
    int status = 0;
    while (::waitpid(guard_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

Status RankFence::StartGuard() {
  std::lock_guard lock(mu_);
  if (guard_ > 0) return Ok();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return std::unexpected(ErrnoError(errno, "rank fence: socketpair"));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return std::unexpected(ErrnoError(e, "rank fence: forking the guard process"));
  }
  if (pid == 0) StartGuardChild(sv[1], parent);
  ::close(sv[1]);
  guard_ = pid;
  socket_ = sv[0];
  if (lease_) Send(kDeadline, Nanos(lease_->fence_at));
  for (pid_t g : groups_) Send(kGuard, g);
  return Ok();
}

void RankFence::Send(int32_t op, int64_t value) {
  if (socket_ < 0) return;
  Message m;
  m.op = op;
  m.value = value;
  while (::send(socket_, &m, sizeof m, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    spdlog::warn(
        "anxin run: rank fence: the guard process is gone ({}): ranks are fenced only "
        "while the supervisor runs",
        std::strerror(errno));
    ::close(socket_);
    socket_ = -1;
    return;
  }
}

std::string RankFence::LateWhy(Steady::time_point now) const {
  const RunLease& l = *lease_;
  auto secs = [](Steady::duration d) { return std::chrono::duration<double>(d).count(); };
  std::string why = fmt::format(
      "{} was not renewed for {:.1f} s: the ranks are stopped (SIGSTOP) {:.1f} s before the "
      "lease can expire, so that none of them steps once the other nodes go on without this "
      "one; they are killed and the node rejoins the job as soon as the store answers",
      l.holder, secs(l.fence_at - l.renewed), secs(l.expires_at - l.fence_at));
  if (now - l.fence_at > std::chrono::seconds(1)) {
    why += fmt::format(" (this process was stalled: it ran again {:.1f} s after the fence time)",
                       secs(now - l.fence_at));
  }
  return why;
}

void RankFence::TripLocked(std::string why) {
  trip_ = Trip{std::move(why), std::chrono::system_clock::now()};
  for (pid_t g : groups_) ::kill(-g, SIGSTOP);
  Send(kTripNow, 0);
  spdlog::error("anxin run: fenced: {}", trip_->why);
}

void RankFence::RunUntil(RunLease lease) {
  std::lock_guard lock(mu_);
  const auto now = Steady::now();
  if (lease_ && !trip_ && now >= lease_->fence_at) TripLocked(LateWhy(now));
  lease_ = std::move(lease);
  Send(kDeadline, Nanos(lease_->fence_at));
}

void RankFence::Fence(std::string why) {
  std::lock_guard lock(mu_);
  if (!trip_) TripLocked(std::move(why));
}

void RankFence::Guard(pid_t pgid) {
  std::lock_guard lock(mu_);
  groups_.insert(pgid);
  Send(kGuard, pgid);
  if (!trip_ && lease_ && Steady::now() >= lease_->fence_at) TripLocked(LateWhy(Steady::now()));
  if (trip_) ::kill(-pgid, SIGSTOP);
}

void RankFence::Release(pid_t pgid) {
  std::lock_guard lock(mu_);
  groups_.erase(pgid);
  Send(kRelease, pgid);
}

std::optional<RankFence::Trip> RankFence::Tripped() {
  std::lock_guard lock(mu_);
  const auto now = Steady::now();
  Message m;
  while (socket_ >= 0 && ::recv(socket_, &m, sizeof m, MSG_DONTWAIT) == sizeof m) {
    if (m.op != kTripped || m.value != epoch_ || trip_ || !lease_) continue;
    // The guard stopped the ranks at the fence time, perhaps while this
    // process was stalled.
    trip_ = Trip{LateWhy(now), std::chrono::system_clock::now() -
                                   std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                       now - lease_->fence_at)};
    spdlog::error("anxin run: fenced: {}", trip_->why);
  }
  if (!trip_ && lease_ && now >= lease_->fence_at) TripLocked(LateWhy(now));
  return trip_;
}

void RankFence::Reset() {
  std::lock_guard lock(mu_);
  trip_.reset();
  ++epoch_;
  Send(kReset, epoch_);
}

}  // namespace anxin::run
