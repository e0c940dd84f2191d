#include "anxin/agent/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "anxin/base/strings.h"
#include "anxin/base/time_format.h"

namespace anxin::agent {

using device::DeviceInfo;
using device::DeviceSample;
using device::FaultEvent;
using device::FaultKind;
using device::Health;
using device::Reported;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kMaxDetailBytes = 256;
// The alert lines clear this far below themselves, so that a reading that
// sits on a line does not fill the timeline with crossings.
constexpr double kTemperatureHysteresisCelsius = 2;
constexpr double kHbmHysteresisRatio = 0.02;

// Unix seconds, to the millisecond: what the JSON carries, so that a
// client's `since` compares equal to the point it came from.
double UnixSeconds(Clock::TimePoint t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  return static_cast<double>(ms.count()) / 1000.0;
}

nlohmann::json Number(double v, int digits) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// A whole number (bytes, steps) as an integer; null when absent.
nlohmann::json Whole(double v) {
  if (!std::isfinite(v) || v < 0) return nullptr;
  return static_cast<uint64_t>(std::llround(v));
}

// Significant digits rather than decimals, for values from 1e-3 to 1e12.
nlohmann::json Significant(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  const int digits = 6 - static_cast<int>(std::ceil(std::log10(std::fabs(v))));
  return Number(v, std::max(digits, 0));
}

// Text from devices and training processes is not trusted to be UTF-8.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Cuts s to at most n bytes without splitting a UTF-8 sequence.
std::string Cut(std::string s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  s.resize(end);
  return s + "...";
}

std::string_view SeverityOf(Health h) {
  switch (h) {
    case Health::kOk:
      return "info";
    case Health::kWarning:
    case Health::kResetting:
      return "warning";
    case Health::kAlarm:
    case Health::kCritical:
      return "critical";
  }
  return "warning";
}

std::string_view SeverityOf(device::Severity s) {
  return s == device::Severity::kMinor ? "warning" : "critical";
}

// A ring of at most `capacity` items that overwrites its oldest.
template <typename T>
class Ring {
 public:
  explicit Ring(size_t capacity) : capacity_(capacity) {}
  void Push(T item) {
    if (items_.size() < capacity_) {
      items_.push_back(std::move(item));
    } else {
      items_[start_] = std::move(item);
      start_ = (start_ + 1) % capacity_;
    }
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // 0: the oldest.
  const T& operator[](size_t i) const { return items_[(start_ + i) % items_.size()]; }
  const T& back() const { return (*this)[items_.size() - 1]; }

 private:
  size_t capacity_;
  size_t start_ = 0;
  std::vector<T> items_;
};

struct DevicePoint {
  double t = 0;
  double hbm_used_bytes = kNaN;
  double temperature_celsius = kNaN;
  double power_watts = kNaN;
  double utilisation_percent = kNaN;
};

struct JobPoint {
  double t = 0;
  double step = kNaN;
  double step_seconds = kNaN;
  std::vector<double> busbw{};   // by JobSeries::ops
  std::vector<double> jitter{};  // by JobSeries::kernels
};

// Which alert level a reading is at, with hysteresis: 0 below the line,
// 1 at or above it, 2 at or above the second line (throttle point).
int Level(double value, int before, double line1, double line2, double hysteresis) {
  int now = value >= line2 ? 2 : value >= line1 ? 1 : 0;
  if (now < before) {
    const double line = before == 2 ? line2 : line1;
    if (value > line - hysteresis) now = before;
  }
  return now;
}

}  // namespace

struct History::DeviceSeries {
  explicit DeviceSeries(size_t capacity) : points(capacity) {}
  DeviceInfo info{};
  bool described = false;  // info came from a snapshot
  Ring<DevicePoint> points;
  // The state the next sample is compared with.
  std::optional<Health> health{};
  bool lost = false;
  std::set<std::string> codes{};
  // Codes the backend raised before a sample showed them, with the seq of
  // that event: the sample knows the code's severity, the event did not.
  std::map<std::string, uint64_t> raised_unrated{};
  std::map<int, bool> links{};  // port -> up
  int hot = 0;                  // Level() of the temperature
  int hbm = 0;                  // Level() of the HBM ratio

