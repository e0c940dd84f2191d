#include "anxin/device/watch.h"

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

}  // namespace anxin::device
