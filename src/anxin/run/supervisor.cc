#include "anxin/run/supervisor.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "anxin/base/subprocess.h"
#include "anxin/run/detector.h"
#include "anxin/run/journal.h"

namespace anxin::run {
namespace {

using SteadyClock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// Fault classes after which the devices are reset (the field practice on
// collective errors and hangs); a plain crash or an OOM only clears memory.
bool NeedsReset(const Fault& f) {
  static const std::set<std::string> kReset = {
      "hang",         "collective_timeout", "collective_error", "peer_failure",     "network",
      "device_error", "device_lost",        "link_down",        "ecc_uncorrectable"};
  return kReset.contains(f.fault_class);
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace

std::string ExpandTemplate(std::string text, const std::string& checkpoint, int64_t step,
                           int attempt) {
  const std::pair<std::string, std::string> subs[] = {{"{checkpoint}", checkpoint},
                                                      {"{step}", std::to_string(step)},
                                                      {"{attempt}", std::to_string(attempt)}};
  for (const auto& [key, value] : subs) {
    for (size_t pos = 0; (pos = text.find(key, pos)) != std::string::npos; pos += value.size()) {
      text.replace(pos, key.size(), value);
    }
  }
  return text;
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
  struct Rank {
    RankPlan plan;
    std::unique_ptr<Subprocess> proc;
    std::thread waiter;
    FILE* log = nullptr;
    bool exited = false;
    bool ok = false;
  };

  SupervisorOptions o;
  device::DeviceBackend* backend;
  std::vector<device::DeviceInfo> devices;
  std::vector<host::NumaNode> nodes;
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

  // The incident whose relaunch waits for progress.
  std::optional<Incident> pending;
  SteadyClock::time_point verify_deadline{};

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

  // Starts every rank of `attempt`.
  Status Launch() {
    const int a = attempt.load();
    LaunchPlanOptions lo = o.launch;
    lo.excluded_devices = excluded;
    if (o.pick_port) {
      ANXIN_ASSIGN_OR_RETURN(lo.master_port, PickFreePort());
    }
    ANXIN_ASSIGN_OR_RETURN(std::vector<RankPlan> plans, PlanRanks(lo, devices, nodes));
    std::vector<std::string> argv;
    for (const std::string& s : o.command) {
      argv.push_back(ExpandTemplate(s, checkpoint_path, checkpoint_step, a));
    }
    ranks.clear();
    ranks.resize(plans.size());
    progress.Restart(SteadyClock::now());
    AttemptInfo info;
    info.attempt = a;
    info.started = SteadyClock::now();
    for (const RankPlan& p : plans) info.devices.push_back(p.device_index);
    for (auto& d : detectors) ANXIN_TRY(d->Start(info));
    for (size_t i = 0; i < plans.size(); ++i) {
      Rank& r = ranks[i];
      r.plan = plans[i];
      for (const std::string& note : r.plan.notes) spdlog::debug("anxin run: rank {}: {}", i, note);
      if (!o.log_dir.empty()) {
        const std::string path = o.log_dir + "/rank-" + std::to_string(i) + ".log";
        r.log = std::fopen(path.c_str(), "ae");
        if (r.log == nullptr) {
          return std::unexpected(ErrnoError(errno, "opening the rank log " + path));
        }
        std::fprintf(r.log, "--- anxin run: attempt %d, rank %zu ---\n", a, i);
        std::fflush(r.log);
      }
      SubprocessOptions so;
      so.argv = argv;
      so.env = r.plan.env;
      for (const std::string& e : o.env) {
        so.env.push_back(ExpandTemplate(e, checkpoint_path, checkpoint_step, a));
      }
      so.env.push_back("ANXIN_RUN_ATTEMPT=" + std::to_string(a));
      so.env.push_back("ANXIN_RESUME_CHECKPOINT=" + checkpoint_path);
      so.env.push_back("ANXIN_RESUME_STEP=" + std::to_string(checkpoint_step));
      if (!o.sdk_socket.empty()) so.env.push_back("ANXIN_AGENT_SOCKET=" + o.sdk_socket);
      so.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_seconds * 1000));
      const int rank = static_cast<int>(i);
      FILE* log = r.log;
      auto on_line = [this, rank, log, a](const OutputLine& l, FILE* copy) {
        const auto now = SteadyClock::now();
        {
          std::lock_guard lock(out_mu);
          if (log != nullptr) {
            std::fwrite(l.text.data(), 1, l.text.size(), log);
            std::fputc('\n', log);
            std::fflush(log);
          }
          if (o.prefix_output) {
            std::fprintf(copy, "[rank %d] %s\n", rank, l.text.c_str());
            std::fflush(copy);
          }
        }
        if (attempt.load() != a) return;
        for (auto& d : detectors) d->OnLine(rank, l.text, now);
      };
      so.on_stdout = [on_line](const OutputLine& l) { on_line(l, stdout); };
      so.on_stderr = [on_line](const OutputLine& l) { on_line(l, stderr); };
      if (lo.numa_bind && !r.plan.cpus.empty()) {
        Status b = BindCurrentThread(r.plan.cpus, r.plan.numa_node);
        if (!b) spdlog::warn("anxin run: rank {}: {}", i, b.error().Describe());
      }
      auto child = Subprocess::Start(std::move(so));
      if (lo.numa_bind && !r.plan.cpus.empty()) (void)BindCurrentThread({}, -1);
      if (!child) return std::unexpected(child.error().With("starting rank " + std::to_string(i)));
      r.proc = std::move(*child);
      Subprocess* proc = r.proc.get();
      r.waiter = std::thread([this, proc, rank, a] {
        auto st = proc->Wait();
        if (!st) return;
        if (attempt.load() == a) {
          for (auto& d : detectors) d->OnExit(rank, *st, SteadyClock::now());
        }
        Event e;
        e.kind = Event::kExit;
        e.attempt = a;
        e.rank = rank;
        e.status = *st;
        Push(std::move(e));
      });
    }
    spdlog::info("anxin run: attempt {}: started {} ranks: {}", a, ranks.size(), Quote(argv));
    return Ok();
  }

