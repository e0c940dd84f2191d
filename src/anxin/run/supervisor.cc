#include "anxin/run/supervisor.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "anxin/base/file.h"
#include "anxin/base/http.h"
#include "anxin/base/monotonic_clock.h"
#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/monitor/sdk_wire_format.h"
#include "anxin/run/detector.h"
#include "anxin/run/journal.h"
#include "anxin/run/rank_control.h"
#include "anxin/run/sha256.h"

namespace anxin::run {
namespace {

// "2.5 s", "60 s".
std::string FormatSeconds(double seconds) { return fmt::format("{:g} s", seconds); }

std::string Quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace

std::string ExpandTemplate(std::string text, const std::map<std::string, std::string>& vars) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '{') {
      const size_t close = text.find('}', i);
      if (close != std::string::npos) {
        auto it = vars.find(text.substr(i + 1, close - i - 1));
        if (it != vars.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

std::string ExpandTemplate(std::string text, const std::string& checkpoint, int64_t step,
                           int attempt) {
  return ExpandTemplate(std::move(text), {{"checkpoint", checkpoint},
                                          {"step", std::to_string(step)},
                                          {"attempt", std::to_string(attempt)}});
}

PlaybookDefaults PlaybookDefaultsFor(const SupervisorOptions& options) {
  PlaybookDefaults pd;
  pd.stop_grace_seconds = options.stop_grace_seconds;
  pd.reset_tries = options.reset_retries;
  pd.reset_retry_delay_seconds = options.reset_retry_delay_seconds;
  pd.link_timeout_seconds = options.link_timeout_seconds;
  pd.verify_timeout_seconds = options.verify_timeout_seconds;
  return pd;
}

Coordinator::Decision LocalCoordinator::OnFault(const Fault& fault, const RestartState& state) {
  Decision d;
  d.generation = state.attempt + 1;
  if (fault.fault_class.starts_with("fatal_")) {
    d.verdict = Verdict::kFatal;
    d.why = "a restart cannot cure " + fault.fault_class.substr(6);
  } else if (state.restarts_without_progress >= storm_limit_) {
    d.verdict = Verdict::kStorm;
    d.why = "restart storm: " + std::to_string(state.restarts_without_progress) +
            " restarts in a row made no progress";
  } else if (state.restarts >= max_restarts_) {
    d.verdict = Verdict::kGiveUp;
    d.why = "restart budget spent (" + std::to_string(max_restarts_) + ")";
  }
  return d;
}

struct Supervisor::Impl {
  struct Event {
    enum Kind { kExit, kFault } kind;
    int attempt = 0;
    int rank = -1;
    ExitStatus status;
    Fault fault;
  };
  // What a process's output and exit are filed under; a warm spare (rank
  // -1) or a rank that rejoins a new generation in its process changes it.
  struct Slot {
    std::atomic<int> rank{-1};
    std::atomic<int> attempt{-1};
    std::string token;    // ANXIN_CONTROL_TOKEN
    FILE* log = nullptr;  // under out_mu
  };
  struct Rank {
    RankPlan plan;
    std::unique_ptr<Subprocess> proc;
    std::thread waiter;
    std::shared_ptr<Slot> slot;
    bool exited = false;
    bool ok = false;
  };

  SupervisorOptions o;
  Clock* clock = &MonotonicClock();
  device::DeviceBackend* backend;
  std::vector<device::DeviceInfo> devices;
  std::vector<host::NumaNode> nodes;
  // Holds the ranks to the coordinator's lease (multi-node jobs only).
  // Declared before the coordinator, which calls it: it goes last.
  std::unique_ptr<RankFence> fence;
  std::unique_ptr<Coordinator> coordinator;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  std::atomic<int> attempt{0};
  std::atomic<int> stop_signal{0};
  std::mutex out_mu;

  ProgressTracker progress;
  DetectorContext ctx;
  std::vector<std::unique_ptr<Detector>> detectors;
  std::vector<Rank> ranks;
  std::vector<int> excluded;
  RestartState state;
  std::string checkpoint_path;
  int64_t checkpoint_step = 0;

  PlaybookSet playbooks;
  int nproc = 1;            // ranks of the next launch (escalation may lower it)
  int next_generation = 0;  // the coordinator's attempt number for the relaunch
  // What survives the supervisor (STATE_DIR/supervisor.json).
  struct Persisted {
    std::map<int, std::vector<double>> device_faults;  // wall seconds, in the window
    std::map<std::string, uint64_t> incidents_by_class;
  } persist;
  double last_recovery_seconds = -1;

  // The incident whose relaunch waits for progress.
  std::optional<Incident> pending;
  Clock::TimePoint verify_deadline{};
  double verify_timeout_seconds = 0;

  void Push(Event e) {
    {
      std::lock_guard lock(mu);
      events.push_back(std::move(e));
    }
    cv.notify_one();
  }

  void Journal(const Incident& in) {
    if (o.state_dir.empty()) return;
    Status s = WriteIncident(o.state_dir, in);
    if (!s) spdlog::warn("anxin run: journal: {}", s.error().Describe());
  }

  // The ranks of the next launch: this node's place and a fresh port.
  Result<std::vector<RankPlan>> PlanLaunch() {
    LaunchPlanOptions lo = o.launch;
    lo.nproc_per_node = nproc;
    lo.excluded_devices = excluded;
    if (auto p = coordinator->Agreed()) {  // a job over several nodes
      lo.master_addr = p->master_addr;
      lo.master_port = p->master_port;
      lo.node_rank = p->node_rank;
      lo.nnodes = p->nnodes;
    } else if (o.pick_port) {
      ANXIN_ASSIGN_OR_RETURN(lo.master_port, PickFreePort());
    }
    return PlanRanks(lo, devices, nodes);
  }

  std::vector<std::string> JobArgv(int a) const {
    std::vector<std::string> argv;
    for (const std::string& s : o.command) {
      argv.push_back(ExpandTemplate(s, checkpoint_path, checkpoint_step, a));
    }
    return argv;
  }

  // The environment of rank `plan` in attempt a, beyond the inherited one.
  std::vector<std::string> RankEnv(const RankPlan* plan, int a) const {
    std::vector<std::string> env;
    if (plan != nullptr) env = plan->env;
    for (const std::string& e : o.env) {
      env.push_back(ExpandTemplate(e, checkpoint_path, checkpoint_step, a));
    }
    env.push_back("ANXIN_RUN_ATTEMPT=" + std::to_string(a));
    env.push_back("ANXIN_RESUME_CHECKPOINT=" + checkpoint_path);
    env.push_back("ANXIN_RESUME_STEP=" + std::to_string(checkpoint_step));
    return env;
  }

  // Opens LOG_DIR/NAME.log for appending (nullptr without --log-dir).
  Result<FILE*> OpenLog(const std::string& name, const std::string& banner) {
    if (o.log_dir.empty()) return nullptr;
    const std::string path = o.log_dir + "/" + name + ".log";
    FILE* f = std::fopen(path.c_str(), "ae");
    if (f == nullptr) return std::unexpected(ErrnoError(errno, "opening the rank log " + path));
    std::fprintf(f, "--- anxin run: %s ---\n", banner.c_str());
    std::fflush(f);
    return f;
  }

  // Starts one process of the job's command into r: rank `rank` of attempt
  // a (plan set), or a warm spare (plan null, rank -1).
  Status StartProcess(Rank& r, int rank, int a, const RankPlan* plan, const std::string& token,
                      FILE* log) {
    auto slot = std::make_shared<Slot>();
    slot->rank.store(rank);
    slot->attempt.store(a);
    slot->token = token;
    slot->log = log;
    r.slot = slot;
    r.exited = r.ok = false;
    if (plan != nullptr) r.plan = *plan;
    SubprocessOptions so;
    so.argv = JobArgv(a);
    so.env = RankEnv(plan, a);
    if (plan == nullptr) so.env.push_back("ANXIN_SPARE=1");
    if (!o.sdk_socket.empty()) so.env.push_back("ANXIN_AGENT_SOCKET=" + o.sdk_socket);
    if (control) {
      so.env.push_back("ANXIN_CONTROL_SOCKET=" + control->address());
      so.env.push_back("ANXIN_CONTROL_TOKEN=" + token);
    }
    so.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_seconds * 1000));
    auto on_line = [this, slot](const OutputLine& l, FILE* copy) {
      const auto now = clock->Now();
      const int rk = slot->rank.load();
      const int at = slot->attempt.load();
      {
        std::lock_guard lock(out_mu);
        if (slot->log != nullptr) {
          std::fwrite(l.text.data(), 1, l.text.size(), slot->log);
          std::fputc('\n', slot->log);
          std::fflush(slot->log);
        }
        if (o.prefix_output) {
          if (rk >= 0) {
            std::fprintf(copy, "[rank %d] %s\n", rk, l.text.c_str());
          } else {
            std::fprintf(copy, "[%s] %s\n", slot->token.c_str(), l.text.c_str());
          }
          std::fflush(copy);
        }
      }
      if (rk < 0 || attempt.load() != at) return;
      for (auto& d : detectors) d->OnLine(rk, l.text, now);
    };
    so.on_stdout = [on_line](const OutputLine& l) { on_line(l, stdout); };
    so.on_stderr = [on_line](const OutputLine& l) { on_line(l, stderr); };
    const bool bind = plan != nullptr && o.launch.numa_bind && !plan->cpus.empty();
    if (bind) {
      Status b = BindCurrentThread(plan->cpus, plan->numa_node);
      if (!b) spdlog::warn("anxin run: rank {}: {}", rank, b.error().Describe());
    }
    auto child = Subprocess::Start(std::move(so));
    if (bind) (void)BindCurrentThread({}, -1);
    if (!child) return std::unexpected(child.error().With("starting " + token));
    r.proc = std::move(*child);
    if (fence && plan != nullptr) fence->Guard(r.proc->pgid());
    Subprocess* proc = r.proc.get();
    r.waiter = std::thread([this, proc, slot] {
      auto st = proc->Wait();
      if (!st) return;
      const int rk = slot->rank.load();
      const int at = slot->attempt.load();
      if (rk >= 0 && attempt.load() == at) {
        for (auto& d : detectors) d->OnExit(rk, *st, clock->Now());
      }
      Event e;
      e.kind = Event::kExit;
      e.attempt = rk >= 0 ? at : -1;  // a spare's exit is no rank's
      e.rank = rk;
      e.status = *st;
      Push(std::move(e));
    });
    return Ok();
  }

  // The detectors and the progress tracker start watching attempt a.
  Status StartWatching(int a) {
    progress.Restart(clock->Now());
    AttemptInfo info;
    info.attempt = a;
    info.started = clock->Now();
    for (const Rank& r : ranks) info.devices.push_back(r.plan.device_index);
    for (auto& d : detectors) ANXIN_TRY(d->Start(info));
    return Ok();
  }

  // Starts every rank of `attempt`.
  Status Launch() {
    const int a = attempt.load();
    if (fence) fence->Reset();  // a trip before this launch stopped ranks that are gone
    ANXIN_ASSIGN_OR_RETURN(std::vector<RankPlan> plans, PlanLaunch());
    ranks.clear();
    ranks.resize(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) ranks[i].plan = plans[i];
    ANXIN_TRY(StartWatching(a));
    for (size_t i = 0; i < plans.size(); ++i) {
      const int rank = static_cast<int>(i);
      for (const std::string& note : plans[i].notes) {
        spdlog::debug("anxin run: rank {}: {}", i, note);
      }
      ANXIN_ASSIGN_OR_RETURN(
          FILE * log, OpenLog("rank-" + std::to_string(i),
                              "attempt " + std::to_string(a) + ", rank " + std::to_string(i)));
      ANXIN_TRY(StartProcess(ranks[i], rank, a, &plans[i],
                             "rank-" + std::to_string(i) + "-" + std::to_string(a), log));
    }
    spdlog::info("anxin run: attempt {}: started {} ranks: {}", a, ranks.size(), Quote(JobArgv(a)));
    SaveState("running");
    return Ok();
  }

  // Reaps r's process (stopped or exited) and closes its log and connection.
  void Reap(Rank& r) {
    if (fence && r.proc) fence->Release(r.proc->pgid());
    if (r.waiter.joinable()) r.waiter.join();
    if (r.slot) {
      if (control) control->Forget(r.slot->token);
      std::lock_guard lock(out_mu);
      if (r.slot->log != nullptr) std::fclose(r.slot->log);
      r.slot->log = nullptr;
    }
  }

  // TERM to every rank's process group, the grace period, then KILL. Ranks
  // the fence stopped get no grace: they are frozen in a generation that is
  // gone, and a TERM would only reach them if they ran again.
  std::string StopRanks(double grace_seconds) {
    for (auto& d : detectors) d->Stop();
    const bool fenced = fence && fence->Tripped();
    if (fenced) grace_seconds = 0;
    int running = 0;
    for (Rank& r : ranks) {
      if (r.proc && r.proc->Running()) {
        ++running;
        (void)r.proc->Signal(SIGTERM);
      }
    }
    // Real time, whatever the clock: the ranks are real processes.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    int killed = 0;
    for (Rank& r : ranks) {
      if (!r.proc) continue;
      if (!r.proc->Wait(deadline)) {
        ++killed;
        (void)r.proc->Stop(std::chrono::nanoseconds(0));
      }
    }
    for (Rank& r : ranks) Reap(r);
    return std::to_string(running) + " running rank(s) stopped" +
           (fenced && running > 0 ? " (fenced: SIGKILL)"
            : killed > 0          ? ", " + std::to_string(killed) + " needed SIGKILL"
                                  : "");
  }

  StepRecord Begin(Incident& in, std::string name) {
    StepRecord s;
    s.name = std::move(name);
    s.start = clock->Now();
    s.end = s.start;
    s.result = "running";
    in.steps.push_back(s);
    Journal(in);
    return s;
  }
  void End(Incident& in, StepRecord s, std::string result, std::string detail) {
    s.end = clock->Now();
    s.result = std::move(result);
    s.detail = std::move(detail);
    in.steps.back() = s;
    Journal(in);
    spdlog::info("anxin run: {} {} in {:.2f} s: {}", s.name, s.result, s.seconds(), s.detail);
  }

  std::vector<int> JobDevices() const {
    std::vector<int> out;
    for (const Rank& r : ranks) out.push_back(r.plan.device_index);
    return out;
  }

  // ---- Recovery.

  std::map<std::string, std::string> Vars(const Fault& fault) const {
    std::string device;
    if (fault.device >= 0) {
      device = std::to_string(fault.device);
    } else {
      for (int d : JobDevices()) device += (device.empty() ? "" : ",") + std::to_string(d);
    }
    return {{"checkpoint", checkpoint_path},
            {"step", std::to_string(checkpoint_step)},
            {"attempt", std::to_string(attempt.load())},
            {"device", device},
            {"fault", fault.fault_class}};
  }

  // Device faults count towards escalation; a log line of a device class
  // counts for the device of the rank that printed it.
  void AttributeDevice(Fault& f) const {
    static const std::set<std::string> kDeviceClasses = {"device_error", "device_lost", "link_down",
                                                         "ecc_uncorrectable"};
    if (f.device >= 0 || f.rank < 0 || !kDeviceClasses.contains(f.fault_class)) return;
    if (static_cast<size_t>(f.rank) < ranks.size()) {
      f.device = ranks[static_cast<size_t>(f.rank)].plan.device_index;
    }
  }

  // Records a fault of `device`; true when it has had escalate_faults of them
  // within escalate_window.
  bool NoteDeviceFault(int device, std::chrono::system_clock::time_point when) {
    if (device < 0 || o.escalate_faults <= 0) return false;
    std::vector<double>& times = persist.device_faults[device];
    const double now = std::chrono::duration<double>(when.time_since_epoch()).count();
    times.push_back(now);
    std::erase_if(times, [&](double t) { return now - t > o.escalate_window_seconds; });
    return static_cast<int>(times.size()) >= o.escalate_faults;
  }

  // Takes `device` out of the job. nullopt: the job goes on without it;
  // else the exit status (the job is stopped and the escalation playbook run).
  std::optional<int> Escalate(Incident& in, int device, const std::string& why) {
    StepRecord s = Begin(in, "escalate");
    if (std::find(excluded.begin(), excluded.end(), device) == excluded.end()) {
      excluded.push_back(device);
    }
    persist.device_faults.erase(device);
    const int usable = static_cast<int>(devices.size() - excluded.size());
    const std::string what = "device " + std::to_string(device) + ": " + why;
    if (usable >= nproc) {
      End(in, s, "ok", what + ": isolated, a spare device takes its place");
      return std::nullopt;
    }
    const int fewest = o.min_nproc > 0 ? o.min_nproc : nproc;
    if (usable >= fewest && usable >= 1) {
      End(in, s, "ok",
          what + ": isolated, the job goes on with " + std::to_string(usable) + " rank(s)");
      nproc = usable;
      return std::nullopt;
    }
    End(in, s, "failed",
        what + ": cannot isolate it, " + std::to_string(usable) +
            " usable device(s) left and the job needs " + std::to_string(fewest) +
            " (--min-nproc)");
    in.outcome = "escalated";
    Journal(in);
    if (const Playbook* page = playbooks.Escalation()) {
      for (const PlaybookStep& step : page->steps) {
        if (step.kind == StepKind::kStopRanks || step.kind == StepKind::kExec ||
            step.kind == StepKind::kNotify) {
          (void)RunStep(in, step, {});
        }
      }
    }
    spdlog::error("anxin run: stopping: {}", what);
    return kExitEscalated;
  }

  // The result of one step: go on, or end the run with this status.
  using StepOutcome = std::optional<int>;

  // Calls attempt() up to 1 + retries times, retry_delay apart; no try
  // starts after the step's timeout (when it has one). Returns the last
  // error, or Ok.
  template <typename F>
  Status Retry(const PlaybookStep& step, StepRecord& rec, F&& attempt_fn) {
    const auto deadline = clock->Now() + Millis(step.timeout_seconds);
    Status last = Ok();
    for (int t = 0; t <= step.retries; ++t) {
      if (t > 0) {
        if (step.timeout_seconds > 0 &&
            clock->Now() + Millis(step.retry_delay_seconds) > deadline) {
          break;
        }
        clock->SleepFor(Millis(step.retry_delay_seconds));
      }
      ++rec.tries;
      last = attempt_fn();
      if (last) return last;
      spdlog::warn("anxin run: {} failed (try {}/{}): {}", rec.name, t + 1, step.retries + 1,
                   last.error().Describe());
      if (stop_signal.load() != 0) break;
    }
    return last;
  }

  static std::chrono::milliseconds Millis(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }

  StepOutcome RunStep(Incident& in, const PlaybookStep& step, const std::vector<int>& devs) {
    const Fault& fault = in.fault;
    StepRecord s = Begin(in, std::string(StepKindName(step.kind)));
    if (!step.only_for.empty() && std::find(step.only_for.begin(), step.only_for.end(),
                                            fault.fault_class) == step.only_for.end()) {
      End(in, s, "skipped", "not needed after " + fault.fault_class);
      return std::nullopt;
    }
    switch (step.kind) {
      case StepKind::kStopRanks:
        End(in, s, "ok", StopRanks(step.timeout_seconds));
        return std::nullopt;
      case StepKind::kClearDeviceMemory:
        return ClearDeviceMemoryStep(in, step, s, devs);
      case StepKind::kResetDevice:
        return ResetDeviceStep(in, step, s, devs);
      case StepKind::kWaitLinksUp:
        return WaitLinksUpStep(in, step, s, devs);
      case StepKind::kSelectCheckpoint:
        SelectCheckpoint(in, s);
        return ClusterStop(in);
      case StepKind::kRelaunch:
        return RelaunchStep(in, step, s);
      case StepKind::kVerifyProgress:
        // Ends in CheckVerify, from the main loop.
        verify_deadline = clock->Now() + Millis(step.timeout_seconds);
        verify_timeout_seconds = step.timeout_seconds;
        return std::nullopt;
      case StepKind::kExec:
        return ExecStep(in, step, s);
      case StepKind::kNotify:
        return NotifyStep(in, step, s);
    }
    return std::nullopt;
  }

  // A failed step: the recovery goes on, or with on_failure: abort gives up.
  StepOutcome Fail(Incident& in, const PlaybookStep& step, const StepRecord& s,
                   std::string detail) {
    End(in, s, "failed", std::move(detail));
    if (!step.abort_on_failure) return std::nullopt;
    in.outcome = "gave_up";
    Journal(in);
    spdlog::error("anxin run: giving up: {} failed", s.name);
    return 1;
  }

  StepOutcome ClearDeviceMemoryStep(Incident& in, const PlaybookStep& step, StepRecord& s,
                                    const std::vector<int>& devs) {
    if (backend == nullptr) {
      End(in, s, "skipped", "no backend");
      return std::nullopt;
    }
    std::string detail;
    for (int d : devs) {
      Status c = Retry(step, s, [&]() -> Status {
        Status r = backend->ClearMemory(d);
        if (!r && r.error().code() == ErrorCode::kUnimplemented) return Ok();
        return r;
      });
      if (!c) detail += "device " + std::to_string(d) + ": " + c.error().Describe() + "; ";
    }
    if (!detail.empty()) return Fail(in, step, s, detail.substr(0, detail.size() - 2));
    End(in, s, "ok", "cleared " + std::to_string(devs.size()) + " device(s)");
    return std::nullopt;
  }

  bool IsExcluded(int device) const {
    return std::find(excluded.begin(), excluded.end(), device) != excluded.end();
  }

  // Resets the fault's device (else the job's); one that never comes back
  // is escalated.
  StepOutcome ResetDeviceStep(Incident& in, const PlaybookStep& step, StepRecord& s,
                              const std::vector<int>& devs) {
    if (backend == nullptr) {
      End(in, s, "skipped", "no backend");
      return std::nullopt;
    }
    const Fault& fault = in.fault;
    std::vector<int> targets = fault.device >= 0 ? std::vector<int>{fault.device} : devs;
    std::erase_if(targets, [&](int d) { return IsExcluded(d); });
    if (targets.empty()) {
      End(in, s, "skipped", "device " + std::to_string(fault.device) + " is isolated");
      return std::nullopt;
    }
    std::string detail;
    std::vector<std::pair<int, std::string>> broken;
    for (int d : targets) {
      const int before = s.tries;
      Status r = Retry(step, s, [&] { return backend->Reset(d); });
      if (r) {
        detail += "device " + std::to_string(d) + " reset; ";
      } else {
        const std::string why = "did not reset after " + std::to_string(s.tries - before) +
                                " tries (" + r.error().Describe() + ")";
        broken.emplace_back(d, why);
        detail += "device " + std::to_string(d) + " " + why + "; ";
      }
    }
    if (!detail.empty()) detail.resize(detail.size() - 2);
    End(in, s, broken.empty() ? "ok" : "degraded", detail);
    for (const auto& [d, why] : broken) {
      if (auto rc = Escalate(in, d, why)) return rc;
    }
    return std::nullopt;
  }

  // The links of `devs` that are down now, as "device D port P down; ...".
  std::string DownLinks(const std::vector<int>& devs) const {
    std::string down;
    for (int d : devs) {
      if (IsExcluded(d)) continue;
      auto sample = backend->Sample(d);
      if (!sample) {
        down += "device " + std::to_string(d) + " unreachable; ";
        continue;
      }
      for (const auto& l : sample->links) {
        if (!l.up)
          down += "device " + std::to_string(d) + " port " + std::to_string(l.port) + " down; ";
      }
    }
    return down;
  }

  StepOutcome WaitLinksUpStep(Incident& in, const PlaybookStep& step, StepRecord& s,
                              const std::vector<int>& devs) {
    if (backend == nullptr) {
      End(in, s, "skipped", "no backend");
      return std::nullopt;
    }
    const auto deadline = clock->Now() + Millis(step.timeout_seconds);
    ++s.tries;
    std::string down;
    for (;;) {
      down = DownLinks(devs);
      if (down.empty() || clock->Now() >= deadline || stop_signal.load() != 0) break;
      clock->SleepFor(std::chrono::milliseconds(200));
    }
    if (!down.empty()) {
      return Fail(in, step, s,
                  "still down after " + FormatSeconds(step.timeout_seconds) + ": " +
                      down.substr(0, down.size() - 2));
    }
    End(in, s, "ok", "all links up");
    return std::nullopt;
  }

  StepOutcome RelaunchStep(Incident& in, const PlaybookStep& step, StepRecord& s) {
    ++state.restarts;
    ++state.restarts_without_progress;
    state.attempt = next_generation;
    in.checkpoint = checkpoint_path;
    Status l = Retry(step, s, [&] {
      attempt.store(state.attempt);
      Status r = Launch();
      if (!r) {
        StopRanks(0);
        ++state.attempt;  // a fresh attempt number for the next try
      }
      return r;
    });
    if (!l) {
      End(in, s, "failed", l.error().Describe());
      in.outcome = "gave_up";
      Journal(in);
      return 1;
    }
    End(in, s, "ok",
        "attempt " + std::to_string(attempt.load()) + " with " + std::to_string(ranks.size()) +
            " rank(s)" + (checkpoint_path.empty() ? " from scratch" : " from " + checkpoint_path));
    SendCounters(in.fault.fault_class, 0);
    return std::nullopt;
  }

  StepOutcome ExecStep(Incident& in, const PlaybookStep& step, StepRecord& s) {
    const auto vars = Vars(in.fault);
    std::vector<std::string> argv;
    for (const std::string& a : step.argv) argv.push_back(ExpandTemplate(a, vars));
    std::string out;
    Status r = Retry(step, s, [&]() -> Status {
      RunOptions ro;
      ro.timeout = FromSeconds(step.timeout_seconds);
      auto res = RunCommand(argv, ro);
      if (!res) return std::unexpected(res.error());
      out = std::string(Trim(res->stdout_text + res->stderr_text));
      if (res->timed_out) {
        return std::unexpected(Error(ErrorCode::kDeadlineExceeded,
                                     "still running after " + FormatSeconds(step.timeout_seconds)));
      }
      if (!res->ok()) {
        return std::unexpected(
            Error(ErrorCode::kUnavailable, res->Describe() + (out.empty() ? "" : ": " + out)));
      }
      return Ok();
    });
    if (out.size() > 400) out = out.substr(0, 400) + "...";
    if (!r) return Fail(in, step, s, Quote(argv) + ": " + r.error().Describe());
    End(in, s, "ok", Quote(argv) + " exited 0" + (out.empty() ? "" : ": " + out));
    return std::nullopt;
  }

  StepOutcome NotifyStep(Incident& in, const PlaybookStep& step, StepRecord& s) {
    std::string answer;
    Status r = Retry(step, s, [&]() { return Notify(step, in, answer); });
    if (!r) {
      End(in, s, "failed", step.url + ": " + r.error().Describe());
      return std::nullopt;  // a page that does not go out never holds up the recovery
    }
    End(in, s, "ok", step.url + ": " + answer);
    return std::nullopt;
  }

  // POSTs the incident to step.url as an Alertmanager webhook message
  // (payload version 4), which `anxin notify` and most webhooks take.
  static std::string IncidentFingerprint(const std::string& id) {
    Sha256 h;
    h.Update(id);
    return h.HexDigest().substr(0, 16);
  }

  Status Notify(const PlaybookStep& step, const Incident& in, std::string& answer) {
    const std::string& url = step.url;
    const size_t scheme = url.find("://");
    const size_t slash = url.find('/', scheme + 3);
    const std::string base = url.substr(0, slash);
    const std::string path = slash == std::string::npos ? "/" : url.substr(slash);
    HttpClientOptions ho;
    ho.connect_timeout = Millis(step.timeout_seconds);
    ho.timeout = Millis(step.timeout_seconds);
    ANXIN_ASSIGN_OR_RETURN(HttpClient client, HttpClient::ForUrl(base, ho));
    const Fault& f = in.fault;
    const bool escalated = in.outcome == "escalated";
    nlohmann::json labels = {{"alertname", escalated ? "AnxinRunEscalated" : "AnxinRunFault"},
                             {"fault_class", f.fault_class},
                             {"severity", escalated ? "critical" : "warning"},
                             {"job", o.job_id}};
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) labels["node"] = host;
    // In a multi-node job the node's name in the job (its agent's --node).
    if (auto p = coordinator->Agreed()) {
      if (auto view = coordinator->View()) {
        for (const ClusterNodeTimes& n : view->nodes) {
          if (n.node_rank == p->node_rank && !n.node.empty()) labels["node"] = n.node;
        }
      }
    }
    if (f.device >= 0) labels["device"] = std::to_string(f.device);
    if (f.rank >= 0) labels["rank"] = std::to_string(f.rank);
    std::string steps;
    for (const StepRecord& r : in.steps) {
      if (r.result == "running") continue;
      steps += r.name + " " + r.result + (r.detail.empty() ? "" : " (" + r.detail + ")") + "; ";
    }
    nlohmann::json alert = {{"status", "firing"},
                            {"labels", labels},
                            {"annotations",
                             {{"summary", f.summary},
                              {"description", "anxin run incident " + in.id + ", attempt " +
                                                  std::to_string(in.attempt) + ": " + steps}}},
                            {"startsAt", FormatRfc3339(f.wall)},
                            // anxin notify (as Alertmanager's receivers) requires one.
                            {"fingerprint", IncidentFingerprint(in.id)}};
    nlohmann::json msg = {{"version", "4"},
                          {"status", "firing"},
                          {"receiver", "anxin-run"},
                          {"groupKey", "anxin-run:" + in.id},
                          {"groupLabels", {{"alertname", labels["alertname"]}}},
                          {"commonLabels", labels},
                          {"alerts", nlohmann::json::array({alert})}};
    ANXIN_ASSIGN_OR_RETURN(HttpResponse res, client.Post(path, msg.dump()));
    answer = "HTTP " + std::to_string(res.status);
    if (!res.ok()) {
      return std::unexpected(Error(ErrorCode::kUnavailable,
                                   answer + ": " + std::string(Trim(res.body.substr(0, 200)))));
    }
    return Ok();
  }

  // Returns the exit status when the run must end, nullopt when relaunched.
  std::optional<int> Recover(Fault fault, const Playbook* forced = nullptr) {
    AttributeDevice(fault);
    Incident in;
    in.id = NewIncidentId();
    in.job = Quote(o.command);
    in.attempt = attempt.load();
    in.fault = fault;
    in.detection_seconds = fault.detection_seconds;
    spdlog::warn("anxin run: fault: {} [{} {}]", fault.summary, fault.detector, fault.fault_class);
    if (pending) {  // the last relaunch never made progress
      pending->outcome = "failed_again";
      Journal(*pending);
      pending.reset();
    }
    // Not when fenced: the store is likely what is away, and the ranks wait frozen.
    if (fault.fault_class != kFaultLeaseLost) {
      if (auto peers = coordinator->PeersFinished()) return EndWithPeers(in, *peers);
    }
    ++persist.incidents_by_class[fault.fault_class];
    Coordinator::Decision decision = coordinator->OnFault(fault, state);
    next_generation = decision.generation;
    const bool escalate = NoteDeviceFault(fault.device, fault.wall);
    SendCounters(fault.fault_class, 0);

    if (decision.verdict != Coordinator::Verdict::kRestart) {
      StepRecord s = Begin(in, "stop_ranks");
      End(in, s, "ok", StopRanks(o.stop_grace_seconds));
      in.outcome = decision.verdict == Coordinator::Verdict::kFatal ? "fatal" : "gave_up";
      s = Begin(in, "give_up");
      End(in, s, "ok", decision.why);
      spdlog::error("anxin run: giving up: {}", decision.why);
      return decision.verdict == Coordinator::Verdict::kStorm ? kExitRestartStorm : 1;
    }
    if (forced == nullptr && !escalate && InProcessEligible(fault)) return RecoverInProcess(in);
    in.recovery_path = "relaunch";
    const Playbook& book = forced != nullptr ? *forced : playbooks.For(fault.fault_class);
    in.playbook = book.name;
    std::vector<int> devs = JobDevices();
    bool escalated = false;
    for (const PlaybookStep& step : book.steps) {
      // Escalation comes once the ranks are gone, before the devices are touched.
      if (escalate && !escalated && step.kind != StepKind::kStopRanks) {
        escalated = true;
        const std::string why = std::to_string(o.escalate_faults) + " fault(s) within " +
                                FormatSeconds(o.escalate_window_seconds);
        if (auto rc = Escalate(in, fault.device, why)) return rc;
        std::erase(devs, fault.device);
      }
      if (auto rc = RunStep(in, step, devs)) return rc;
      if (step.kind == StepKind::kVerifyProgress) {
        pending = std::move(in);
        return std::nullopt;
      }
    }
    if (!book.Relaunches()) {
      in.outcome = "stopped";
      Journal(in);
      spdlog::error("anxin run: playbook '{}' does not relaunch: the job ends", book.name);
      return 1;
    }
    in.outcome = "relaunched";  // no verify_progress step: nothing to wait for
    Journal(in);
    return std::nullopt;
  }

  // What each rank did, for the end of a job: "rank 0 exited 3", "rank 1
  // still running".
  std::string RankOutcomes() {
    std::string out;
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      std::string what = "not started";
      if (r.proc && r.proc->Running()) {
        what = "still running";
      } else if (r.proc) {
        auto st = r.proc->Wait(std::chrono::steady_clock::now());
        what = st ? st->Describe() : "ended";
      }
      out += (out.empty() ? "" : ", ") + fmt::format("rank {} {}", i, what);
    }
    return out;
  }

