// The built-in detectors: exit, log_patterns, hang, device_faults, sdk.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include "anxin/monitor/sdk_receiver.h"
#include "anxin/run/detector.h"
#include "anxin/run/signatures.h"

namespace anxin::run {
namespace {

std::map<std::string, std::pair<std::string, DetectorFactory>>& Registry() {
  static auto* r = new std::map<std::string, std::pair<std::string, DetectorFactory>>();
  return *r;
}

Fault MakeFault(std::string detector, std::string fault_class, device::Severity severity, int rank,
                std::string summary, Clock::TimePoint when) {
  Fault f;
  f.detector = std::move(detector);
  f.fault_class = std::move(fault_class);
  f.severity = severity;
  f.rank = rank;
  f.summary = std::move(summary);
  f.seen = when;
  f.wall = when;
  return f;
}

// ---- exit: a rank that ends with a non-zero status or a signal.
class ExitDetector final : public Detector {
 public:
  explicit ExitDetector(DetectorContext& ctx) : ctx_(ctx) {}
  std::string_view name() const override { return "exit"; }
  Status Start(const AttemptInfo&) override {
    active_ = true;
    return Ok();
  }
  void Stop() override { active_ = false; }
  void OnExit(int rank, const ExitStatus& status, Clock::TimePoint when) override {
    if (!active_ || status.ok()) return;
    Fault f = MakeFault("exit", "process_exit", device::Severity::kCritical, rank,
                        "rank " + std::to_string(rank) + " " + status.Describe(), when);
    f.evidence.push_back(status.Describe());
    ctx_.report(std::move(f));
  }

 private:
  DetectorContext& ctx_;
  std::atomic<bool> active_{false};
};

// ---- log_patterns: the signature library over every output line.
class LogPatternDetector final : public Detector {
 public:
  LogPatternDetector(DetectorContext& ctx, LogMatcher matcher)
      : ctx_(ctx), matcher_(std::move(matcher)) {}
  std::string_view name() const override { return "log_patterns"; }
  Status Start(const AttemptInfo&) override {
    active_ = true;
    return Ok();
  }
  void Stop() override { active_ = false; }
  void OnLine(int rank, std::string_view line, Clock::TimePoint when) override {
    if (!active_) return;
    const LogSignature* s = matcher_.Match(line);
    if (s == nullptr) return;
    Fault f =
        MakeFault("log", s->fault_class, s->severity, rank,
                  "rank " + std::to_string(rank) + ": " + s->id + " (" + s->meaning + ")", when);
    f.evidence.emplace_back(line);
    if (!s->retryable) f.fault_class = "fatal_" + f.fault_class;
    ctx_.report(std::move(f));
  }

 private:
  DetectorContext& ctx_;
  LogMatcher matcher_;
  std::atomic<bool> active_{false};
};

// ---- hang: no progress for `timeout` seconds.
struct HangOptions {
  double timeout_seconds = 60;
  std::string progress_regex = R"(step[ =:]*(\d+))";
  // > 0: after warmup_steps steps, the timeout becomes
  // max(min_timeout, factor x mean step time).
  double learn_factor = 0;
  int warmup_steps = 5;
  double min_timeout_seconds = 5;
  bool watch_checkpoints = true;
};

class HangDetector final : public Detector {
 public:
  HangDetector(DetectorContext& ctx, HangOptions o)
      : ctx_(ctx), o_(std::move(o)), progress_(o_.progress_regex, std::regex::ECMAScript) {}
  std::string_view name() const override { return "hang"; }
  Status Start(const AttemptInfo&) override {
    reported_ = false;
    active_ = true;
    last_ckpt_mtime_ = CheckpointMtime();
    return Ok();
  }
  void Stop() override { active_ = false; }
  void OnLine(int, std::string_view line, Clock::TimePoint when) override {
    if (!active_) return;
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(line.begin(), line.end(), m, progress_)) return;
    int64_t step = -1;
    if (m.size() > 1 && m[1].matched) {
      std::from_chars(&*m[1].first, &*m[1].first + m[1].length(), step);
    }
    ctx_.progress->Note(step, "log", when);
  }
  void Tick(Clock::TimePoint now) override {
    if (!active_ || reported_) return;
    if (o_.watch_checkpoints && !ctx_.checkpoint_dir.empty() && now >= next_ckpt_poll_) {
      next_ckpt_poll_ = now + std::chrono::seconds(1);
      const int64_t m = CheckpointMtime();
      if (m != last_ckpt_mtime_) {
        last_ckpt_mtime_ = m;
        ctx_.progress->Note(-1, "checkpoint", now);
      }
    }
    // The clock runs from the attempt's first sign of progress: start-up
    // (imports, data loading, the first collective's rendezvous) can take
    // far longer than a step, and a relaunch's start-up is bounded by the
    // playbook's verify_progress deadline instead.
    if (ctx_.progress->events() == 0) return;
    double timeout = o_.timeout_seconds;
    if (o_.learn_factor > 0 && ctx_.progress->steps() >= o_.warmup_steps) {
      timeout =
          std::max(o_.min_timeout_seconds, o_.learn_factor * ctx_.progress->mean_step_seconds());
    }
    const double idle = std::chrono::duration<double>(now - ctx_.progress->last()).count();
    if (idle < timeout) return;
    reported_ = true;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "no progress for %.1f s (timeout %.1f s, last step %lld)", idle,
                  timeout, static_cast<long long>(ctx_.progress->last_step()));
    Fault f = MakeFault("hang", "hang", device::Severity::kCritical, -1, buf, now);
    f.evidence.emplace_back(buf);
    ctx_.report(std::move(f));
  }

