#include "anxin/base/stop_token.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>

namespace anxin {
namespace {

sigset_t StopSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

StopOnSignals::StopOnSignals(SecondSignal second) : second_(second) {
  const sigset_t set = StopSignalSet();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ < 0 || wake_fd_ < 0) {
    // Without the descriptors (out of them) the signals keep their default
    // action: the program ends on them as it would without this object.
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    return;
  }
  watcher_ = std::thread([this] { Watch(); });
}

StopOnSignals::~StopOnSignals() {
  if (watcher_.joinable()) {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    watcher_.join();
  }
  if (signal_fd_ >= 0) close(signal_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void StopOnSignals::Watch() {
  bool reading = true;
  for (;;) {
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}};
    const int n = poll(fds, reading ? 2 : 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[0].revents & POLLIN) != 0) return;
    signalfd_siginfo info{};
    if (read(signal_fd_, &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) continue;
    Trigger(static_cast<int>(info.ssi_signo));
    if (second_ == SecondSignal::kEnds) {
      // From now on the signals act as usual (end the program): this thread
      // is the only one that does not block them.
      reading = false;
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      const sigset_t set = StopSignalSet();
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    }
  }
}

void StopOnSignals::Trigger(int sig) {
  {
    std::lock_guard lock(mu_);
    signal_.store(sig);
  }
  source_.request_stop();
  cv_.notify_all();
}

int StopOnSignals::WaitFor(double seconds) {
  std::unique_lock lock(mu_);
  auto stopped = [&] { return signal_.load() != 0 || source_.stop_requested(); };
  if (seconds > 0) {
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), stopped);
  } else {
    cv_.wait(lock, stopped);
  }
  return signal_.load();
}

void BlockStopSignals() {
  const sigset_t set = StopSignalSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStop(double duration_seconds) {
  const sigset_t set = StopSignalSet();
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_seconds);
  for (;;) {
    timespec ts{1, 0};
    if (duration_seconds > 0) {
      const auto left = end - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return 0;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      ts.tv_sec = static_cast<time_t>(ns / 1000000000);
      ts.tv_nsec = static_cast<long>(ns % 1000000000);
      if (ts.tv_sec > 1) ts = {1, 0};
    }
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
  }
}

}  // namespace anxin
