// The agent's short memory for its page (page.h): the last minutes of every
// device's readings and of every job's telemetry, and a timeline of the
// fault events and threshold crossings it has seen, served as JSON. Bounded:
// ring buffers of fixed size that overwrite their oldest entry.
//
//   monitor::Registry registry;
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<History> history,
//                          History::Create(registry, {.node = "node-1"}));
//   device::Snapshot snapshot;                 // DeviceExporter's on_snapshot gives one
//   history->RecordSnapshot(snapshot);         // after each sample pass
//   std::vector<RankSummary> ranks;            // JobTelemetry::TakeRanks()
//   history->RecordJobs(snapshot.time, ranks);
//   device::FaultEvent fault;                  // from the backend's subscription
//   history->RecordFault(fault);
//   std::string body = history->DevicesJson(0);  // GET /api/v1/history
//
// Series: per device, one point per sample pass (time, HBM used, temperature,
// power, utilisation; null where the device did not report one or did not
// answer); per job, one point per pass while the job reports: the last step,
// and over its ranks the worst since the previous pass (RankSummary): the
// longest step, per collective the lowest bus bandwidth, per kernel the
// highest jitter ratio.
//
// Events: the backend's fault events, and what the agent infers from
// consecutive samples: error codes raised or cleared and links down or up
// (for backends without fault events, or faults they do not push), a device
// that stops answering or comes back, health changes, and crossings of the
// alert lines of `anxin devices` (85 C or the throttle point; 90 % HBM),
// which clear 2 C / 2 points below the line so that noise does not flap.
// A change the backend already reported is not inferred again.
//
// Memory: points per series = min(window / interval, max_points); at most
// max_jobs jobs (their series are kept until they age out of the window)
// with max_kernels kernel series each; max_events events, each detail cut
// to 256 bytes. With the defaults (10 min at 1 s: 600 points) a device takes
// 24 KB, a job up to 180 KB (9 operations, 16 kernels), the timeline up to
// 400 KB: 16 devices and 16 jobs stay under 4 MB. What a cap refuses is counted in
// anxin_agent_history_dropped_total{what="events"|"jobs"|"kernels"}.
//
// Thread safety: every method may be called from any thread (one lock).
#ifndef ANXIN_AGENT_HISTORY_H_
#define ANXIN_AGENT_HISTORY_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/agent/job_telemetry.h"
#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/device/table.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/monitor/sdk_wire.h"

namespace anxin::agent {

struct HistoryOptions {
  std::string node{};  // the node label of the self-metrics
  Clock::Duration interval = std::chrono::seconds(1);
  Clock::Duration window = std::chrono::minutes(10);
  size_t max_points = 3600;  // per series, whatever window / interval says
  size_t max_jobs = 16;
  size_t max_kernels = 16;  // kernel series per job
  size_t max_events = 1024;
};

class History {
 public:
  // Adds anxin_agent_history_dropped_total to registry (which must outlive
  // this). kInvalidArgument for a zero interval, window or cap.
  static Result<std::unique_ptr<History>> Create(monitor::Registry& registry,
                                                 HistoryOptions options);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  void RecordSnapshot(const device::Snapshot& snap);
  void RecordJobs(Clock::TimePoint time, const std::vector<RankSummary>& ranks);
  void RecordFault(const device::FaultEvent& event);
  // A job's supervisor (`anxin run`) reports a finished recovery: one
  // timeline event for the job (device -1, label "job <id>", source "job").
  // Records without a recovery time only update counters and are skipped.
  void RecordRecovery(Clock::TimePoint time, std::string_view job,
                      const monitor::SdkRecovery& recovery);

  // GET /api/v1/history: {"node", "source", "time", "interval_seconds",
  // "window_seconds", "points", "devices": [{"index", "label", "model",
  // "hbm_total_bytes", "throttle_celsius", "health", "links": [{"port",
  // "up"}], "t": [unix seconds], "hbm_used_bytes": [...],
  // "temperature_celsius": [...], "power_watts": [...],
  // "utilisation_percent": [...]}]}, with only the points after `since`
  // (unix seconds; 0: all). docs/dashboard.md.
  std::string DevicesJson(double since) const;
  // GET /api/v1/jobs: {"time", "jobs": [{"job", "ranks", "world_size",
  // "last_step", "heartbeat_age_seconds", "t": [...], "step": [...],
  // "step_seconds": [...], "busbw_bytes_per_second": {op: [...]},
  // "kernel_jitter_ratio": {kernel: [...]}}]}, points after `since`.
  std::string JobsJson(double since) const;
  // GET /api/v1/events: {"next", "dropped", "capacity", "events": [{"seq",
  // "time", "unix", "device", "label", "kind", "severity", "detail",
  // "source"}]}, oldest first, those with seq > after. "next" is the seq to
  // ask after next time.
  std::string EventsJson(uint64_t after) const;

  // Points kept per series.
  size_t capacity() const { return capacity_; }

 private:
  struct DeviceSeries;
  struct JobSeries;
  struct Event;
  explicit History(HistoryOptions options);
  // Returns the new event's seq.
  uint64_t AddEvent(Clock::TimePoint time, int device, std::string kind, std::string severity,
                    std::string detail, std::string source);
  // Sets the severity of event `seq` if the ring still has it.
  void SetSeverity(uint64_t seq, std::string severity);
  void Trim(Clock::TimePoint now);

  HistoryOptions options_;
  size_t capacity_ = 0;
  monitor::Counter* dropped_events_ = nullptr;
  monitor::Counter* dropped_jobs_ = nullptr;
  monitor::Counter* dropped_kernels_ = nullptr;

  mutable std::mutex mu_;
  std::string source_;
  Clock::TimePoint last_time_{};
  std::map<int, std::unique_ptr<DeviceSeries>> devices_;  // by device index
  std::map<std::string, std::unique_ptr<JobSeries>> jobs_;
  std::vector<Event> events_;  // ring of max_events
  size_t events_next_ = 0;     // where the next event goes once the ring is full
  uint64_t next_seq_ = 1;
};

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_HISTORY_H_