 private:
  int64_t CheckpointMtime() const {
    if (ctx_.checkpoint_dir.empty()) return 0;
    // The newest modification among the directory and its direct entries.
    std::error_code ec;
    int64_t newest = 0;
    struct stat st {};
    if (stat(ctx_.checkpoint_dir.c_str(), &st) == 0)
      newest = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    for (const auto& e : std::filesystem::directory_iterator(ctx_.checkpoint_dir, ec)) {
      if (stat(e.path().c_str(), &st) == 0) {
        newest = std::max<int64_t>(newest, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
      }
    }
    return newest;
  }

  DetectorContext& ctx_;
  HangOptions o_;
  std::regex progress_;
  std::atomic<bool> active_{false};
  bool reported_ = false;
  int64_t last_ckpt_mtime_ = 0;
  Clock::TimePoint next_ckpt_poll_{};
};

// ---- device_faults: the backend's fault events for the job's devices.
class DeviceFaultDetector final : public Detector {
 public:
  explicit DeviceFaultDetector(DetectorContext& ctx) : ctx_(ctx) {}
  std::string_view name() const override { return "device_faults"; }
  Status Start(const AttemptInfo& attempt) override {
    {
      std::lock_guard lock(mu_);
      devices_ = attempt.devices;
      active_ = true;
    }
    if (ctx_.backend == nullptr || subscribed_) return Ok();
    auto sub = ctx_.backend->SubscribeFaults([this](const device::FaultEvent& e) { OnEvent(e); });
    if (!sub) {
      if (sub.error().code() == ErrorCode::kUnimplemented) return Ok();  // nothing to watch
      return std::unexpected(sub.error());
    }
    sub_ = std::move(*sub);
    subscribed_ = true;
    return Ok();
  }
  void Stop() override {
    std::lock_guard lock(mu_);
    active_ = false;
  }

