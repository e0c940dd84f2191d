// One epoll event loop on one thread: file descriptors, timers and tasks
// posted from other threads. The serving simulator and the gate run every
// connection on one of these, so thousands of open streams cost no threads.
//
//   #include <sys/epoll.h>
//   #include <unistd.h>
//
//   EventLoop loop;
//   ANXIN_TRY(loop.Init());
//   int fds[2];
//   if (::pipe(fds) != 0) return std::unexpected(ErrnoError(errno, "pipe"));
//   int fd = fds[0];
//   uint64_t id = loop.Watch(fd, EPOLLIN, [&](uint32_t events) {
//     if (events & EPOLLIN) { /* read fd until EAGAIN */ }
//   });
//   loop.RunAfter(std::chrono::milliseconds(20), [&] { /* a timeout fired */ });
//   std::jthread t([&] { loop.Run(); });
//   loop.Post([&] { /* work for the loop's thread */ });   // from any thread: runs on the loop
//   std::optional<size_t> n = loop.CallAndWait([&] { return size_t{1}; }, std::chrono::seconds(1));
//   loop.Stop();                // from any thread: Run returns
//
// Thread safety: Post, CallAndWait, Stop and Running may be called from any
// thread (CallAndWait not from the loop's own: it would wait for itself);
// every other method only from the loop's thread (or before Run).
#ifndef ANXIN_NET_EVENT_LOOP_H_
#define ANXIN_NET_EVENT_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::net {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(uint32_t events)>;

  EventLoop() = default;
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  [[nodiscard]] Status Init();

  // Watches fd for events (EPOLLIN, EPOLLOUT, ...); returns a watch id.
  // Events of a watch removed earlier in the same round are dropped.
  uint64_t Watch(int fd, uint32_t events, Handler handler);
  void Modify(uint64_t watch, uint32_t events);
  // Stops watching (the caller closes the fd).
  void Unwatch(uint64_t watch);

  uint64_t RunAt(Clock::time_point when, std::function<void()> fn);
  uint64_t RunAfter(Clock::duration d, std::function<void()> fn) {
    return RunAt(Clock::now() + d, std::move(fn));
  }
  void CancelTimer(uint64_t timer);

  void Post(std::function<void()> fn);
  // Posts fn and waits for the value it returns on the loop's thread;
  // nullopt when the loop has not run it within `timeout` (stopped or stuck).
  // fn then may still run later, so it must not refer to the caller's stack.
  template <typename F>
  std::optional<std::invoke_result_t<F&>> CallAndWait(F fn, Clock::duration timeout) {
    using R = std::invoke_result_t<F&>;
    auto done = std::make_shared<std::promise<R>>();
    std::future<R> result = done->get_future();
    Post([fn = std::move(fn), done]() mutable { done->set_value(fn()); });
    if (result.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return result.get();
  }
  // Called at the start of every round, on the loop's thread, before the loop
  // waits: the owner's per-round work (what became due, a stop flag a signal
  // handler set -- a signal interrupts the wait, so it is seen at once). It
  // returns the latest time the loop may sleep until (Clock::time_point::max():
  // no limit of its own) and may call Stop.
  void SetRoundHook(std::function<Clock::time_point()> hook) { round_hook_ = std::move(hook); }

  // Runs until Stop. Waits have nanosecond resolution (epoll_pwait2, or
  // epoll_wait rounded up to milliseconds on kernels without it). Returns
  // early only when the wait itself fails; run_status() then says why.
  void Run();
  void Stop();
  bool Running() const { return running_.load(); }
  const Status& run_status() const { return run_status_; }
  // Waits that returned (events, timers or a signal): a client's own cost.
  uint64_t wakeups() const { return wakeups_; }

 private:
  struct Watched {
    int fd;
    std::shared_ptr<Handler> handler;
  };
  void Wake();
  void RunPosted();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Watched> watches_;
  std::multimap<Clock::time_point, uint64_t> timer_order_;
  std::unordered_map<uint64_t, std::pair<std::multimap<Clock::time_point, uint64_t>::iterator,
                                         std::function<void()>>>
      timers_;
  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  std::function<Clock::time_point()> round_hook_;
  Status run_status_;
  uint64_t wakeups_ = 0;
  bool no_pwait2_ = false;
};

// Raises the soft limit of open files to the hard limit (a server holding
// thousands of connections needs it); returns the new soft limit.
uint64_t RaiseOpenFileLimit();

}  // namespace anxin::net

#endif  // ANXIN_NET_EVENT_LOOP_H_
