// The `anxin run` supervisor: launches the ranks of a single-node job, feeds
// their output and exits to the detectors, and on a fault runs the recovery
// playbook mapped from the fault's class (playbook.h; by default
// stop_ranks, clear_device_memory, reset_device, wait_links_up,
// select_checkpoint, relaunch, verify_progress), journaling every step.
// A device with too many faults in a window is isolated, or the job stopped
// (kExitEscalated). A supervisor started again on the same state_dir after
// dying (even by SIGKILL) closes the open incident and resumes the job from
// the newest valid checkpoint with the same attempt and restart counts.
//
//   SupervisorOptions o;
//   o.command = {"python3", "train.py", "--resume", "{checkpoint}"};
//   o.launch.nproc_per_node = 2;
//   o.checkpoint_dir = "/tmp/ckpt";
//   o.state_dir = "/tmp/anxin-state";
//   ANXIN_ASSIGN_OR_RETURN(auto backend, device::CreateBackend("sim", {}));
//   ANXIN_ASSIGN_OR_RETURN(auto devices, backend->Enumerate());
//   Supervisor s(std::move(o), backend.get(), devices, {});
//   ANXIN_ASSIGN_OR_RETURN(int status, s.Run());   // 0: the job finished
//
// Decisions that a multi-node deployment takes together (whether to restart,
// at which generation, from which checkpoint) go through the Coordinator
// seam; LocalCoordinator decides for one node.
//
// Thread safety: Run on one thread; RequestStop from any thread or a signal
// handler.
#ifndef ANXIN_RUN_SUPERVISOR_H_
#define ANXIN_RUN_SUPERVISOR_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/device/registry.h"
#include "anxin/host/topology.h"
#include "anxin/run/checkpoint.h"
#include "anxin/run/fault.h"
#include "anxin/run/journal.h"
#include "anxin/run/launch.h"
#include "anxin/run/playbook.h"
#include "anxin/run/rank_fence.h"

namespace anxin::run {

// Exit statuses of `anxin run` beyond docs/exit-codes.md's 0-3: the job was
// stopped after this many restarts in a row made no progress.
inline constexpr int kExitRestartStorm = 4;
// A device kept failing (escalation) and the job cannot go on without it:
// the job was stopped and the escalation playbook (a page) run.
inline constexpr int kExitEscalated = 5;

struct SupervisorOptions {
  // The rank command; "{checkpoint}", "{step}" and "{attempt}" are replaced
  // at each launch (an empty path and step 0 when there is no checkpoint).
  std::vector<std::string> command;
  std::vector<std::string> env;  // extra NAME=VALUE for every rank, templated too
  LaunchPlanOptions launch;
  bool pick_port = true;       // a free MASTER_PORT for each launch
  int max_restarts = 3;        // relaunches in the whole run
  int storm_limit = 3;         // relaunches in a row without progress -> kExitRestartStorm
  std::string log_dir;         // rank-N.log files; "" = none
  std::string state_dir;       // incidents/; "" = no journal
  std::string checkpoint_dir;  // "" = always start from scratch
  double stop_grace_seconds = 5;
  int reset_retries = 3;  // tries of reset_device
  double reset_retry_delay_seconds = 1;
  double link_timeout_seconds = 60;
  double verify_timeout_seconds = 300;
  // The playbooks by fault class; nullopt = the shipped default built from
  // the values above.
  std::optional<PlaybookSet> playbooks;
  // Escalation: escalate_faults faults of one device within the window
  // isolate it (0 = never). The job may shrink to min_nproc ranks when no
  // spare device is left (0 = it may not shrink); below that it stops.
  int escalate_faults = 3;
  double escalate_window_seconds = 3600;
  int min_nproc = 0;
  // The job id of the counters sent to the agent (as the SDK's ANXIN_JOB_ID).
  std::string job_id;
  // Resume a job an earlier supervisor of this state_dir left running.
  bool resume = true;
  // > 0: the hang detector's timeout, over run.detectors.hang.timeout.
  double hang_timeout_seconds = 0;
  // Detectors by name (RegisteredDetectors()); empty = all.
  std::vector<std::string> detectors;
  // The `run:` section of the configuration (run.detectors.NAME configures
  // each detector); nullopt = defaults.
  std::optional<ConfigNode> run_section;
  // The SDK socket the ranks get as ANXIN_AGENT_SOCKET; "" = none.
  std::string sdk_socket;
  std::string sdk_forward;
  bool prefix_output = true;  // copy rank output to stdout/stderr as "[rank N] ..."
  // In-process restart (docs/recovery.md, "In-process
  // restart and warm spares"): ranks that run under anxin_sdk.run() and
  // survived a fault are aborted and rejoin the next generation in their
  // processes; one that has not answered the abort within
  // abort_timeout_seconds is killed and relaunched.
  bool in_process = true;
  double abort_timeout_seconds = 5;
  // Processes of the job's command kept waiting in anxin_sdk.run() to take
  // the place of a rank that died (requires in_process).
  int warm_spares = 0;
  // The clock of the detectors, the playbook steps' deadlines and retry
  // delays, and the journal's times; nullptr = MonotonicClock() (a hang
  // timeout is not cut short by the system clock being set). Tests give a
  // VirtualClock (with the sim backend on the same one) so that timeouts pass
  // without waiting. The ranks' stop grace is always real time. REQUIRES: it
  // outlives the supervisor.
  Clock* clock = nullptr;
};

// The step timings of the shipped default playbooks (DefaultPlaybooks) that
// the options ask for: stop grace, reset tries and delay, link and verify
// timeouts.
PlaybookDefaults PlaybookDefaultsFor(const SupervisorOptions& options);

// What the coordinator is told about the run so far.
struct RestartState {
  int attempt = 0;
  int restarts = 0;
  int restarts_without_progress = 0;
};

// The cross-node decision seam (docs/recovery.md, "Many nodes").
class Coordinator {
 public:
  enum class Verdict { kRestart, kGiveUp, kStorm, kFatal };
  struct Decision {
    Verdict verdict = Verdict::kRestart;
    int generation = 0;  // the attempt number of the relaunch
    std::string why;
  };
  virtual ~Coordinator() = default;
  virtual Decision OnFault(const Fault& fault, const RestartState& state) = 0;
  // The checkpoint every node resumes from, given this node's scan. Before
  // every launch, the first one too; a multi-node coordinator blocks here
  // until the nodes of the generation meet (the barrier).
  virtual const Checkpoint* AgreeCheckpoint(const CheckpointScan& local) = 0;