  // Every other node finished the job and this one faulted after them (its
  // ranks hung or failed in their teardown, or exited non-zero): the job is
  // over. No restart, no barrier that nobody else will reach: stop what is
  // left and end with status 0, saying what this node's ranks did.
  int EndWithPeers(Incident& in, const std::string& peers) {
    const int64_t last = progress.last_step();
    const std::string ranks_did = RankOutcomes();
    in.recovery_path = "none";
    StepRecord s = Begin(in, "stop_ranks");
    End(in, s, "ok", StopRanks(o.stop_grace_seconds));
    const std::string why = fmt::format(
        "the job finished on the other nodes ({}); this node's ranks {}, then: {} ({}); {}: "
        "ending with the job, without a restart",
        peers, last >= 0 ? "reached step " + std::to_string(last) : "reported no step",
        in.fault.summary, in.fault.fault_class, ranks_did);
    s = Begin(in, "finish");
    End(in, s, "ok", why);
    in.outcome = "peers_finished";
    Journal(in);
    spdlog::warn("anxin run: {}", why);
    return 0;
  }

  // After an agreement: the nodes' view goes into the incident; a placement
  // that stops the job ends the run (exit 1) after the escalation's pages.
  StepOutcome ClusterStop(Incident& in) {
    in.cluster = coordinator->View();
    auto p = coordinator->Agreed();
    if (!p) return std::nullopt;
    next_generation = p->generation;
    if (!p->stop) return std::nullopt;
    StepRecord s = Begin(in, "give_up");
    End(in, s, "ok", p->why);
    in.outcome = "gave_up";
    Journal(in);
    if (const Playbook* page = playbooks.Escalation()) {
      for (const PlaybookStep& step : page->steps) {
        if (step.kind == StepKind::kNotify || step.kind == StepKind::kExec) {
          (void)RunStep(in, step, {});
        }
      }
    }
    spdlog::error("anxin run: stopping: {}", p->why);
    return 1;
  }

