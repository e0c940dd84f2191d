// Shared by the `anxin serve` commands: wait for SIGINT / SIGTERM or the end
// of --duration, whichever comes first.
#ifndef ANXIN_CLI_SERVE_WAIT_H_
#define ANXIN_CLI_SERVE_WAIT_H_

#include <signal.h>

#include <chrono>
#include <ctime>

namespace anxin::cli {

// Blocks SIGINT and SIGTERM in this thread (and threads started later).
// Call before starting server threads.
inline void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Returns the signal that arrived, or 0 when duration_seconds (> 0) passed.
inline int WaitForStop(double duration_seconds) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
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

}  // namespace anxin::cli

#endif  // ANXIN_CLI_SERVE_WAIT_H_