  std::string Label() const {
    return described ? device::DeviceLabel(info) : "device " + std::to_string(info.index);
  }
};

struct History::JobSeries {
  explicit JobSeries(size_t capacity) : points(capacity) {}
  int ranks = 0;
  int world_size = 1;
  std::optional<uint64_t> last_step{};
  double heartbeat_age_seconds = 0;
  bool active = true;
  std::vector<std::string> ops{};
  std::vector<std::string> kernels{};
  Ring<JobPoint> points;
};

struct History::Event {
  uint64_t seq = 0;
  Clock::TimePoint time{};
  int device = -1;
  std::string kind{};
  std::string severity{};
  std::string detail{};
  std::string source{};  // "device": the backend's fault event; "agent": inferred;
                         // "job": the job's supervisor
  std::string job{};     // the job, for source "job"
};

Result<std::unique_ptr<History>> History::Create(monitor::Registry& registry,
                                                 HistoryOptions options) {
  if (options.interval <= Clock::Duration::zero() || options.window <= Clock::Duration::zero() ||
      options.max_points == 0 || options.max_jobs == 0 || options.max_kernels == 0 ||
      options.max_events == 0) {
    return InvalidArgument(
        "history: the interval, the window and every cap (points, jobs, kernels, events) must be "
        "above 0");
  }
  std::unique_ptr<History> h(new History(std::move(options)));
  ANXIN_ASSIGN_OR_RETURN(
      auto* dropped,
      registry.AddCounter("anxin_agent_history_dropped_total",
                          "What the page's history did not keep: events overwritten in the "
                          "timeline, job and kernel points beyond their caps.",
                          {"node", "what"}));
  const std::string& node = h->options_.node;
  h->dropped_events_ = &dropped->WithLabels({node, "events"});
  h->dropped_jobs_ = &dropped->WithLabels({node, "jobs"});
  h->dropped_kernels_ = &dropped->WithLabels({node, "kernels"});
  return h;
}

History::History(HistoryOptions options) : options_(std::move(options)) {
  const double per_window = std::ceil(ToSeconds(options_.window) / ToSeconds(options_.interval));
  capacity_ =
      static_cast<size_t>(std::clamp(per_window, 1.0, static_cast<double>(options_.max_points)));
  events_.reserve(std::min<size_t>(options_.max_events, 64));
}

History::~History() = default;

uint64_t History::AddEvent(Clock::TimePoint time, int device, std::string kind,
                           std::string severity, std::string detail, std::string source) {
  Event e{.seq = next_seq_++,
          .time = time,
          .device = device,
          .kind = std::move(kind),
          .severity = std::move(severity),
          .detail = Cut(std::move(detail), kMaxDetailBytes),
          .source = std::move(source)};
  const uint64_t seq = e.seq;
  if (events_.size() < options_.max_events) {
    events_.push_back(std::move(e));
    return seq;
  }
  events_[events_next_] = std::move(e);
  events_next_ = (events_next_ + 1) % options_.max_events;
  dropped_events_->Inc();
  return seq;
}

void History::SetSeverity(uint64_t seq, std::string severity) {
  for (Event& e : events_) {
    if (e.seq == seq) {
      e.severity = std::move(severity);
      return;
    }
  }
}

void History::RecordSnapshot(const device::Snapshot& snap) {
  std::lock_guard lock(mu_);
  source_ = snap.source;
  last_time_ = snap.time;
  const double t = UnixSeconds(snap.time);
  for (const device::DeviceRow& row : snap.rows) {
    const DeviceInfo& info = row.info;
    auto& slot = devices_[info.index];
    if (!slot) slot = std::make_unique<DeviceSeries>(capacity_);
    DeviceSeries& d = *slot;
    d.info = info;
    d.described = true;
    DevicePoint p{.t = t};
    auto event = [&](std::string kind, std::string_view severity, std::string detail) {
      AddEvent(snap.time, info.index, std::move(kind), std::string(severity), std::move(detail),
               "agent");
    };
    if (!row.sample) {
      if (!d.lost) event("device_lost", "critical", row.sample.error().message());
      d.lost = true;
      d.points.Push(p);
      continue;
    }
    if (d.lost) event("device_back", "info", "answers again");
    d.lost = false;
    const DeviceSample& s = *row.sample;
    if (Reported(s.hbm_used_bytes)) p.hbm_used_bytes = static_cast<double>(s.hbm_used_bytes);
    p.temperature_celsius = s.temperature_celsius;
    p.power_watts = s.power_watts;
    p.utilisation_percent = s.utilisation_percent;
    d.points.Push(p);

    if (d.health != s.health) {
      // The first sample of a healthy device is no news.
      if (d.health || s.health != Health::kOk) {
        std::string text = d.health ? fmt::format("health {} -> {}", device::HealthName(*d.health),
                                                  device::HealthName(s.health))
                                    : fmt::format("health {}", device::HealthName(s.health));
        event("health", SeverityOf(s.health), std::move(text));
      }
      d.health = s.health;
    }
    std::set<std::string> codes;
    for (const device::DeviceErrorCode& c : s.error_codes) {
      codes.insert(c.code);
      if (d.codes.contains(c.code)) {
        if (auto it = d.raised_unrated.find(c.code); it != d.raised_unrated.end()) {
          SetSeverity(it->second, std::string(SeverityOf(c.severity)));
          d.raised_unrated.erase(it);
        }
        continue;
      }
      std::string text = fmt::format("code {} ({})", c.code, device::SeverityName(c.severity));
      if (!c.text.empty()) text += ": " + c.text;
      event("error_raised", SeverityOf(c.severity), std::move(text));
    }
    for (const std::string& c : d.codes)
      if (!codes.contains(c)) event("error_cleared", "info", "code " + c + " cleared");
    std::erase_if(d.raised_unrated, [&](const auto& kv) { return !codes.contains(kv.first); });
    d.codes = std::move(codes);
    for (const device::LinkState& l : s.links) {
      auto prev = d.links.find(l.port);
      const bool changed = prev == d.links.end() ? !l.up : prev->second != l.up;
      if (changed) {
        event(l.up ? "link_up" : "link_down", l.up ? "info" : "warning",
              fmt::format("port {} {}", l.port, l.up ? "up" : "down"));
      }
      d.links[l.port] = l.up;
    }
    if (Reported(s.temperature_celsius)) {
      const double line1 = device::kTemperatureWarningCelsius;
      const double line2 = info.throttle_celsius > line1 ? info.throttle_celsius
                                                         : std::numeric_limits<double>::infinity();
      const int level =
          Level(s.temperature_celsius, d.hot, line1, line2, kTemperatureHysteresisCelsius);
      if (level > d.hot) {
        event("temperature_high", level == 2 ? "critical" : "warning",
              level == 2
                  ? fmt::format("{:.0f} C: at its {:.0f} C throttle point", s.temperature_celsius,
                                info.throttle_celsius)
                  : fmt::format("{:.0f} C: at or above {:.0f} C", s.temperature_celsius, line1));
      } else if (level == 0 && d.hot > 0) {
        event("temperature_normal", "info",
              fmt::format("{:.0f} C: below {:.0f} C again", s.temperature_celsius, line1));
      }
      d.hot = level;
    }
    if (Reported(s.hbm_used_bytes) && info.hbm_total_bytes > 0) {
      const double used = static_cast<double>(s.hbm_used_bytes);
      const double total = static_cast<double>(info.hbm_total_bytes);
      const double ratio = used / total;
      const int level = Level(ratio, d.hbm, device::kHbmAlertRatio,
                              std::numeric_limits<double>::infinity(), kHbmHysteresisRatio);
      if (level > d.hbm) {
        event("hbm_high", "warning",
              fmt::format("HBM {:.1f} % used ({:.1f} of {:.1f} GiB)", ratio * 100, ToGiB(used),
                          ToGiB(total)));
      } else if (level == 0 && d.hbm > 0) {
        event("hbm_normal", "info", fmt::format("HBM {:.1f} % used", ratio * 100));
      }
      d.hbm = level;
    }
  }
  Trim(snap.time);
}

void History::RecordRecovery(Clock::TimePoint time, std::string_view job,
                             const monitor::SdkRecovery& r) {
  if (r.recovery_ns == 0) return;
  std::lock_guard lock(mu_);
  const uint64_t seq = AddEvent(
      time, -1, "recovered", "info",
      fmt::format("{} fault: the job runs again, {:.2f} s after the fault (restart {})",
                  r.fault_class, static_cast<double>(r.recovery_ns) * 1e-9, r.restarts_total),
      "job");
  for (Event& e : events_) {
    if (e.seq == seq) e.job = Cut(std::string(job), kMaxDetailBytes);
  }
}

void History::RecordFault(const FaultEvent& e) {
  std::lock_guard lock(mu_);
  auto& slot = devices_[e.index];
  if (!slot) {
    slot = std::make_unique<DeviceSeries>(capacity_);
    slot->info.index = e.index;
  }
  DeviceSeries& d = *slot;
  // What the backend reports updates the state that samples are compared
  // with, so the same change is not inferred again from the next sample; a
  // change a sample already showed is not recorded twice.
  std::string_view severity = "warning";
  switch (e.kind) {
    case FaultKind::kErrorRaised:
      if (!d.codes.insert(e.code).second) return;
      break;
    case FaultKind::kErrorCleared:
      d.raised_unrated.erase(e.code);
      if (d.codes.erase(e.code) == 0) return;
      severity = "info";
      break;
    case FaultKind::kLinkDown: {
      auto it = d.links.find(e.port);
      if (it != d.links.end() && !it->second) return;
      d.links[e.port] = false;
      break;
    }
    case FaultKind::kLinkUp: {
      auto it = d.links.find(e.port);
      if (it != d.links.end() && it->second) return;
      d.links[e.port] = true;
      severity = "info";
      break;
    }
    case FaultKind::kDeviceLost:
      if (d.lost) return;
      d.lost = true;
      severity = "critical";
      break;
    case FaultKind::kEccErrors:
      break;
    case FaultKind::kResetDone:
      severity = "info";
      break;
    case FaultKind::kResetFailed:
      severity = "critical";
      break;
  }
  std::string detail = e.message;
  if (detail.empty()) {
    if (!e.code.empty()) detail = "code " + e.code;
    if (e.port >= 0) detail = "port " + std::to_string(e.port);
  }
  const uint64_t seq = AddEvent(e.time, e.index, std::string(device::FaultKindName(e.kind)),
                                std::string(severity), std::move(detail), "device");
  if (e.kind == FaultKind::kErrorRaised) d.raised_unrated[e.code] = seq;
}

void History::RecordJobs(Clock::TimePoint time, const std::vector<RankSummary>& ranks) {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<const RankSummary*>> by_job;
  for (const RankSummary& r : ranks) by_job[r.job].push_back(&r);
  for (auto& [name, job] : jobs_) job->active = by_job.contains(name);
  Trim(time);
  const double t = UnixSeconds(time);
  for (const auto& [name, members] : by_job) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) {
      if (jobs_.size() >= options_.max_jobs) {
        dropped_jobs_->Inc();
        continue;
      }
      it = jobs_.emplace(name, std::make_unique<JobSeries>(capacity_)).first;
    }
    JobSeries& j = *it->second;
    j.active = true;
    j.ranks = static_cast<int>(members.size());
    j.world_size = 1;
    j.last_step.reset();
    j.heartbeat_age_seconds = std::numeric_limits<double>::infinity();
    JobPoint p{.t = t};
    auto slot = [](std::vector<std::string>& names, const std::string& n) -> size_t {
      auto at = std::find(names.begin(), names.end(), n);
      if (at != names.end()) return static_cast<size_t>(at - names.begin());
      names.push_back(n);
      return names.size() - 1;
    };
    std::vector<std::pair<size_t, double>> busbw, jitter;
    for (const RankSummary* r : members) {
      j.world_size = std::max(j.world_size, static_cast<int>(r->world_size));
      j.heartbeat_age_seconds = std::min(j.heartbeat_age_seconds, r->heartbeat_age_seconds);
      if (r->last_step) {
        j.last_step = std::max(j.last_step.value_or(0), *r->last_step);
        p.step = static_cast<double>(*j.last_step);
      }
      // The slowest rank sets the job's step time.
      if (!std::isnan(r->step_seconds))
        p.step_seconds = std::isnan(p.step_seconds) ? r->step_seconds
                                                    : std::max(p.step_seconds, r->step_seconds);
      for (const auto& [op, v] : r->busbw_bytes_per_second) busbw.emplace_back(slot(j.ops, op), v);
      for (const auto& [kernel, v] : r->kernel_jitter_ratio) {
        const bool known = std::find(j.kernels.begin(), j.kernels.end(), kernel) != j.kernels.end();
        if (!known && j.kernels.size() >= options_.max_kernels) {
          dropped_kernels_->Inc();
          continue;
        }
        jitter.emplace_back(slot(j.kernels, kernel), v);
      }
    }
    // The slowest rank's bandwidth, the worst rank's jitter.
    p.busbw.assign(j.ops.size(), kNaN);
    for (auto [i, v] : busbw) p.busbw[i] = std::isnan(p.busbw[i]) ? v : std::min(p.busbw[i], v);
    p.jitter.assign(j.kernels.size(), kNaN);
    for (auto [i, v] : jitter) p.jitter[i] = std::isnan(p.jitter[i]) ? v : std::max(p.jitter[i], v);
    j.points.Push(std::move(p));
  }
}