  void SelectCheckpoint(Incident& in, const StepRecord& s) {
    checkpoint_path.clear();
    checkpoint_step = 0;
    if (o.checkpoint_dir.empty()) {
      (void)coordinator->AgreeCheckpoint(CheckpointScan{});  // the nodes still meet
      End(in, s, "skipped", "no --checkpoint-dir: starting from scratch");
      return;
    }
    auto scan = ScanCheckpoints(o.checkpoint_dir);
    if (!scan) {
      (void)coordinator->AgreeCheckpoint(CheckpointScan{});
      End(in, s, "ok", scan.error().Describe() + ": starting from scratch");
      return;
    }
    std::string detail;
    const Checkpoint* c = coordinator->AgreeCheckpoint(*scan);
    if (auto p = coordinator->Agreed(); p && !p->stop) {
      detail += "generation " + std::to_string(p->generation) + ", node rank " +
                std::to_string(p->node_rank) + " of " + std::to_string(p->nnodes) + "; ";
    }
    for (const Checkpoint& x : scan->checkpoints) {
      if (&x == c) break;
      if (!x.valid) detail += "skipped " + x.name + " (" + x.reason + "); ";
    }
    if (c != nullptr) {
      checkpoint_path = c->path;
      checkpoint_step = c->step;
      detail += "chose " + c->name + " (" + c->format + ", step " + std::to_string(c->step) + ")";
    } else {
      detail += "no valid checkpoint: starting from scratch";
    }
    End(in, s, "ok", detail);
  }

