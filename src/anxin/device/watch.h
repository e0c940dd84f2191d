// Refreshing a view of the devices at a fixed interval, and stopping cleanly
// on Ctrl-C.
//
//   #include "anxin/base/stop_token.h"
//   #include "anxin/device/registry.h"
//
//   ANXIN_ASSIGN_OR_RETURN(auto backend, CreateBackend("sim", {}));
//   StopOnSignals signals;                    // Ctrl-C / SIGTERM request a stop
//   ANXIN_TRY(Watch(*backend, RealClock(), {.interval_seconds = 1, .count = 10}, signals.token(),
//                   [](const Snapshot& s, int frame) {
//                     std::printf("frame %d: %zu devices\n", frame, s.rows.size());
//                   }));
#ifndef ANXIN_DEVICE_WATCH_H_
#define ANXIN_DEVICE_WATCH_H_

#include <functional>
#include <stop_token>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/device/table.h"

namespace anxin::device {

struct WatchOptions {
  double interval_seconds = 1;
  int count = 0;  // frames to show; 0 = until stopped
};

// Shows frame 0 at once, then one every interval on the clock (ticks are
// fixed to the start, so slow frames do not make the schedule drift) until
// `count` frames are shown or stop is requested. Returns the number of frames
// shown; fails if a snapshot fails.
Result<int> Watch(DeviceBackend& backend, Clock& clock, const WatchOptions& options,
                  std::stop_token stop,
                  const std::function<void(const Snapshot&, int frame)>& show);

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_WATCH_H_