  // TERM to every rank's process group, the grace period, then KILL.
  std::string StopRanks() {
    for (auto& d : detectors) d->Stop();
    int running = 0;
    for (Rank& r : ranks) {
      if (r.proc && r.proc->Running()) {
        ++running;
        (void)r.proc->Signal(SIGTERM);
      }
    }
    const auto deadline =
        SteadyClock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_seconds * 1000));
    int killed = 0;
    for (Rank& r : ranks) {
      if (!r.proc) continue;
      if (!r.proc->Wait(deadline)) {
        ++killed;
        (void)r.proc->Stop(std::chrono::nanoseconds(0));
      }
    }
    for (Rank& r : ranks) {
      if (r.waiter.joinable()) r.waiter.join();
      if (r.log != nullptr) std::fclose(r.log);
      r.log = nullptr;
    }
    return std::to_string(running) + " running rank(s) stopped" +
           (killed > 0 ? ", " + std::to_string(killed) + " needed SIGKILL" : "");
  }

  StepRecord Begin(Incident& in, std::string name) {
    StepRecord s;
    s.name = std::move(name);
    s.start = SysClock::now();
    s.end = s.start;
    s.result = "running";
    in.steps.push_back(s);
    Journal(in);
    return s;
  }
  void End(Incident& in, StepRecord s, std::string result, std::string detail) {
    s.end = SysClock::now();
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

  // Returns the exit status when the run must end, nullopt when relaunched.
  std::optional<int> Recover(Fault fault) {
    Incident in;
    in.id = NewIncidentId();
    in.job = Quote(o.command);
    in.attempt = attempt.load();
    in.fault = fault;
    in.detection_seconds = -1;
    spdlog::warn("anxin run: fault: {} [{} {}]", fault.summary, fault.detector, fault.fault_class);
    if (pending) {  // the last relaunch never made progress
      pending->outcome = "failed_again";
      Journal(*pending);
      pending.reset();
    }
    Coordinator::Decision decision = coordinator->OnFault(fault, state);

    StepRecord s = Begin(in, "stop_ranks");
    End(in, s, "ok", StopRanks());

    if (decision.verdict != Coordinator::Verdict::kRestart) {
      in.outcome = decision.verdict == Coordinator::Verdict::kFatal ? "fatal" : "gave_up";
      s = Begin(in, "give_up");
      End(in, s, "ok", decision.why);
      spdlog::error("anxin run: giving up: {}", decision.why);
      return decision.verdict == Coordinator::Verdict::kStorm ? kExitRestartStorm : 1;
    }
    std::vector<int> devs = JobDevices();

    s = Begin(in, "clear_device_memory");
    {
      std::string detail;
      bool ok = true;
      for (int d : devs) {
        Status c = backend ? backend->ClearMemory(d) : Status(Ok());
        if (!c && c.error().code() != ErrorCode::kUnimplemented) {
          ok = false;
          detail += "device " + std::to_string(d) + ": " + c.error().Describe() + "; ";
        }
      }
      End(in, s, ok ? "ok" : "failed",
          ok ? "cleared " + std::to_string(devs.size()) + " device(s)" : detail);
    }

    s = Begin(in, "reset_device");
    if (backend == nullptr || !NeedsReset(fault)) {
      End(in, s, "skipped",
          backend == nullptr ? "no backend" : "not needed after " + fault.fault_class);
    } else {
      std::vector<int> targets = fault.device >= 0 ? std::vector<int>{fault.device} : devs;
      std::string detail;
      bool all_ok = true;
      for (int d : targets) {
        bool ok = false;
        std::string last;
        for (int t = 1; t <= o.reset_retries && !ok; ++t) {
          ++s.tries;
          Status r = backend->Reset(d);
          ok = r.has_value();
          if (!ok) {
            last = r.error().Describe();
            spdlog::warn("anxin run: reset of device {} failed (try {}/{}): {}", d, t,
                         o.reset_retries, last);
            if (t < o.reset_retries) {
              std::this_thread::sleep_for(std::chrono::milliseconds(
                  static_cast<int64_t>(o.reset_retry_delay_seconds * 1000)));
            }
          }
        }
        if (!ok) {
          all_ok = false;
          // Escalate: isolate the device when a spare one can take its place.
          excluded.push_back(d);
          const int usable = static_cast<int>(devices.size() - excluded.size());
          if (usable >= o.launch.nproc_per_node) {
            detail += "device " + std::to_string(d) + " isolated after " +
                      std::to_string(o.reset_retries) + " failed resets (" + last + "); ";
          } else {
            End(in, s, "failed",
                "device " + std::to_string(d) + " did not reset after " +
                    std::to_string(o.reset_retries) + " tries (" + last +
                    ") and no spare device is left");
            in.outcome = "gave_up";
            Journal(in);
            spdlog::error("anxin run: giving up: device {} cannot be reset", d);
            return 1;
          }
        } else {
          detail += "device " + std::to_string(d) + " reset; ";
        }
      }
      if (!detail.empty()) detail.resize(detail.size() - 2);
      End(in, s, all_ok ? "ok" : "degraded", detail);
    }

    s = Begin(in, "wait_links_up");
    if (backend == nullptr) {
      End(in, s, "skipped", "no backend");
    } else {
      const auto deadline =
          SteadyClock::now() +
          std::chrono::milliseconds(static_cast<int64_t>(o.link_timeout_seconds * 1000));
      std::string down;
      for (;;) {
        down.clear();
        for (int d : devs) {
          bool skip = false;
          for (int x : excluded) skip |= x == d;
          if (skip) continue;
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
        if (down.empty() || SteadyClock::now() >= deadline || stop_signal.load() != 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      if (!down.empty()) {
        End(in, s, "failed",
            "still down after " + std::to_string(o.link_timeout_seconds) +
                " s: " + down.substr(0, down.size() - 2));
        in.outcome = "gave_up";
        Journal(in);
        return 1;
      }
      End(in, s, "ok", "all links up");
    }

    s = Begin(in, "select_checkpoint");
    SelectCheckpoint(in, s);

    s = Begin(in, "relaunch");
    ++state.restarts;
    ++state.restarts_without_progress;
    state.attempt = decision.generation;
    attempt.store(decision.generation);
    in.checkpoint = checkpoint_path;
    Status l = Launch();
    if (!l) {
      End(in, s, "failed", l.error().Describe());
      in.outcome = "gave_up";
      Journal(in);
      return 1;
    }
    End(in, s, "ok",
        "attempt " + std::to_string(attempt.load()) +
            (checkpoint_path.empty() ? " from scratch" : " from " + checkpoint_path));
    Begin(in, "verify_progress");
    verify_deadline =
        SteadyClock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(o.verify_timeout_seconds * 1000));
    pending = std::move(in);
    return std::nullopt;
  }

  void SelectCheckpoint(Incident& in, const StepRecord& s) {
    checkpoint_path.clear();
    checkpoint_step = 0;
    if (o.checkpoint_dir.empty()) {
      End(in, s, "skipped", "no --checkpoint-dir: starting from scratch");
      return;
    }
    auto scan = ScanCheckpoints(o.checkpoint_dir);
    if (!scan) {
      End(in, s, "ok", scan.error().Describe() + ": starting from scratch");
      return;
    }
    std::string detail;
    const Checkpoint* c = coordinator->AgreeCheckpoint(*scan);
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
    const auto now = SteadyClock::now();
    if (progress.events() > 0) {
      Incident& in = *pending;
      StepRecord s = in.steps.back();
      in.resumed_step = progress.last_step();
      in.time_to_recovery_seconds = Seconds(now - in.fault.seen);
      in.outcome = "recovered";
      End(in, s, "ok",
          in.resumed_step >= 0 ? "step " + std::to_string(in.resumed_step) + " reached"
                               : "progress seen");
      spdlog::info("anxin run: recovered in {:.2f} s", in.time_to_recovery_seconds);
      state.restarts_without_progress = 0;
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
          "no progress within " + std::to_string(o.verify_timeout_seconds) + " s of the relaunch";
      f.seen = now;
      f.wall = SysClock::now();
      f.attempt = attempt.load();
      Event e;
      e.kind = Event::kFault;
      e.attempt = f.attempt;
      e.fault = std::move(f);
      Push(std::move(e));
    }
  }

  Result<int> Run() {
    (void)BecomeSubreaper();
    if (!coordinator) {
      coordinator = std::make_unique<LocalCoordinator>(o.max_restarts, o.storm_limit);
    }
    ctx.progress = &progress;
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
    // The first launch resumes from the newest valid checkpoint too.
    if (!o.checkpoint_dir.empty()) {
      auto scan = ScanCheckpoints(o.checkpoint_dir);
      if (scan) {
        if (const Checkpoint* c = coordinator->AgreeCheckpoint(*scan)) {
          checkpoint_path = c->path;
          checkpoint_step = c->step;
        }
      }
    }
    ANXIN_TRY(Launch());
    for (;;) {
      std::deque<Event> batch;
      {
        std::unique_lock lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !events.empty(); });
        batch.swap(events);
      }
      if (const int sig = stop_signal.load(); sig != 0) {
        spdlog::warn("anxin run: {} received: stopping the ranks", SignalName(sig));
        StopRanks();
        if (pending) {
          pending->outcome = "stopped";
          Journal(*pending);
        }
        return 128 + sig;
      }
      for (Event& e : batch) {
        if (e.attempt != attempt.load()) continue;  // from ranks already stopped
        if (e.kind == Event::kExit) {
          Rank& r = ranks[static_cast<size_t>(e.rank)];
          r.exited = true;
          r.ok = e.status.ok();
          bool all_ok = true;
          for (const Rank& x : ranks) all_ok &= x.exited && x.ok;
          if (all_ok) {
            StopRanks();
            CheckVerify();
            spdlog::info("anxin run: all {} ranks exited 0", ranks.size());
            return 0;
          }
          continue;
        }
        if (!StartsRecovery(e.fault)) {
          spdlog::warn("anxin run: minor fault recorded: {}", e.fault.summary);
          continue;
        }
        if (auto rc = Recover(std::move(e.fault))) {
          StopRanks();
          return *rc;
        }
        break;  // the rest of the batch belongs to the stopped attempt
      }
      const auto now = SteadyClock::now();
      for (auto& d : detectors) d->Tick(now);
      CheckVerify();
    }
  }
};

Supervisor::Supervisor(SupervisorOptions options, device::DeviceBackend* backend,
                       std::vector<device::DeviceInfo> devices, std::vector<host::NumaNode> nodes,
                       std::unique_ptr<Coordinator> coordinator)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  impl_->backend = backend;
  impl_->devices = std::move(devices);
  impl_->nodes = std::move(nodes);
  impl_->coordinator = std::move(coordinator);
}

Supervisor::~Supervisor() {
  if (impl_) impl_->StopRanks();
}

Result<int> Supervisor::Run() { return impl_->Run(); }

void Supervisor::RequestStop(int sig) { impl_->stop_signal.store(sig); }

}  // namespace anxin::run