  // Progress after a relaunch closes the pending incident.
  void CheckVerify() {
    if (!pending) return;
    const auto now = clock->Now();
    if (progress.events() > 0) {
      Incident& in = *pending;
      StepRecord s = in.steps.back();
      in.resumed_step = progress.last_step();
      in.time_to_recovery_seconds = ToSeconds(now - in.fault.seen);
      in.outcome = "recovered";
      End(in, s, "ok",
          in.resumed_step >= 0 ? "step " + std::to_string(in.resumed_step) + " reached"
                               : "progress seen");
      spdlog::info("anxin run: recovered in {:.2f} s", in.time_to_recovery_seconds);
      state.restarts_without_progress = 0;
      last_recovery_seconds = in.time_to_recovery_seconds;
      SendCounters(in.fault.fault_class, last_recovery_seconds);
      pending.reset();
    } else if (now >= verify_deadline) {
      Incident& in = *pending;
      End(in, in.steps.back(), "failed", "no progress within the deadline");
      in.outcome = "failed_again";
      Journal(in);
      pending.reset();
      Fault f;
      f.detector = "verify";
      f.fault_class = "no_progress";
      f.summary =
          "no progress within " + FormatSeconds(verify_timeout_seconds) + " of the relaunch";
      f.seen = now;
      f.wall = clock->Now();
      f.attempt = attempt.load();
      Event e;
      e.kind = Event::kFault;
      e.attempt = f.attempt;
      e.fault = std::move(f);
      Push(std::move(e));
    }
  }