void History::Trim(Clock::TimePoint now) {
  const double oldest = UnixSeconds(now - options_.window);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobSeries& j = *it->second;
    if (!j.active && (j.points.empty() || j.points.back().t < oldest)) {
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string History::DevicesJson(double since) const {
  std::lock_guard lock(mu_);
  const double oldest = UnixSeconds(last_time_ - options_.window);
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [index, slot] : devices_) {
    const DeviceSeries& d = *slot;
    nlohmann::json t = nlohmann::json::array(), hbm = nlohmann::json::array(),
                   temp = nlohmann::json::array(), power = nlohmann::json::array(),
                   util = nlohmann::json::array();
    for (size_t i = 0; i < d.points.size(); ++i) {
      const DevicePoint& p = d.points[i];
      if (p.t <= since || p.t < oldest) continue;
      t.push_back(p.t);
      hbm.push_back(Whole(p.hbm_used_bytes));
      temp.push_back(Number(p.temperature_celsius, 1));
      power.push_back(Number(p.power_watts, 1));
      util.push_back(Number(p.utilisation_percent, 1));
    }
    nlohmann::json links = nlohmann::json::array();
    for (const auto& [port, up] : d.links) links.push_back({{"port", port}, {"up", up}});
    nlohmann::json health = nullptr;
    if (d.lost) {
      health = "Lost";
    } else if (d.health) {
      health = std::string(device::HealthName(*d.health));
    }
    devices.push_back({
        {"index", index},
        {"label", d.Label()},
        {"model", d.info.model},
        {"hbm_total_bytes", d.info.hbm_total_bytes},
        {"throttle_celsius",
         Number(d.info.throttle_celsius > 0 ? d.info.throttle_celsius : kNaN, 1)},
        {"health", std::move(health)},
        {"links", std::move(links)},
        {"t", std::move(t)},
        {"hbm_used_bytes", std::move(hbm)},
        {"temperature_celsius", std::move(temp)},
        {"power_watts", std::move(power)},
        {"utilisation_percent", std::move(util)},
    });
  }
  nlohmann::json out = {
      {"node", options_.node},
      {"source", source_},
      {"time", last_time_ == Clock::TimePoint{} ? nlohmann::json(nullptr)
                                                : nlohmann::json(FormatRfc3339(last_time_))},
      {"interval_seconds", ToSeconds(options_.interval)},
      {"window_seconds", ToSeconds(options_.window)},
      {"points", capacity_},
      {"devices", std::move(devices)},
  };
  return Dump(out);
}

std::string History::JobsJson(double since) const {
  std::lock_guard lock(mu_);
  const double oldest = UnixSeconds(last_time_ - options_.window);
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& [name, slot] : jobs_) {
    const JobSeries& j = *slot;
    nlohmann::json t = nlohmann::json::array(), step = nlohmann::json::array(),
                   step_seconds = nlohmann::json::array();
    std::vector<nlohmann::json> busbw(j.ops.size(), nlohmann::json::array());
    std::vector<nlohmann::json> jitter(j.kernels.size(), nlohmann::json::array());
    for (size_t i = 0; i < j.points.size(); ++i) {
      const JobPoint& p = j.points[i];
      if (p.t <= since || p.t < oldest) continue;
      t.push_back(p.t);
      step.push_back(Whole(p.step));
      step_seconds.push_back(Significant(p.step_seconds));
      for (size_t k = 0; k < busbw.size(); ++k)
        busbw[k].push_back(k < p.busbw.size() ? Significant(p.busbw[k]) : nullptr);
      for (size_t k = 0; k < jitter.size(); ++k)
        jitter[k].push_back(k < p.jitter.size() ? Number(p.jitter[k], 3) : nullptr);
    }
    nlohmann::json ops = nlohmann::json::object(), kernels = nlohmann::json::object();
    for (size_t k = 0; k < busbw.size(); ++k) ops[j.ops[k]] = std::move(busbw[k]);
    for (size_t k = 0; k < jitter.size(); ++k) kernels[j.kernels[k]] = std::move(jitter[k]);
    jobs.push_back({
        {"job", name},
        {"active", j.active},
        {"ranks", j.ranks},
        {"world_size", j.world_size},
        {"last_step", j.last_step ? nlohmann::json(*j.last_step) : nlohmann::json(nullptr)},
        {"heartbeat_age_seconds", Number(j.heartbeat_age_seconds, 1)},
        {"t", std::move(t)},
        {"step", std::move(step)},
        {"step_seconds", std::move(step_seconds)},
        {"busbw_bytes_per_second", std::move(ops)},
        {"kernel_jitter_ratio", std::move(kernels)},
    });
  }
  nlohmann::json out = {
      {"time", last_time_ == Clock::TimePoint{} ? nlohmann::json(nullptr)
                                                : nlohmann::json(FormatRfc3339(last_time_))},
      {"jobs", std::move(jobs)},
  };
  return Dump(out);
}

std::string History::EventsJson(uint64_t after) const {
  std::lock_guard lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  const size_t n = events_.size();
  const size_t start = n < options_.max_events ? 0 : events_next_;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events_[(start + i) % n];
    if (e.seq <= after) continue;
    auto d = devices_.find(e.device);
    events.push_back({
        {"seq", e.seq},
        {"time", FormatRfc3339(e.time)},
        {"unix", UnixSeconds(e.time)},
        {"device", e.device},
        {"label", e.device < 0          ? "job " + e.job
                  : d != devices_.end() ? d->second->Label()
                                        : "device " + std::to_string(e.device)},
        {"kind", e.kind},
        {"severity", e.severity},
        {"detail", e.detail},
        {"source", e.source},
    });
  }
  nlohmann::json out = {
      {"next", next_seq_ - 1},
      {"dropped", static_cast<uint64_t>(dropped_events_->value())},
      {"capacity", options_.max_events},
      {"events", std::move(events)},
  };
  return Dump(out);
}

}  // namespace anxin::agent