 private:
  void OnEvent(const device::FaultEvent& e) {
    {
      std::lock_guard lock(mu_);
      if (!active_ || std::find(devices_.begin(), devices_.end(), e.index) == devices_.end())
        return;
    }
    std::string cls;
    device::Severity sev = device::Severity::kCritical;
    switch (e.kind) {
      case device::FaultKind::kDeviceLost:
        cls = "device_lost";
        break;
      case device::FaultKind::kLinkDown:
        cls = "link_down";
        break;
      case device::FaultKind::kEccErrors:
        cls = "ecc_uncorrectable";
        break;
      case device::FaultKind::kResetFailed:
        cls = "device_error";
        break;
      case device::FaultKind::kErrorRaised: {
        cls = "device_error";
        sev = device::Severity::kMajor;
        auto s = ctx_.backend->Sample(e.index);
        if (s) {
          for (const auto& c : s->error_codes) {
            if (c.code == e.code) sev = c.severity;
          }
        }
        break;
      }
      default:
        return;  // cleared, link up, reset done: good news
    }
    if (e.kind == device::FaultKind::kEccErrors) {
      // Only uncorrectable errors endanger the job.
      auto s = ctx_.backend->Sample(e.index);
      if (s && s->ecc.double_bit == 0) sev = device::Severity::kMinor;
    }
    Fault f = MakeFault("device", cls, sev, -1,
                        "device " + std::to_string(e.index) + ": " +
                            std::string(device::FaultKindName(e.kind)) +
                            (e.code.empty() ? "" : " " + e.code) +
                            (e.message.empty() ? "" : " (" + e.message + ")"),
                        ctx_.clock->Now());
    f.device = e.index;
    if (e.time != Clock::TimePoint{}) {
      f.detection_seconds = std::max(0.0, std::chrono::duration<double>(f.wall - e.time).count());
    }
    f.evidence.push_back(f.summary);
    ctx_.report(std::move(f));
  }

  DetectorContext& ctx_;
  std::mutex mu_;
  std::vector<int> devices_;
  bool active_ = false;
  bool subscribed_ = false;
  device::FaultSubscription sub_;
};

// ---- sdk: steps and heartbeats from the job telemetry SDK are progress.
class SdkDetector final : public Detector {
 public:
  explicit SdkDetector(DetectorContext& ctx) : ctx_(ctx) {}
  std::string_view name() const override { return "sdk"; }
  Status Start(const AttemptInfo&) override {
    if (receiver_ || ctx_.sdk_socket.empty()) return Ok();
    monitor::SdkReceiverOptions o;
    o.socket_path = ctx_.sdk_socket;
    o.forward_path = ctx_.sdk_forward;
    ProgressTracker* progress = ctx_.progress;
    Clock* clock = ctx_.clock;
    auto r = monitor::SdkReceiver::Start(
        o, [progress, clock](const monitor::SdkDatagram& d, std::span<const uint8_t>) {
          const auto now = clock->Now();
          for (const monitor::SdkEvent& e : d.events) {
            if (auto* end = std::get_if<monitor::SdkStepEnd>(&e.body)) {
              progress->Note(static_cast<int64_t>(end->step), "sdk", now);
            } else if (std::holds_alternative<monitor::SdkHeartbeat>(e.body) ||
                       std::holds_alternative<monitor::SdkStepBegin>(e.body)) {
              progress->Note(-1, "sdk", now);
            }
          }
        });
    if (!r) return std::unexpected(r.error().With("starting the SDK socket " + ctx_.sdk_socket));
    receiver_ = std::move(*r);
    return Ok();
  }

