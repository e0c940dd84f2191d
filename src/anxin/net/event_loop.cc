#include "anxin/net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace anxin::net {

EventLoop::~EventLoop() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status EventLoop::Init() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return std::unexpected(ErrnoError(errno, "epoll_create1"));
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return std::unexpected(ErrnoError(errno, "eventfd"));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // id 0: the wake-up descriptor
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return std::unexpected(ErrnoError(errno, "epoll_ctl"));
  }
  return Ok();
}

uint64_t EventLoop::Watch(int fd, uint32_t events, Handler handler) {
  const uint64_t id = next_id_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return 0;
  watches_.emplace(id, Watched{fd, std::make_shared<Handler>(std::move(handler))});
  return id;
}

void EventLoop::Modify(uint64_t watch, uint32_t events) {
  auto it = watches_.find(watch);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = watch;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, it->second.fd, &ev);
}

void EventLoop::Unwatch(uint64_t watch) {
  auto it = watches_.find(watch);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  watches_.erase(it);
}

uint64_t EventLoop::RunAt(Clock::time_point when, std::function<void()> fn) {
  const uint64_t id = next_id_++;
  auto pos = timer_order_.emplace(when, id);
  timers_.emplace(id, std::make_pair(pos, std::move(fn)));
  return id;
}

void EventLoop::CancelTimer(uint64_t timer) {
  auto it = timers_.find(timer);
  if (it == timers_.end()) return;
  timer_order_.erase(it->second.first);
  timers_.erase(it);
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  Wake();
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Stop() {
  stop_.store(true);
  Wake();
}

void EventLoop::RunPosted() {
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(posted_mu_);
    tasks.swap(posted_);
  }
  for (auto& t : tasks) t();
}

void EventLoop::Run() {
  running_.store(true);
  std::vector<epoll_event> events(256);
  while (!stop_.load()) {
    Clock::time_point until = round_hook_ ? round_hook_() : Clock::time_point::max();
    if (stop_.load()) break;
    if (!timer_order_.empty()) until = std::min(until, timer_order_.begin()->first);
    int n = 0;
    const int size = static_cast<int>(events.size());
    Clock::duration wait = Clock::duration::max();
    if (until != Clock::time_point::max()) {
      wait = std::clamp<Clock::duration>(until - Clock::now(), Clock::duration::zero(),
                                         std::chrono::hours(1));
    }
    if (!no_pwait2_) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      n = ::epoll_pwait2(epoll_fd_, events.data(), size,
                         wait == Clock::duration::max() ? nullptr : &ts, nullptr);
      if (n < 0 && errno == ENOSYS) no_pwait2_ = true;
    }
    if (no_pwait2_) {
      // Round up so a timer is never woken for early.
      const int ms =
          wait == Clock::duration::max()
              ? -1
              : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
      n = ::epoll_wait(epoll_fd_, events.data(), size, ms);
    }
    if (n < 0) {
      if (errno == EINTR) continue;  // the round hook sees what the signal set
      run_status_ = std::unexpected(ErrnoError(errno, "epoll_wait"));
      break;
    }
    ++wakeups_;
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) {
        uint64_t count;
        while (::read(wake_fd_, &count, sizeof(count)) > 0) {
        }
        continue;
      }
      auto it = watches_.find(id);
      if (it == watches_.end()) continue;  // removed earlier in this round
      auto h = it->second.handler;         // the handler may unwatch itself
      (*h)(events[i].events);
    }
    RunPosted();
    const auto now = Clock::now();
    while (!timer_order_.empty() && timer_order_.begin()->first <= now) {
      const uint64_t id = timer_order_.begin()->second;
      auto it = timers_.find(id);
      std::function<void()> fn = std::move(it->second.second);
      timer_order_.erase(timer_order_.begin());
      timers_.erase(it);
      fn();
    }
    if (n == size && events.size() < 8192) events.resize(events.size() * 2);
  }
  RunPosted();
  running_.store(false);
}

uint64_t RaiseOpenFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

}  // namespace anxin::net
