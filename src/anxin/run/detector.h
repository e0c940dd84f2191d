// Detectors of the `anxin run` supervisor: each watches one kind of evidence
// (rank exits, log lines, progress, device faults) and reports Faults. They
// are registered by name and configured from the `run.detectors.NAME`
// section of the configuration file (docs/recovery.md).
//
//   ProgressTracker progress;
//   DetectorContext ctx;                      // ctx.clock: MonotonicClock() unless set
//   ctx.report = [](Fault f) { std::printf("%s\n", f.summary.c_str()); };
//   ctx.progress = &progress;
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<Detector> d,
//                          CreateDetector("log_patterns", std::nullopt, ctx));
//   ANXIN_TRY(d->Start(AttemptInfo{}));
//   d->OnLine(0, "RuntimeError: HCCL_E_TIMEOUT", ctx.clock->Now());   // reports
//
// Thread safety: OnLine and OnExit are called from the ranks' output threads,
// several at once; Tick, Start and Stop from the supervisor's thread. Each
// detector guards its own state.
#ifndef ANXIN_RUN_DETECTOR_H_
#define ANXIN_RUN_DETECTOR_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/base/monotonic_clock.h"
#include "anxin/base/subprocess.h"
#include "anxin/device/backend.h"
#include "anxin/run/fault.h"

namespace anxin::run {

// What detectors share: where to report, the progress record, the backend.
struct DetectorContext {
  FaultSink report;
  // The clock of every time the detectors get and report; it never moves by
  // itself in tests (a VirtualClock). REQUIRES: outlives the detectors.
  Clock* clock = &MonotonicClock();
  ProgressTracker* progress = nullptr;
  device::DeviceBackend* backend = nullptr;  // may be null
  std::string checkpoint_dir;                // "" when not given
  // The supervisor's SDK socket (the ranks' ANXIN_AGENT_SOCKET); "" = none.
  std::string sdk_socket;
  // Where the SDK datagrams go on to (the agent's socket); "" = nowhere.
  std::string sdk_forward;
  // > 0: overrides the hang detector's configured timeout (--hang-timeout).
  double hang_timeout_override = 0;
};

// The launch being watched.
struct AttemptInfo {
  int attempt = 0;
  std::vector<int> devices;  // backend indices, rank order
  Clock::TimePoint started{};
};

class Detector {
 public:
  virtual ~Detector() = default;
  virtual std::string_view name() const = 0;
  // A launch begins; the detector resets what it learned about the last one.
  virtual Status Start(const AttemptInfo& attempt) {
    (void)attempt;
    return Ok();
  }
  // The ranks are being stopped; report nothing until the next Start.
  virtual void Stop() {}
  virtual void OnLine(int rank, std::string_view line, Clock::TimePoint when) {
    (void)rank, (void)line, (void)when;
  }
  virtual void OnExit(int rank, const ExitStatus& status, Clock::TimePoint when) {
    (void)rank, (void)status, (void)when;
  }
  // Called about every 100 ms.
  virtual void Tick(Clock::TimePoint now) { (void)now; }
};

// Builds a detector from its configuration section (nullopt: defaults).
using DetectorFactory = std::function<Result<std::unique_ptr<Detector>>(
    const std::optional<ConfigNode>& section, DetectorContext& context)>;

// Adds a detector kind; returns true so it can initialise a static.
bool RegisterDetector(std::string name, std::string summary, DetectorFactory factory);

struct DetectorEntry {
  std::string name;
  std::string summary;
};
// Sorted by name.
std::vector<DetectorEntry> RegisteredDetectors();

// An unknown name -> kInvalidArgument listing the known ones.
Result<std::unique_ptr<Detector>> CreateDetector(std::string_view name,
                                                 const std::optional<ConfigNode>& section,
                                                 DetectorContext& context);

}  // namespace anxin::run

#endif  // ANXIN_RUN_DETECTOR_H_