  // ---- State that outlives the supervisor, and counters for the agent.

  std::string StatePath() const { return o.state_dir + "/supervisor.json"; }

  // state: "running" while the job runs (a supervisor that finds it resumes
  // the job), "finished" once Run returned for good.
  void SaveState(const char* what) {
    if (o.state_dir.empty()) return;
    nlohmann::json faults = nlohmann::json::object();
    for (const auto& [d, times] : persist.device_faults) faults[std::to_string(d)] = times;
    nlohmann::json j = {{"state", what},
                        {"pid", static_cast<int>(getpid())},
                        {"job", Quote(o.command)},
                        {"attempt", state.attempt},
                        {"restarts", state.restarts},
                        {"restarts_without_progress", state.restarts_without_progress},
                        {"nproc", nproc},
                        {"excluded_devices", excluded},
                        {"device_faults", faults},
                        {"incidents_by_class", persist.incidents_by_class},
                        {"last_recovery_seconds", last_recovery_seconds}};
    Status st = WriteFileAtomic(StatePath(), j.dump(2) + "\n");
    if (!st) spdlog::warn("anxin run: saving {}: {}", StatePath(), st.error().Describe());
  }

  // Takes over from a supervisor that ended while the job ran. Returns the
  // earlier supervisor's pid, or 0 when there is nothing to resume.
  Result<int> LoadState() {
    if (o.state_dir.empty()) return 0;
    auto text = ReadFile(StatePath());
    if (!text) return 0;
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return DataLoss(StatePath() + ": not a JSON object: remove it to start the job afresh");
    }
    try {
      if (j.value("state", "") != "running") return 0;
      if (const std::string job = j.value("job", ""); !job.empty() && job != Quote(o.command)) {
        spdlog::warn("anxin run: {} belongs to another job ({}): starting afresh", StatePath(),
                     job);
        return 0;
      }
      state.attempt = j.at("attempt").get<int>();
      state.restarts = j.at("restarts").get<int>();
      state.restarts_without_progress = j.value("restarts_without_progress", 0);
      nproc = j.value("nproc", nproc);
      excluded = j.value("excluded_devices", std::vector<int>{});
      const nlohmann::json faults = j.value("device_faults", nlohmann::json::object());
      for (const auto& el : faults.items()) {
        persist.device_faults[std::stoi(el.key())] = el.value().get<std::vector<double>>();
      }
      persist.incidents_by_class = j.value("incidents_by_class", std::map<std::string, uint64_t>{});
      last_recovery_seconds = j.value("last_recovery_seconds", -1.0);
      return j.value("pid", -1);
    } catch (const std::exception& e) {
      return DataLoss(StatePath() + ": " + e.what() + ": remove it to start the job afresh");
    }
  }

  // Journal records the earlier supervisor left open are closed.
  void CloseOpenIncidents(int old_pid) {
    auto all = ReadIncidents(o.state_dir);
    if (!all) {
      spdlog::warn("anxin run: journal: {}", all.error().Describe());
      return;
    }
    for (Incident& in : *all) {
      if (in.outcome != "recovering") continue;
      for (StepRecord& s : in.steps) {
        if (s.result != "running") continue;
        s.end = clock->Now();
        s.result = "interrupted";
        s.detail = "the supervisor (pid " + std::to_string(old_pid) + ") ended during this step";
      }
      in.outcome = "supervisor_restarted";
      Journal(in);
    }
  }

  // Sends restarts, the class's incidents and the last recovery time to the
  // agent (ANXIN_AGENT_SOCKET), as one SDK datagram. Counts are cumulative,
  // so a lost datagram costs nothing but a late update.
  void SendCounters(const std::string& fault_class, double recovery_seconds) {
    if (o.sdk_forward.empty()) return;
    namespace m = monitor;
    std::string job = o.job_id.empty() ? "unknown" : o.job_id;
    if (job.size() > m::kSdkMaxJobIdBytes) job.resize(m::kSdkMaxJobIdBytes);
    std::string cls = fault_class.substr(0, m::kSdkMaxFaultClassBytes);
    if (cls.empty()) return;
    uint8_t buf[512];
    m::SdkDatagramWriter w(buf, sizeof(buf));
    w.BeginHeader({.pid = static_cast<uint32_t>(getpid()),
                   .rank = 0,
                   .world_size = 1,
                   .job = job,
                   .sequence = counter_sequence++});
    const uint64_t now_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock->Now().time_since_epoch())
            .count());
    const double ns = std::clamp(recovery_seconds, 0.0, 7.0 * 24 * 3600) * 1e9;
    if (!w.AddRecovery(now_ns, static_cast<uint64_t>(state.restarts),
                       persist.incidents_by_class[fault_class], static_cast<uint64_t>(ns), cls)) {
      return;
    }
    const size_t n = w.Finish();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (o.sdk_forward.size() >= sizeof(addr.sun_path)) return;
    std::memcpy(addr.sun_path, o.sdk_forward.data(), o.sdk_forward.size());
    const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    if (sendto(fd, buf, n, 0, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0) {
      spdlog::debug("anxin run: counters to {}: {}", o.sdk_forward, std::strerror(errno));
    }
    close(fd);
  }
  uint64_t counter_sequence = 0;

  // ---- In-process restart and warm spares (docs/recovery.md, "In-process
  // restart and warm spares"). The mechanism is RankControl; what follows
  // decides which ranks keep their processes.

  std::unique_ptr<RankControl> control;
  std::vector<Rank> spares;  // warm spares, rank -1 until activated
  int spare_serial = 0;
  int spare_failures = 0;  // spares that exited without being activated

  static bool IsDeviceClass(const std::string& c) {
    return c == "device_error" || c == "device_lost" || c == "link_down" ||
           c == "ecc_uncorrectable";
  }

  bool Answers(const Rank& r) const {
    return r.proc && r.proc->Running() && r.slot && control->Connected(r.slot->token);
  }

  // An in-process recovery needs a fault that left the devices alone, no
  // site playbook of its own, and at least one rank (or spare) under
  // anxin_sdk.run() to keep.
  bool InProcessEligible(const Fault& f) const {
    if (!control || !o.in_process) return false;
    if (IsDeviceClass(f.fault_class) || f.fault_class == "supervisor_restart") return false;
    if (f.fault_class == kFaultLeaseLost) return false;  // its ranks are frozen: none answers
    if (o.playbooks && o.playbooks->by_fault.contains(f.fault_class)) return false;
    for (const Rank& r : ranks) {
      if (Answers(r)) return true;
    }
    for (const Rank& r : spares) {
      if (control->SpareReady(r.slot->token)) return true;
    }
    return false;
  }

  // Spares that died are reaped; the pool is filled up to --warm-spares.
  void MaintainSpares() {
    if (o.warm_spares <= 0 || !control) return;
    for (auto it = spares.begin(); it != spares.end();) {
      if (it->proc && it->proc->Running()) {
        ++it;
        continue;
      }
      ++spare_failures;
      spdlog::warn("anxin run: warm spare {} exited before it was needed", it->slot->token);
      Reap(*it);
      it = spares.erase(it);
    }
    const int limit = 2 * o.warm_spares + 2;
    while (static_cast<int>(spares.size()) < o.warm_spares && spare_failures <= limit) {
      const std::string token = "spare-" + std::to_string(spare_serial++);
      auto log = OpenLog(token, "warm spare");
      Rank r;
      Status st = log ? StartProcess(r, -1, -1, nullptr, token, *log)
                      : Status(std::unexpected(log.error()));
      if (!st) {
        spdlog::warn("anxin run: warm spare: {}", st.error().Describe());
        ++spare_failures;
        Reap(r);
        continue;
      }
      spares.push_back(std::move(r));
    }
  }

  void StopSpares() {
    for (Rank& r : spares) {
      if (r.proc) (void)r.proc->Stop(std::chrono::milliseconds(200));
      Reap(r);
    }
    spares.clear();
  }

  // Takes a ready spare out of the pool; nullopt when none is ready.
  std::optional<Rank> TakeSpare() {
    for (auto it = spares.begin(); it != spares.end(); ++it) {
      if (it->proc && it->proc->Running() && control->SpareReady(it->slot->token)) {
        Rank r = std::move(*it);
        spares.erase(it);
        return r;
      }
    }
    return std::nullopt;
  }

  // The recovery of a fault that did not touch the devices, with in-process
  // restart: abort the ranks that answer, kill the rest, agree on the
  // checkpoint, then each rank of the new generation rejoins in its process,
  // is taken by a warm spare, or is started anew. Returns the exit status
  // when the run must end.
  std::optional<int> RecoverInProcess(Incident& in) {
    in.playbook = "in-process";
    for (auto& d : detectors) d->Stop();
    const int gen = next_generation;

    StepRecord s = Begin(in, "abort_ranks");
    std::vector<std::string> asked;
    for (Rank& r : ranks) {
      if (Answers(r) && control->Send(r.slot->token, {{"abort", {{"generation", gen}}}})) {
        asked.push_back(r.slot->token);
      }
    }
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(o.abort_timeout_seconds * 1000));
    const std::set<std::string> answered =
        control->WaitAborted(asked, gen, deadline, [this](const std::string& token) {
          for (const Rank& r : ranks) {
            if (r.slot && r.slot->token == token) return !r.proc || !r.proc->Running();
          }
          return true;
        });
    int exited = 0, killed = 0;
    std::vector<bool> keep(ranks.size(), false);
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (r.slot && answered.contains(r.slot->token)) {
        keep[i] = true;
        continue;
      }
      if (r.proc && r.proc->Running()) {
        ++killed;
        (void)r.proc->Stop(std::chrono::nanoseconds(0));
      } else {
        ++exited;
      }
      Reap(r);
      r.proc.reset();
    }
    End(in, s, "ok",
        fmt::format("{} rank(s) aborted in their processes, {} had exited, {} did not answer "
                    "within {} and were killed",
                    answered.size(), exited, killed, FormatSeconds(o.abort_timeout_seconds)));

    // The people on call hear of it as on the playbook's path: the notify
    // steps of the playbook the fault would have run (they touch no rank).
    for (const PlaybookStep& step : playbooks.For(in.fault.fault_class).steps) {
      if (step.kind != StepKind::kNotify) continue;
      if (auto rc = RunStep(in, step, {})) {
        StopRanks(o.stop_grace_seconds);
        return rc;
      }
    }

    StepRecord c = Begin(in, "select_checkpoint");
    SelectCheckpoint(in, c);
    if (auto rc = ClusterStop(in)) {
      StopRanks(o.stop_grace_seconds);
      return rc;
    }

    StepRecord j = Begin(in, "rejoin");
    ++state.restarts;
    ++state.restarts_without_progress;
    state.attempt = next_generation;
    attempt.store(state.attempt);
    const int a = state.attempt;
    in.checkpoint = checkpoint_path;
    auto plans = PlanLaunch();
    if (!plans) {
      End(in, j, "failed", plans.error().Describe());
      StopRanks(0);
      in.outcome = "gave_up";
      Journal(in);
      return 1;
    }
    std::vector<Rank> old = std::move(ranks);
    ranks.clear();
    ranks.resize(plans->size());
    if (fence) fence->Reset();
    for (size_t i = 0; i < plans->size(); ++i) ranks[i].plan = (*plans)[i];
    (void)StartWatching(a);
    int rejoined = 0, from_spare = 0, started = 0;
    std::string failures;
    for (size_t i = 0; i < plans->size(); ++i) {
      const RankPlan& plan = (*plans)[i];
      const int rank = static_cast<int>(i);
      std::vector<std::string> env = RankEnv(&plan, a);
      nlohmann::json env_json = nlohmann::json::object();
      for (const std::string& e : env) {
        const size_t eq = e.find('=');
        if (eq != std::string::npos) env_json[e.substr(0, eq)] = e.substr(eq + 1);
      }
      const nlohmann::json msg = {{"rejoin",
                                   {{"generation", a},
                                    {"env", env_json},
                                    {"checkpoint", checkpoint_path},
                                    {"step", checkpoint_step}}}};
      // Its own process first, else a warm spare, else a new process.
      std::optional<Rank> take;
      if (i < old.size() && keep[i]) {
        take = std::move(old[i]);
        old[i].proc.reset();
      } else {
        take = TakeSpare();
      }
      if (take) {
        const bool spare = take->slot->rank.load() < 0;
        take->slot->rank.store(rank);
        take->slot->attempt.store(a);
        if (spare) {
          auto log = OpenLog("rank-" + std::to_string(i), "attempt " + std::to_string(a) +
                                                              ", rank " + std::to_string(i) +
                                                              ", from " + take->slot->token);
          std::lock_guard lock(out_mu);
          if (take->slot->log != nullptr) std::fclose(take->slot->log);
          take->slot->log = log ? *log : nullptr;
        }
        take->plan = plan;
        if (fence && spare) fence->Guard(take->proc->pgid());
        take->exited = take->ok = false;
        if (control->Send(take->slot->token, msg)) {
          (spare ? from_spare : rejoined)++;
          ranks[i] = std::move(*take);
          continue;
        }
        (void)take->proc->Stop(std::chrono::nanoseconds(0));  // gone meanwhile
        Reap(*take);
      }
      auto log = OpenLog("rank-" + std::to_string(i),
                         "attempt " + std::to_string(a) + ", rank " + std::to_string(i));
      Status st = log ? StartProcess(ranks[i], rank, a, &plan,
                                     "rank-" + std::to_string(i) + "-" + std::to_string(a), *log)
                      : Status(std::unexpected(log.error()));
      if (!st) failures += st.error().Describe() + "; ";
      ++started;
    }
    for (size_t i = 0; i < old.size(); ++i) {  // survivors the new generation has no place for
      if (old[i].proc) {
        (void)old[i].proc->Stop(std::chrono::nanoseconds(0));
        Reap(old[i]);
      }
    }
    in.recovery_path = started > 0 ? "relaunch" : from_spare > 0 ? "spare" : "in-process";
    if (!failures.empty()) {
      End(in, j, "failed", failures.substr(0, failures.size() - 2));
      StopRanks(0);
      in.outcome = "gave_up";
      Journal(in);
      return 1;
    }
    End(in, j, "ok",
        fmt::format("attempt {}: {} rank(s) rejoined in their processes, {} from warm spares, {} "
                    "started anew, {}",
                    a, rejoined, from_spare, started,
                    checkpoint_path.empty() ? "from scratch" : "from " + checkpoint_path));
    SendCounters(in.fault.fault_class, 0);
    SaveState("running");
    MaintainSpares();
    PlaybookStep verify;
    verify.kind = StepKind::kVerifyProgress;
    verify.timeout_seconds = o.verify_timeout_seconds;
    (void)RunStep(in, verify, {});
    pending = std::move(in);
    return std::nullopt;
  }

  Result<int> Run() {
    auto rc = RunJob();
    StopSpares();
    if (coordinator) coordinator->Finish(rc ? *rc : 3);
    // A stop request leaves the job resumable; an end for good does not.
    if (rc && !(*rc >= 128 && stop_signal.load() != 0)) SaveState("finished");
    return rc;
  }

  Result<int> RunJob() {
    (void)BecomeSubreaper();
    nproc = o.launch.nproc_per_node;
    playbooks = o.playbooks ? *o.playbooks : DefaultPlaybooks(PlaybookDefaultsFor(o));
    if (!coordinator) {
      coordinator = std::make_unique<LocalCoordinator>(o.max_restarts, o.storm_limit);
    }
    fence = std::make_unique<RankFence>();
    if (coordinator->AttachGate(*fence)) {
      // Before the coordinator's threads start: the fork copies only this one.
      if (Status g = fence->StartGuard(); !g) {
        spdlog::warn("anxin run: {}: the ranks are fenced only while the supervisor runs",
                     g.error().Describe());
      }
    } else {
      fence.reset();
    }
    ANXIN_TRY(CreateDetectors());
    if (o.in_process) {
      auto rc = RankControl::Start();
      if (rc) {
        control = std::move(*rc);
      } else {
        spdlog::warn("anxin run: no in-process restart: {}", rc.error().Describe());
      }
    }
    ANXIN_ASSIGN_OR_RETURN(const int old_pid, o.resume ? LoadState() : Result<int>(0));
    if (old_pid != 0) {
      if (auto rc = ResumeJob(old_pid)) return *rc;
    } else {
      if (auto rc = ChooseFirstCheckpoint()) return *rc;
      ANXIN_TRY(Launch());
    }
    for (;;) {
      std::deque<Event> batch = NextEvents();
      if (const int sig = stop_signal.load(); sig != 0) {
        spdlog::warn("anxin run: {} received: stopping the ranks", SignalName(sig));
        StopRanks(o.stop_grace_seconds);
        if (pending) {
          pending->outcome = "stopped";
          Journal(*pending);
        }
        return 128 + sig;
      }
      // Before anything the ranks did is acted on: has this node lost its
      // place in the job (a lease not renewed in time, also because this
      // process was stalled)? Then its ranks are stopped and it rejoins.
      if (auto trip = fence ? fence->Tripped() : std::nullopt) {
        if (auto rc = RecoverFenced(*trip)) return *rc;
        continue;  // the batch belongs to the stopped attempt
      }
      for (Event& e : batch) {
        if (e.attempt != attempt.load()) continue;  // from ranks already stopped
        if (e.kind == Event::kExit) {
          if (auto rc = OnExit(e)) return *rc;
          continue;
        }
        if (!StartsRecovery(e.fault)) {
          spdlog::warn("anxin run: minor fault recorded: {}", e.fault.summary);
          continue;
        }
        if (auto rc = Recover(std::move(e.fault))) {
          StopRanks(o.stop_grace_seconds);
          return *rc;
        }
        break;  // the rest of the batch belongs to the stopped attempt
      }
      const auto now = clock->Now();
      for (auto& d : detectors) d->Tick(now);
      CheckVerify();
      MaintainSpares();
    }
  }

  // A tripped fence is a fault of class lease_lost for the running attempt;
  // returns the exit status when its recovery ends the run.
  std::optional<int> RecoverFenced(const RankFence::Trip& trip) {
    Fault f;
    f.detector = "fence";
    f.fault_class = kFaultLeaseLost;
    f.severity = device::Severity::kCritical;
    f.summary = trip.why;
    f.seen = clock->Now();
    f.wall = f.seen;
    f.attempt = attempt.load();
    if (auto rc = Recover(std::move(f))) {
      StopRanks(o.stop_grace_seconds);
      return rc;
    }
    return std::nullopt;
  }

  // The detectors named in the options (all registered ones when none are),
  // each configured from run.detectors.NAME.
  Status CreateDetectors() {
    ctx.progress = &progress;
    ctx.clock = clock;
    ctx.backend = backend;
    ctx.checkpoint_dir = o.checkpoint_dir;
    ctx.sdk_socket = o.sdk_socket;
    ctx.sdk_forward = o.sdk_forward;
    ctx.hang_timeout_override = o.hang_timeout_seconds;
    ctx.report = [this](Fault f) {
      f.attempt = attempt.load();
      Event e;
      e.kind = Event::kFault;
      e.attempt = f.attempt;
      e.fault = std::move(f);
      Push(std::move(e));
    };
    ANXIN_TRY(coordinator->Start(ctx.report));
    std::vector<std::string> names = o.detectors;
    if (names.empty()) {
      for (const DetectorEntry& e : RegisteredDetectors()) names.push_back(e.name);
    }
    std::optional<ConfigNode> dsec;
    if (o.run_section && o.run_section->Has("detectors")) {
      ANXIN_ASSIGN_OR_RETURN(ConfigNode d, o.run_section->Child("detectors"));
      const std::vector<DetectorEntry> entries = RegisteredDetectors();
      std::vector<std::string_view> known;
      for (const DetectorEntry& e : entries) known.push_back(e.name);
      ANXIN_TRY(d.CheckKeys(known));
      dsec = d;
    }
    for (const std::string& n : names) {
      std::optional<ConfigNode> sec;
      if (dsec && dsec->Has(n)) {
        ANXIN_ASSIGN_OR_RETURN(ConfigNode c, dsec->Child(n));
        if (!c.IsNull()) sec = c;
      }
      ANXIN_ASSIGN_OR_RETURN(auto det, CreateDetector(n, sec, ctx));
      detectors.push_back(std::move(det));
    }
    return Ok();
  }

  // The ranks died with the earlier supervisor (pid old_pid); go on from the
  // newest valid checkpoint, with its attempt and restart counts. Returns the
  // exit status when the run ends there.
  std::optional<int> ResumeJob(int old_pid) {
    CloseOpenIncidents(old_pid);
    spdlog::warn("anxin run: resuming the job of supervisor pid {} (attempt {}, {} restarts)",
                 old_pid, state.attempt, state.restarts);
    attempt.store(state.attempt);
    Fault f;
    f.detector = "supervisor";
    f.fault_class = "supervisor_restart";
    f.severity = device::Severity::kMajor;
    f.summary =
        "the supervisor (pid " + std::to_string(old_pid) + ") ended while the job ran; resuming it";
    f.seen = clock->Now();
    f.wall = f.seen;
    f.attempt = state.attempt;
    if (playbooks.by_fault.contains("supervisor_restart")) return Recover(std::move(f));
    Playbook resume;
    resume.name = "resume";
    for (StepKind k : {StepKind::kStopRanks, StepKind::kSelectCheckpoint, StepKind::kRelaunch,
                       StepKind::kVerifyProgress}) {
      PlaybookStep st;
      st.kind = k;
      st.timeout_seconds =
          k == StepKind::kVerifyProgress ? o.verify_timeout_seconds : o.stop_grace_seconds;
      resume.steps.push_back(st);
    }
    return Recover(std::move(f), &resume);
  }

  // The first launch resumes from the newest valid checkpoint too (the
  // nodes of a multi-node job meet here first). Returns the exit status when
  // the agreement ends the job before it starts.
  std::optional<int> ChooseFirstCheckpoint() {
    auto scan = o.checkpoint_dir.empty() ? Result<CheckpointScan>(CheckpointScan{})
                                         : ScanCheckpoints(o.checkpoint_dir);
    if (!scan) scan = CheckpointScan{};
    if (const Checkpoint* c = coordinator->AgreeCheckpoint(*scan)) {
      checkpoint_path = c->path;
      checkpoint_step = c->step;
    }
    if (auto p = coordinator->Agreed()) {
      if (p->stop) {
        spdlog::error("anxin run: stopping: {}", p->why);
        return 1;
      }
      state.attempt = p->generation;
      attempt.store(p->generation);
    }
    return std::nullopt;
  }

  // The events of the last 100 ms (or fewer, as soon as there are some).
  std::deque<Event> NextEvents() {
    std::deque<Event> batch;
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !events.empty(); });
    batch.swap(events);
    return batch;
  }

  // A rank exited; returns 0 once every rank has exited 0.
  std::optional<int> OnExit(const Event& e) {
    Rank& r = ranks[static_cast<size_t>(e.rank)];
    r.exited = true;
    r.ok = e.status.ok();
    bool all_ok = true;
    for (const Rank& x : ranks) all_ok &= x.exited && x.ok;
    if (!all_ok) return std::nullopt;
    StopRanks(o.stop_grace_seconds);
    CheckVerify();
    spdlog::info("anxin run: all {} ranks exited 0", ranks.size());
    return 0;
  }
};

Supervisor::Supervisor(SupervisorOptions options, device::DeviceBackend* backend,
                       std::vector<device::DeviceInfo> devices, std::vector<host::NumaNode> nodes,
                       std::unique_ptr<Coordinator> coordinator)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  if (impl_->o.clock != nullptr) impl_->clock = impl_->o.clock;
  impl_->backend = backend;
  impl_->devices = std::move(devices);
  impl_->nodes = std::move(nodes);
  impl_->coordinator = std::move(coordinator);
}

Supervisor::~Supervisor() {
  if (impl_) {
    impl_->StopRanks(impl_->o.stop_grace_seconds);
    impl_->StopSpares();
  }
}

Result<int> Supervisor::Run() { return impl_->Run(); }

void Supervisor::RequestStop(int sig) { impl_->stop_signal.store(sig); }

}  // namespace anxin::run
