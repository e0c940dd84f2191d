// A fault seen by a detector of the `anxin run` supervisor, and the progress
// record the hang detector and the recovery check read.
//
//   ProgressTracker progress;
//   progress.Note(120, "log", RealClock().Now());
//   Fault f;
//   f.detector = "log";
//   f.fault_class = "collective_timeout";
//   f.summary = "rank 1: HCCL collective timed out";
//   std::printf("%s %lld\n", f.summary.c_str(), static_cast<long long>(progress.last_step()));
//
// Thread safety: ProgressTracker may be used from any thread; Fault is a
// plain value.
#ifndef ANXIN_RUN_FAULT_H_
#define ANXIN_RUN_FAULT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/device/backend.h"

namespace anxin::run {

struct Fault {
  std::string detector;     // "exit", "log", "hang", "device"
  std::string fault_class;  // "process_exit", "collective_timeout", "device_lost", ...
  device::Severity severity = device::Severity::kCritical;
  int rank = -1;                      // -1: not tied to one rank
  int device = -1;                    // the device's index, -1 when not known
  std::string summary;                // one line for people
  std::vector<std::string> evidence;  // the lines or readings that show it
  // When the detector saw it, on the supervisor's clock (DetectorContext::clock).
  Clock::TimePoint seen{};
  std::chrono::system_clock::time_point wall{};  // the same instant, for the journal
  int attempt = 0;                               // the launch it belongs to (set by the supervisor)
  // From the evidence's own time (a backend event's timestamp) to the
  // detector's report; < 0 when the evidence has no time of its own.
  double detection_seconds = -1;
};

// Faults of severity minor are recorded; major and critical start a recovery.
inline bool StartsRecovery(const Fault& f) { return f.severity != device::Severity::kMinor; }

using FaultSink = std::function<void(Fault)>;

// The newest sign of forward progress: a step number from a log line or the
// SDK, or a checkpoint directory changing.
class ProgressTracker {
 public:
  using TimePoint = Clock::TimePoint;

  // step < 0: progress without a step number (a heartbeat, a new checkpoint).
  void Note(int64_t step, const char* source, TimePoint when) {
    std::lock_guard lock(mu_);
    last_ = when;
    ++events_;
    if (step > last_step_) {  // a step no rank had reached before
      last_step_ = step;
      if (step_time_ == TimePoint{}) first_step_time_ = when;
      step_time_ = when;
      ++steps_;
    }
    source_ = source;
  }
  // Starts a new attempt: no progress yet, the clock for hangs starts at `when`.
  void Restart(TimePoint when) {
    std::lock_guard lock(mu_);
    last_ = when;
    events_ = 0;
    steps_ = 0;
    step_time_ = {};
    first_step_time_ = {};
    last_step_ = -1;
  }
  TimePoint last() const {
    std::lock_guard lock(mu_);
    return last_;
  }
  // Progress events since Restart.
  int64_t events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  int64_t last_step() const {
    std::lock_guard lock(mu_);
    return last_step_;
  }
  // Mean seconds between new steps of this attempt; 0 before two of them.
  double mean_step_seconds() const {
    std::lock_guard lock(mu_);
    if (steps_ < 2) return 0;
    return std::chrono::duration<double>(step_time_ - first_step_time_).count() /
           static_cast<double>(steps_ - 1);
  }
  // New steps reached since Restart.
  int64_t steps() const {
    std::lock_guard lock(mu_);
    return steps_;
  }

 private:
  mutable std::mutex mu_;
  TimePoint last_{};
  TimePoint step_time_{};
  TimePoint first_step_time_{};
  int64_t events_ = 0;
  int64_t steps_ = 0;
  int64_t last_step_ = -1;
  const char* source_ = "";
};

}  // namespace anxin::run

#endif  // ANXIN_RUN_FAULT_H_
