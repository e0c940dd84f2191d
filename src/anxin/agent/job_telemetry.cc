#include "anxin/agent/job_telemetry.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <variant>

namespace anxin::agent {

using monitor::Counter;
using monitor::Family;
using monitor::Gauge;
using monitor::Histogram;

namespace {

// Step times: 10 ms (small models) to 10 minutes (a stalled step).
const std::vector<double> kStepBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                          5,    10,    20,   30,  60,   120, 300, 600};
// Collectives: 10 us (a small all_reduce in one node) to 60 s (a stuck one).
const std::vector<double> kCollectiveBuckets = {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01,
                                                0.05, 0.1,  0.5,  1,    5,    10,   60};

double Median(std::vector<double> v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid));
  return (lo + hi) / 2;
}

}  // namespace

struct JobTelemetry::Families {
  Family<Histogram>* step_seconds;
  Family<Gauge>* last_step;
  Family<Gauge>* last_checkpoint;
  Family<Histogram>* collective_seconds;
  Family<Gauge>* algbw;
  Family<Gauge>* busbw;
  Family<Gauge>* kernel_median;
  Family<Gauge>* kernel_jitter;
  Family<Gauge>* heartbeat_age;
  Family<Gauge>* alloc_reserved;
  Family<Gauge>* alloc_allocated;
  Family<Gauge>* alloc_fragmentation;
  Family<Counter>* alloc_ooms;
  Family<Counter>* alloc_remaps;
  Family<Counter>* dropped;
  // From a supervisor (`anxin run`): labels node, job (, fault_class).
  Family<Counter>* restarts;
  Family<Counter>* incidents;
  Family<Gauge>* last_recovery;
  Counter* dropped_jobs;
  Counter* dropped_ranks;
  Counter* dropped_kernels;

  // Families whose series belong to one (job, rank): labels node, job, rank, ...
  template <typename F>
  void ForEachRankFamily(F&& f) {
    f(*step_seconds);
    f(*last_step);
    f(*last_checkpoint);
    f(*collective_seconds);
    f(*algbw);
    f(*busbw);
    f(*kernel_median);
    f(*kernel_jitter);
    f(*heartbeat_age);
    f(*alloc_reserved);
    f(*alloc_allocated);
    f(*alloc_fragmentation);
    f(*alloc_ooms);
    f(*alloc_remaps);
  }
};

struct JobTelemetry::RankState {
  std::string job;
  std::string rank;
  int32_t world_size = 1;
  Clock::TimePoint last_seen;
  Gauge* heartbeat_age = nullptr;
  Histogram* step_seconds = nullptr;
  Gauge* last_step = nullptr;
  Gauge* last_checkpoint = nullptr;
  // The worst since the last TakeRanks(), or the last value (NaN: none yet).
  double worst_step_seconds = std::numeric_limits<double>::quiet_NaN();
  bool step_fresh = false;
  struct Op {
    Histogram* seconds = nullptr;
    Gauge* algbw = nullptr;
    Gauge* busbw = nullptr;
    double worst_busbw = 0;
    bool fresh = false;
  };
  std::map<monitor::SdkCollectiveOp, Op> ops;
  struct Kernel {
    std::vector<double> window;  // ring of the last kernel_window durations
    size_t next = 0;
    double worst_jitter = 0;
    bool fresh = false;
    Gauge* median = nullptr;
    Gauge* jitter = nullptr;
  };
  std::map<std::string, Kernel, std::less<>> kernels;
  std::map<int32_t, monitor::SdkAllocStats> alloc;  // by device
  uint64_t ooms_counted = 0;
  uint64_t remaps_counted = 0;
};

struct JobTelemetry::HookGuard {
  std::mutex mu;
  JobTelemetry* self = nullptr;
};