  // Multi-node coordinators only (the defaults serve one node).
  // Where this node's ranks sit in the launch AgreeCheckpoint agreed on.
  struct Placement {
    int generation = 0;
    int node_rank = 0;
    int nnodes = 1;
    std::string master_addr;
    int master_port = 0;
    bool stop = false;  // the job ends (too few nodes, another node gave up)
    std::string why;
  };
  // Called once before anything else. Faults seen elsewhere (another
  // node's, a node lost) come back through report, from any thread.
  virtual Status Start(FaultSink report) {
    (void)report;
    return Ok();
  }
  // A coordinator that holds this node's place in the job by a lease takes
  // the supervisor's gate (before Start) and returns true: it calls
  // gate.RunUntil after each renewal and gate.Fence once it knows the lease
  // is gone; the supervisor stops the ranks when the gate's time passes and
  // reports a fault of class kFaultLeaseLost, which OnFault must answer
  // without the store (it may be what is away): the node rejoins. The gate
  // outlives the coordinator. False (the default): no lease, no fence.
  virtual bool AttachGate(RankGate& gate) {
    (void)gate;
    return false;
  }
  // nullopt: one node; the options' own addresses and ranks.
  virtual std::optional<Placement> Agreed() const { return std::nullopt; }
  // Asked when this node faults, before OnFault: every other node of the
  // running generation has finished (its ranks all exited 0). Then the job
  // is over and this node ends too, without a restart or a barrier; the
  // result names those nodes ("node-0, node-1 finished generation 3").
  // nullopt: they have not, there are none, or the store does not say.
  virtual std::optional<std::string> PeersFinished() { return std::nullopt; }
  // The last agreement, for the incident journal.
  virtual std::optional<ClusterView> View() const { return std::nullopt; }
  // Run is over with this status (0: the job finished).
  virtual void Finish(int status) { (void)status; }
};

// One node: the restart budget and storm limit of SupervisorOptions.
class LocalCoordinator final : public Coordinator {
 public:
  LocalCoordinator(int max_restarts, int storm_limit)
      : max_restarts_(max_restarts), storm_limit_(storm_limit) {}
  Decision OnFault(const Fault& fault, const RestartState& state) override;
  const Checkpoint* AgreeCheckpoint(const CheckpointScan& local) override { return local.Chosen(); }

 private:
  int max_restarts_;
  int storm_limit_;
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, device::DeviceBackend* backend,
             std::vector<device::DeviceInfo> devices, std::vector<host::NumaNode> nodes,
             std::unique_ptr<Coordinator> coordinator = nullptr);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the job to the end. Returns 0 when every rank exited 0, 1 when it
  // failed for good (budget spent, a fault a restart cannot cure, a reset or
  // link that never came back), kExitRestartStorm, or 128+signal after
  // RequestStop. Errors: bad options or detector configuration
  // (kInvalidArgument), a rank that cannot start at all.
  Result<int> Run();
  // Stops the ranks and makes Run return 128 + sig. Async-signal-safe.
  void RequestStop(int sig);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Replaces {checkpoint}, {step} and {attempt} in text.
std::string ExpandTemplate(std::string text, const std::string& checkpoint, int64_t step,
                           int attempt);
// Replaces each {NAME} whose NAME is in vars; other braces stay as they are.
std::string ExpandTemplate(std::string text, const std::map<std::string, std::string>& vars);

}  // namespace anxin::run

#endif  // ANXIN_RUN_SUPERVISOR_H_
