#include "anxin/device/watch.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace anxin::device {

Result<int> Watch(DeviceBackend& backend, Clock& clock, const WatchOptions& options,
                  std::stop_token stop,
                  const std::function<void(const Snapshot&, int frame)>& show) {
  if (!(options.interval_seconds > 0)) {
    return InvalidArgument("the refresh interval must be above 0 seconds");
  }
  const Clock::TimePoint start = clock.Now();
  int frame = 0;
  while (!stop.stop_requested()) {
    ANXIN_ASSIGN_OR_RETURN(Snapshot snap, TakeSnapshot(backend, clock));
    show(snap, frame);
    ++frame;
    if (options.count > 0 && frame >= options.count) break;
    if (!clock.SleepUntil(start + FromSeconds(options.interval_seconds * frame), stop)) break;
  }
  return frame;
}

std::stop_token StopOnInterrupt() {
  static std::stop_source* source = [] {
    auto* s = new std::stop_source();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([s, set] {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) return;
      s->request_stop();
      // From now on the signals act as usual (end the program): this thread
      // is the only one that does not block them.
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      for (;;) pause();
    }).detach();
    return s;
  }();
  return source->get_token();
}

}  // namespace anxin::device