Result<std::unique_ptr<JobTelemetry>> JobTelemetry::Create(monitor::Registry& registry,
                                                           Clock& clock,
                                                           JobTelemetryOptions options) {
  if (options.max_jobs == 0 || options.max_ranks == 0 || options.max_kernels == 0 ||
      options.kernel_window == 0) {
    return InvalidArgument(
        "job telemetry: max_jobs, max_ranks, max_kernels and kernel_window "
        "must be at least 1");
  }
  std::unique_ptr<JobTelemetry> t(new JobTelemetry(registry, clock, std::move(options)));
  auto f = std::make_unique<Families>();
  // A series per (job, rank), per op and per kernel: the caps above bound
  // them; the families' own caps only back that up.
  const size_t ranks = t->options_.max_ranks;
  const monitor::FamilyOptions per_rank{.max_series = ranks};
  const monitor::FamilyOptions per_op{.max_series = ranks * 9};
  const monitor::FamilyOptions per_kernel{.max_series = ranks * t->options_.max_kernels};
  const std::vector<std::string> l = {"node", "job", "rank"};
  const std::vector<std::string> lop = {"node", "job", "rank", "op"};
  const std::vector<std::string> lk = {"node", "job", "rank", "kernel"};
  ANXIN_ASSIGN_OR_RETURN(
      f->step_seconds,
      registry.AddHistogram("anxin_job_step_seconds", "Training step duration reported by the SDK.",
                            l, kStepBuckets, per_rank));
  ANXIN_ASSIGN_OR_RETURN(f->last_step, registry.AddGauge("anxin_job_last_step",
                                                         "The last step that ended.", l, per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->last_checkpoint,
      registry.AddGauge("anxin_job_last_checkpoint_step",
                        "The step of the last checkpoint written completely.", l, per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->collective_seconds,
      registry.AddHistogram("anxin_job_collective_seconds", "Collective operation duration.", lop,
                            kCollectiveBuckets, per_op));
  ANXIN_ASSIGN_OR_RETURN(
      f->algbw, registry.AddGauge("anxin_job_collective_algbw_bytes_per_second",
                                  "Algorithm bandwidth of the last collective: bytes / duration.",
                                  lop, per_op));
  ANXIN_ASSIGN_OR_RETURN(
      f->busbw, registry.AddGauge("anxin_job_collective_busbw_bytes_per_second",
                                  "Bus bandwidth of the last collective: algorithm bandwidth "
                                  "times the nccl-tests factor of the operation.",
                                  lop, per_op));
  ANXIN_ASSIGN_OR_RETURN(
      f->kernel_median,
      registry.AddGauge("anxin_job_kernel_seconds_median",
                        "Rolling median of a kernel's duration over its last runs.", lk,
                        per_kernel));
  ANXIN_ASSIGN_OR_RETURN(
      f->kernel_jitter,
      registry.AddGauge("anxin_job_kernel_jitter_ratio",
                        "A kernel's last duration over the median of the runs before it.", lk,
                        per_kernel));
  ANXIN_ASSIGN_OR_RETURN(
      f->heartbeat_age,
      registry.AddGauge("anxin_job_heartbeat_age_seconds",
                        "Seconds since the agent last heard from the rank.", l, per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->alloc_reserved,
      registry.AddGauge("anxin_job_allocator_reserved_bytes",
                        "Device memory the rank's allocator holds, over its devices.", l,
                        per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->alloc_allocated,
      registry.AddGauge("anxin_job_allocator_allocated_bytes",
                        "Device memory the rank's allocator handed out, over its devices.", l,
                        per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->alloc_fragmentation,
      registry.AddGauge("anxin_job_allocator_fragmentation_ratio",
                        "Allocator fragmentation (0..1), the worst of the rank's devices.", l,
                        per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->alloc_ooms,
      registry.AddCounter("anxin_job_allocator_ooms_total",
                          "Out-of-memory failures the rank's allocator reported.", l, per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->alloc_remaps,
      registry.AddCounter("anxin_job_allocator_remaps_total",
                          "Idle device-memory chunks the rank's allocator unmapped for reuse.", l,
                          per_rank));
  ANXIN_ASSIGN_OR_RETURN(
      f->dropped,
      registry.AddCounter("anxin_agent_telemetry_dropped_total",
                          "SDK events dropped because a cap on jobs, ranks or kernels was reached.",
                          {"node", "limit"}));
  const monitor::FamilyOptions per_job{.max_series = t->options_.max_jobs};
  const monitor::FamilyOptions per_class{.max_series = t->options_.max_jobs * 32};
  ANXIN_ASSIGN_OR_RETURN(f->restarts,
                         registry.AddCounter("anxin_job_restarts_total",
                                             "Relaunches of the job by its supervisor (anxin run).",
                                             {"node", "job"}, per_job));
  ANXIN_ASSIGN_OR_RETURN(
      f->incidents,
      registry.AddCounter("anxin_job_incidents_total",
                          "Faults that started a recovery, by fault class (anxin run).",
                          {"node", "job", "fault_class"}, per_class));
  ANXIN_ASSIGN_OR_RETURN(
      f->last_recovery,
      registry.AddGauge("anxin_job_last_recovery_seconds",
                        "From the last recovered fault to the job's first progress after it.",
                        {"node", "job"}, per_job));
  const std::string& node = t->options_.node;
  f->dropped_jobs = &f->dropped->WithLabels({node, "jobs"});
  f->dropped_ranks = &f->dropped->WithLabels({node, "ranks"});
  f->dropped_kernels = &f->dropped->WithLabels({node, "kernels"});
  t->f_ = std::move(f);
  std::shared_ptr<HookGuard> guard = t->guard_;
  registry.AddCollectHook([guard] {
    std::lock_guard lock(guard->mu);
    if (guard->self) guard->self->Refresh();
  });
  return t;
}

JobTelemetry::JobTelemetry(monitor::Registry&, Clock& clock, JobTelemetryOptions options)
    : clock_(clock), options_(std::move(options)), guard_(std::make_shared<HookGuard>()) {
  guard_->self = this;
}

JobTelemetry::~JobTelemetry() {
  std::lock_guard lock(guard_->mu);
  guard_->self = nullptr;
}

JobTelemetry::RankState* JobTelemetry::FindOrAddRank(const monitor::SdkSender& sender,
                                                     size_t events) {
  auto key = std::make_pair(sender.job, sender.rank);
  if (auto it = ranks_.find(key); it != ranks_.end()) return it->second.get();
  const bool new_job = !jobs_.contains(sender.job);
  if (new_job && jobs_.size() >= options_.max_jobs) {
    f_->dropped_jobs->Inc(static_cast<double>(events));
    return nullptr;
  }
  if (ranks_.size() >= options_.max_ranks) {
    f_->dropped_ranks->Inc(static_cast<double>(events));
    return nullptr;
  }
  auto r = std::make_unique<RankState>();
  r->job = sender.job;
  r->rank = std::to_string(sender.rank);
  const std::string& node = options_.node;
  r->heartbeat_age = &f_->heartbeat_age->WithLabels({node, r->job, r->rank});
  ++jobs_[sender.job];
  return ranks_.emplace(std::move(key), std::move(r)).first->second.get();
}

void JobTelemetry::ConsumeRecovery(const monitor::SdkSender& sender,
                                   const monitor::SdkRecovery& rec) {
  const std::string& node = options_.node;
  auto& seen = recovery_[sender.job];
  if (seen.empty() && recovery_.size() > options_.max_jobs) {
    recovery_.erase(sender.job);
    f_->dropped_jobs->Inc();
    return;
  }
  // Counts are cumulative at the sender; a restarted sender that starts
  // again lower only moves the baseline.
  auto add = [](Counter& c, uint64_t& last, uint64_t now) {
    if (now > last) c.Inc(static_cast<double>(now - last));
    last = now;
  };
  add(f_->restarts->WithLabels({node, sender.job}), seen["\x01restarts"], rec.restarts_total);
  add(f_->incidents->WithLabels({node, sender.job, rec.fault_class}), seen[rec.fault_class],
      rec.incidents_total);
  if (rec.recovery_ns > 0) {
    f_->last_recovery->WithLabels({node, sender.job})
        .Set(static_cast<double>(rec.recovery_ns) * 1e-9);
  }
}

void JobTelemetry::Consume(const monitor::SdkDatagram& d) {
  using namespace monitor;
  std::lock_guard lock(mu_);
  // Recovery records describe the job, not a rank: they make no rank state.
  size_t others = 0;
  for (const SdkEvent& e : d.events) {
    if (const auto* rec = std::get_if<SdkRecovery>(&e.body)) {
      ConsumeRecovery(d.sender, *rec);
    } else {
      ++others;
    }
  }
  if (others == 0) return;
  RankState* r = FindOrAddRank(d.sender, others);
  if (r == nullptr) return;
  r->last_seen = clock_.Now();
  r->world_size = d.sender.world_size;
  r->heartbeat_age->Set(0);
  const std::string& node = options_.node;
  for (const SdkEvent& e : d.events) {
    if (const auto* end = std::get_if<SdkStepEnd>(&e.body)) {
      if (!r->last_step) r->last_step = &f_->last_step->WithLabels({node, r->job, r->rank});
      r->last_step->Set(static_cast<double>(end->step));
      // A step without a start to measure from has no duration.
      if (end->duration_ns > 0) {
        if (!r->step_seconds)
          r->step_seconds = &f_->step_seconds->WithLabels({node, r->job, r->rank});
        const double seconds = static_cast<double>(end->duration_ns) * 1e-9;
        r->step_seconds->Observe(seconds);
        r->worst_step_seconds = r->step_fresh ? std::max(r->worst_step_seconds, seconds) : seconds;
        r->step_fresh = true;
      }
    } else if (const auto* c = std::get_if<SdkCollective>(&e.body)) {
      RankState::Op& op = r->ops[c->op];
      const std::string name(SdkCollectiveOpName(c->op));
      if (!op.seconds)
        op.seconds = &f_->collective_seconds->WithLabels({node, r->job, r->rank, name});
      const double seconds = static_cast<double>(c->duration_ns) * 1e-9;
      op.seconds->Observe(seconds);
      // A barrier moves no data; a zero duration has no bandwidth.
      if (c->op == SdkCollectiveOp::kBarrier || c->duration_ns == 0) continue;
      if (!op.algbw) {
        op.algbw = &f_->algbw->WithLabels({node, r->job, r->rank, name});
        op.busbw = &f_->busbw->WithLabels({node, r->job, r->rank, name});
      }
      const double algbw = static_cast<double>(c->bytes) / seconds;
      const int64_t n = c->group_size > 0 ? c->group_size : d.sender.world_size;
      op.algbw->Set(algbw);
      const double busbw = algbw * BusBandwidthFactor(c->op, n);
      op.busbw->Set(busbw);
      op.worst_busbw = op.fresh ? std::min(op.worst_busbw, busbw) : busbw;
      op.fresh = true;
    } else if (const auto* k = std::get_if<SdkKernel>(&e.body)) {
      auto it = r->kernels.find(k->name);
      if (it == r->kernels.end()) {
        if (r->kernels.size() >= options_.max_kernels) {
          f_->dropped_kernels->Inc();
          continue;
        }
        it = r->kernels.emplace(k->name, RankState::Kernel{}).first;
        it->second.median = &f_->kernel_median->WithLabels({node, r->job, r->rank, k->name});
        it->second.jitter = &f_->kernel_jitter->WithLabels({node, r->job, r->rank, k->name});
      }
      RankState::Kernel& kern = it->second;
      const double seconds = static_cast<double>(k->duration_ns) * 1e-9;
      // Jitter against the runs before this one, so that one slow run does
      // not hide itself by moving the median.
      const double before = kern.window.empty() ? 0 : Median(kern.window);
      const double jitter = before > 0 ? seconds / before : 1.0;
      kern.jitter->Set(jitter);
      kern.worst_jitter = kern.fresh ? std::max(kern.worst_jitter, jitter) : jitter;
      kern.fresh = true;
      if (kern.window.size() < options_.kernel_window) {
        kern.window.push_back(seconds);
      } else {
        kern.window[kern.next] = seconds;
        kern.next = (kern.next + 1) % options_.kernel_window;
      }
      kern.median->Set(Median(kern.window));
    } else if (const auto* cp = std::get_if<SdkCheckpoint>(&e.body)) {
      if (!r->last_checkpoint)
        r->last_checkpoint = &f_->last_checkpoint->WithLabels({node, r->job, r->rank});
      r->last_checkpoint->Set(static_cast<double>(cp->step));
    } else if (const auto* a = std::get_if<SdkAllocStats>(&e.body)) {
      r->alloc[a->device] = *a;
      double reserved = 0, allocated = 0, fragmentation = 0;
      uint64_t ooms = 0, remaps = 0;
      for (const auto& [device, s] : r->alloc) {
        reserved += static_cast<double>(s.reserved_bytes);
        allocated += static_cast<double>(s.allocated_bytes);
        fragmentation = std::max(fragmentation, s.fragmentation);
        ooms += s.ooms;
        remaps += s.remaps;
      }
      f_->alloc_reserved->WithLabels({node, r->job, r->rank}).Set(reserved);
      f_->alloc_allocated->WithLabels({node, r->job, r->rank}).Set(allocated);
      f_->alloc_fragmentation->WithLabels({node, r->job, r->rank}).Set(fragmentation);
      Counter& c = f_->alloc_ooms->WithLabels({node, r->job, r->rank});
      // The SDK reports cumulative counts; a restarted process starts again
      // from 0, which only moves the baseline.
      if (ooms > r->ooms_counted) c.Inc(static_cast<double>(ooms - r->ooms_counted));
      r->ooms_counted = ooms;
      Counter& remapped = f_->alloc_remaps->WithLabels({node, r->job, r->rank});
      if (remaps > r->remaps_counted) remapped.Inc(static_cast<double>(remaps - r->remaps_counted));
      r->remaps_counted = remaps;
    }
    // step_begin and heartbeat only prove the rank alive (last_seen above).
  }
}

void JobTelemetry::Forget(const std::string& job, const std::string& rank) {
  f_->ForEachRankFamily([&](auto& family) {
    family.RemoveIf([&](const std::vector<std::string>& v) { return v[1] == job && v[2] == rank; });
  });
}

void JobTelemetry::Refresh() {
  std::lock_guard lock(mu_);
  const Clock::TimePoint now = clock_.Now();
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    RankState& r = *it->second;
    const Clock::Duration age = now - r.last_seen;
    if (age >= options_.expiry) {
      Forget(r.job, r.rank);
      if (--jobs_[r.job] == 0) jobs_.erase(r.job);
      it = ranks_.erase(it);
      continue;
    }
    r.heartbeat_age->Set(std::max(0.0, ToSeconds(age)));
    ++it;
  }
}

JobTelemetryStats JobTelemetry::stats() const {
  std::lock_guard lock(mu_);
  JobTelemetryStats s;
  s.jobs = jobs_.size();
  s.ranks = ranks_.size();
  s.dropped_jobs = static_cast<uint64_t>(f_->dropped_jobs->value());
  s.dropped_ranks = static_cast<uint64_t>(f_->dropped_ranks->value());
  s.dropped_kernels = static_cast<uint64_t>(f_->dropped_kernels->value());
  return s;
}

std::vector<RankSummary> JobTelemetry::TakeRanks() {
  std::lock_guard lock(mu_);
  const Clock::TimePoint now = clock_.Now();
  std::vector<RankSummary> out;
  out.reserve(ranks_.size());
  // A worst value stays as the last one until something new comes, so the
  // next period starts from it: "fresh" only says whether it was replaced.
  for (const auto& [key, r] : ranks_) {
    RankSummary s;
    s.job = r->job;
    s.rank = key.second;
    s.world_size = r->world_size;
    s.heartbeat_age_seconds = std::max(0.0, ToSeconds(now - r->last_seen));
    if (r->last_step) s.last_step = static_cast<uint64_t>(r->last_step->value());
    s.step_seconds = r->worst_step_seconds;
    r->step_fresh = false;
    for (auto& [op, o] : r->ops) {
      if (!o.busbw) continue;
      s.busbw_bytes_per_second[std::string(monitor::SdkCollectiveOpName(op))] = o.worst_busbw;
      o.fresh = false;
    }
    for (auto& [name, k] : r->kernels) {
      s.kernel_jitter_ratio[name] = k.worst_jitter;
      k.fresh = false;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace anxin::agent
