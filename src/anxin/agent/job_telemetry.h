// The agent's job telemetry: turns what training processes report through
// the SDK (decoded by monitor::SdkReceiver) into per-job, per-rank metrics:
// step-time histogram, collective algorithm and bus bandwidth per operation
// (nccl-tests' formulas), kernel time per kernel name as a rolling median and
// a jitter ratio, heartbeat age and allocator statistics.
//
//   #include "anxin/monitor/sdk_receiver.h"
//
//   monitor::Registry registry;
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<JobTelemetry> jobs,
//                          JobTelemetry::Create(registry, RealClock(), {.node = "node-1"}));
//   ANXIN_ASSIGN_OR_RETURN(auto receiver, monitor::SdkReceiver::Start(
//       {.socket_path = "/run/anxin/agent.sock"},
//       [&](const monitor::SdkDatagram& d, std::span<const uint8_t>) { jobs->Consume(d); }));
//   std::string body = registry.TextExposition();   // refreshes heartbeat ages first
//
// Metrics (labels node, job, rank; units in the names):
//   anxin_job_step_seconds                      histogram of step durations
//   anxin_job_last_step                         the last step that ended
//   anxin_job_last_checkpoint_step              the last step checkpointed
//   anxin_job_collective_seconds{op}            histogram of collective durations
//   anxin_job_collective_algbw_bytes_per_second{op}  last: bytes / duration
//   anxin_job_collective_busbw_bytes_per_second{op}  last: algbw x nccl-tests'
//                                               factor (2(n-1)/n for all_reduce ...)
//   anxin_job_kernel_seconds_median{kernel}     median of the last kernel_window runs
//   anxin_job_kernel_jitter_ratio{kernel}       last run / median of the runs before
//                                               it (3.0: 200% slower); 1 for the first
//   anxin_job_heartbeat_age_seconds             since anything last came from the rank
//   anxin_job_allocator_reserved_bytes          summed over the rank's devices
//   anxin_job_allocator_allocated_bytes         summed over the rank's devices
//   anxin_job_allocator_fragmentation_ratio     the worst of the rank's devices
//   anxin_job_allocator_ooms_total              summed over the rank's devices
//   anxin_job_allocator_remaps_total            summed over the rank's devices
//   anxin_agent_telemetry_dropped_total{limit}  events refused at a cap: limit =
//                                               jobs, ranks or kernels
// and, from a job's supervisor (`anxin run`; labels node, job only, kept for
// the agent's life):
//   anxin_job_restarts_total                    relaunches of the job
//   anxin_job_incidents_total{fault_class}      faults that started a recovery
//   anxin_job_last_recovery_seconds             fault to first progress, the last one
// A series appears with the first event that feeds it; a value never
// reported is left out. A rank silent for `expiry` is forgotten: its series
// go away.
//
// Memory is bounded: at most max_jobs jobs, max_ranks (job, rank) pairs and
// max_kernels kernel names per rank; events for more are dropped and
// counted, and each kernel keeps kernel_window durations.
//
// Thread safety: every method may be called from any thread (one lock).
// Refresh runs from the registry's collect hook; it must not be called from
// a callback of the registry.
#ifndef ANXIN_AGENT_JOB_TELEMETRY_H_
#define ANXIN_AGENT_JOB_TELEMETRY_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/monitor/sdk_wire.h"

namespace anxin::agent {

struct JobTelemetryOptions {
  std::string node{};  // the node label
  size_t max_jobs = 64;
  size_t max_ranks = 1024;  // (job, rank) pairs over all jobs
  size_t max_kernels = 64;  // kernel names per rank
  size_t kernel_window = 32;
  Clock::Duration expiry = std::chrono::minutes(10);
};

// What one rank reported, for the agent's page (history.h): the worst value
// since the previous TakeRanks() (the longest step, the lowest bandwidth, the
// highest jitter), so that a spike between two passes is not lost, or the last
// value when nothing new came. A value the rank never reported is NaN (step
// seconds) or absent (maps, last_step).
struct RankSummary {
  std::string job{};
  int32_t rank = 0;
  int32_t world_size = 1;
  double heartbeat_age_seconds = 0;
  std::optional<uint64_t> last_step{};
  double step_seconds = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, double> busbw_bytes_per_second{};  // op name -> lowest
  std::map<std::string, double> kernel_jitter_ratio{};     // kernel name -> highest
};

struct JobTelemetryStats {
  size_t jobs = 0;
  size_t ranks = 0;
  uint64_t dropped_jobs = 0;  // events of jobs beyond max_jobs
  uint64_t dropped_ranks = 0;
  uint64_t dropped_kernels = 0;
};

class JobTelemetry {
 public:
  // Adds the families to registry (which must outlive this) and a collect
  // hook that calls Refresh. kInvalidArgument for bad options or names taken.
  static Result<std::unique_ptr<JobTelemetry>> Create(monitor::Registry& registry, Clock& clock,
                                                      JobTelemetryOptions options);
  ~JobTelemetry();
  JobTelemetry(const JobTelemetry&) = delete;
  JobTelemetry& operator=(const JobTelemetry&) = delete;

  // Takes in one accepted datagram.
  void Consume(const monitor::SdkDatagram& d);
  // Sets the heartbeat ages to now and forgets ranks silent for `expiry`.
  void Refresh();

  JobTelemetryStats stats() const;
  // Every rank it knows, ordered by (job, rank); heartbeat ages as of now.
  // Starts the next period of worst values (RankSummary): meant for one
  // reader, the agent's history, once per sample pass.
  std::vector<RankSummary> TakeRanks();

 private:
  struct Families;
  struct RankState;
  JobTelemetry(monitor::Registry& registry, Clock& clock, JobTelemetryOptions options);
  RankState* FindOrAddRank(const monitor::SdkSender& sender, size_t events);
  void Forget(const std::string& job, const std::string& rank);
  void ConsumeRecovery(const monitor::SdkSender& sender, const monitor::SdkRecovery& rec);

  Clock& clock_;
  JobTelemetryOptions options_;
  std::unique_ptr<Families> f_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int32_t>, std::unique_ptr<RankState>> ranks_;
  std::map<std::string, size_t> jobs_;  // ranks per job
  // Per job: the last cumulative count seen, by fault class ("\x01restarts"
  // for the restarts).
  std::map<std::string, std::map<std::string, uint64_t>> recovery_;
  // The collect hook may outlive this object; the destructor clears it.
  struct HookGuard;
  std::shared_ptr<HookGuard> guard_;
};

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_JOB_TELEMETRY_H_