 private:
  DetectorContext& ctx_;
  std::unique_ptr<monitor::SdkReceiver> receiver_;
};

Result<HangOptions> ReadHang(const std::optional<ConfigNode>& s) {
  HangOptions o;
  if (!s) return o;
  ANXIN_TRY(s->CheckKeys({"timeout", "progress_regex", "learn_factor", "warmup_steps",
                          "min_timeout", "watch_checkpoints"}));
  ANXIN_ASSIGN_OR_RETURN(o.timeout_seconds, s->GetSeconds("timeout", o.timeout_seconds));
  ANXIN_ASSIGN_OR_RETURN(o.progress_regex, s->Get<std::string>("progress_regex", o.progress_regex));
  ANXIN_ASSIGN_OR_RETURN(o.learn_factor, s->GetInRange<double>("learn_factor", 0, 1000, 0));
  ANXIN_ASSIGN_OR_RETURN(o.warmup_steps, s->GetInRange<int>("warmup_steps", 2, 1000000, 5));
  ANXIN_ASSIGN_OR_RETURN(o.min_timeout_seconds, s->GetSeconds("min_timeout", 5));
  ANXIN_ASSIGN_OR_RETURN(o.watch_checkpoints, s->Get<bool>("watch_checkpoints", true));
  try {
    std::regex test(o.progress_regex, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode r, s->Child("progress_regex"));
    return std::unexpected(r.MakeError(std::string("bad regex: ") + e.what()));
  }
  return o;
}

[[maybe_unused]] const bool kRegistered = [] {
  RegisterDetector("exit", "a rank exits with a non-zero status or is killed by a signal",
                   [](const std::optional<ConfigNode>& s,
                      DetectorContext& ctx) -> Result<std::unique_ptr<Detector>> {
                     if (s) ANXIN_TRY(s->CheckKeys({}));
                     return std::make_unique<ExitDetector>(ctx);
                   });
  RegisterDetector("log_patterns", "rank output lines that match the failure signature library",
                   [](const std::optional<ConfigNode>& s,
                      DetectorContext& ctx) -> Result<std::unique_ptr<Detector>> {
                     std::vector<LogSignature> sigs = BuiltinSignatures();
                     if (s) {
                       ANXIN_TRY(s->CheckKeys({"signatures", "disable"}));
                       ANXIN_ASSIGN_OR_RETURN(std::vector<std::string> off,
                                              s->Get<std::vector<std::string>>("disable", {}));
                       for (const std::string& id : off) {
                         auto it = std::find_if(sigs.begin(), sigs.end(),
                                                [&](const LogSignature& x) { return x.id == id; });
                         if (it == sigs.end()) {
                           ANXIN_ASSIGN_OR_RETURN(ConfigNode d, s->Child("disable"));
                           return std::unexpected(d.MakeError("no shipped signature '" + id + "'"));
                         }
                         sigs.erase(it);
                       }
                       if (s->Has("signatures")) {
                         ANXIN_ASSIGN_OR_RETURN(ConfigNode list, s->Child("signatures"));
                         ANXIN_ASSIGN_OR_RETURN(std::vector<LogSignature> extra,
                                                ParseSignatures(list));
                         // Site signatures are tried first.
                         sigs.insert(sigs.begin(), extra.begin(), extra.end());
                       }
                     }
                     ANXIN_ASSIGN_OR_RETURN(LogMatcher m, LogMatcher::Compile(std::move(sigs)));
                     return std::make_unique<LogPatternDetector>(ctx, std::move(m));
                   });
  RegisterDetector("hang", "no progress (log step, SDK step or heartbeat, checkpoint) for a time",
                   [](const std::optional<ConfigNode>& s,
                      DetectorContext& ctx) -> Result<std::unique_ptr<Detector>> {
                     ANXIN_ASSIGN_OR_RETURN(HangOptions o, ReadHang(s));
                     if (ctx.hang_timeout_override > 0) {
                       o.timeout_seconds = ctx.hang_timeout_override;
                       o.learn_factor = 0;
                     }
                     return std::make_unique<HangDetector>(ctx, std::move(o));
                   });
  RegisterDetector("device_faults",
                   "the backend's fault events: device lost, link down, ECC, error codes",
                   [](const std::optional<ConfigNode>& s,
                      DetectorContext& ctx) -> Result<std::unique_ptr<Detector>> {
                     if (s) ANXIN_TRY(s->CheckKeys({}));
                     return std::make_unique<DeviceFaultDetector>(ctx);
                   });
  RegisterDetector("sdk", "step and heartbeat datagrams from the job SDK count as progress",
                   [](const std::optional<ConfigNode>& s,
                      DetectorContext& ctx) -> Result<std::unique_ptr<Detector>> {
                     if (s) ANXIN_TRY(s->CheckKeys({}));
                     return std::make_unique<SdkDetector>(ctx);
                   });
  return true;
}();

}  // namespace

bool RegisterDetector(std::string name, std::string summary, DetectorFactory factory) {
  Registry()[std::move(name)] = {std::move(summary), std::move(factory)};
  return true;
}

std::vector<DetectorEntry> RegisteredDetectors() {
  std::vector<DetectorEntry> out;
  for (const auto& [name, v] : Registry()) out.push_back({name, v.first});
  return out;
}

Result<std::unique_ptr<Detector>> CreateDetector(std::string_view name,
                                                 const std::optional<ConfigNode>& section,
                                                 DetectorContext& context) {
  auto it = Registry().find(std::string(name));
  if (it == Registry().end()) {
    std::string known;
    for (const auto& [n, v] : Registry()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown detector '" + std::string(name) + "' (known: " + known + ")");
  }
  return it->second.second(section, context);
}

}  // namespace anxin::run
