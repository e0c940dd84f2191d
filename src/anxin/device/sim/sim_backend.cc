#include "anxin/device/sim/sim_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "anxin/device/sim/noise.h"

namespace anxin::device::sim {

struct SimBackend::Hub {
  // Recursive so that a callback may subscribe someone else.
  std::recursive_mutex mu;
  std::map<int, FaultCallback> subscribers;
  int next_id = 0;

  void Publish(const FaultEvent& e) {
    std::lock_guard lock(mu);
    for (auto& [id, callback] : subscribers) callback(e);
  }
};

namespace {

Health HealthFor(Severity s) {
  switch (s) {
    case Severity::kMinor:
      return Health::kWarning;
    case Severity::kMajor:
      return Health::kAlarm;
    case Severity::kCritical:
      return Health::kCritical;
  }
  return Health::kAlarm;
}

bool IsFaultKind(EventKind k) {
  switch (k) {
    case EventKind::kErrorRaise:
    case EventKind::kErrorClear:
    case EventKind::kLinkDown:
    case EventKind::kLinkUp:
    case EventKind::kDeviceLost:
    case EventKind::kEccErrors:
      return true;
    default:
      return false;
  }
}

// Events of device `index` that act at time t (from epoch on), in time order.
std::vector<const SimEvent*> ActiveEvents(const Scenario& scenario, int index, double t,
                                          double epoch) {
  std::vector<const SimEvent*> active;
  for (const SimEvent& e : scenario.events) {
    if (e.device == index && e.at_seconds <= t && e.at_seconds >= epoch) active.push_back(&e);
  }
  return active;
}

// Temperature at t without noise: each ramp starts from wherever the
// previous one had got to.
double RampedTemperature(const SimDevice& dev, const std::vector<const SimEvent*>& active,
                         double t) {
  double ramp_from = dev.baseline.temperature_celsius;
  double ramp_to = ramp_from;
  double ramp_at = 0;
  double ramp_over = 0;
  auto ramp_value = [&](double x) {
    if (ramp_over <= 0 || x >= ramp_at + ramp_over) return ramp_to;
    return ramp_from + (ramp_to - ramp_from) * ((x - ramp_at) / ramp_over);
  };
  for (const SimEvent* e : active) {
    if (e->kind != EventKind::kTemperatureRamp) continue;
    double from = ramp_value(e->at_seconds);
    ramp_from = from;
    ramp_to = e->to_celsius;
    ramp_at = e->at_seconds;
    ramp_over = e->over_seconds;
  }
  return ramp_value(t);
}

// hbm plus what leaks and steps added by t since the last clear
// (memory_epoch), added in time order.
double WithHbmEvents(double hbm, const std::vector<const SimEvent*>& active, double t,
                     double memory_epoch) {
  for (const SimEvent* e : active) {
    if (e->at_seconds < memory_epoch) continue;
    if (e->kind == EventKind::kHbmLeak) {
      double until = std::min(t, e->at_seconds + e->duration_seconds);
      hbm += e->rate_bytes_per_second * (until - e->at_seconds);
    } else if (e->kind == EventKind::kHbmStep) {
      hbm += static_cast<double>(e->step_bytes);
    }
  }
  return hbm;
}

// Error codes, ECC counters, links and the health they add up to, into s
// (whose throttled flag is already set).
void ApplyFaults(const SimDevice& dev, const std::vector<const SimEvent*>& active, double t,
                 DeviceSample& s) {
  std::vector<DeviceErrorCode> codes;
  std::vector<double> down_until(dev.ports, -1);
  for (const SimEvent* e : active) {
    switch (e->kind) {
      case EventKind::kErrorRaise: {
        std::erase_if(codes, [&](const DeviceErrorCode& c) { return c.code == e->code; });
        codes.push_back({e->code, e->severity, e->text});
        break;
      }
      case EventKind::kErrorClear:
        if (e->code.empty()) {
          codes.clear();
        } else {
          std::erase_if(codes, [&](const DeviceErrorCode& c) { return c.code == e->code; });
        }
        break;
      case EventKind::kEccErrors:
        s.ecc.single_bit += e->single_bit;
        s.ecc.double_bit += e->double_bit;
        break;
      case EventKind::kLinkDown:
        down_until[e->port] = e->at_seconds + e->duration_seconds;
        break;
      case EventKind::kLinkUp:
        down_until[e->port] = e->at_seconds;
        break;
      default:
        break;
    }
  }
  for (int p = 0; p < dev.ports; ++p) s.links.push_back({p, t >= down_until[p]});
  s.health = Health::kOk;
  for (const DeviceErrorCode& c : codes) {
    Health h = HealthFor(c.severity);
    if (static_cast<int>(h) > static_cast<int>(s.health)) s.health = h;
  }
  // A chip slowing itself down is a minor fault in its own right.
  if (s.throttled && s.health == Health::kOk) s.health = Health::kWarning;
  s.error_codes = std::move(codes);
}

}  // namespace

SimBackend::SimBackend(Scenario scenario, Clock& clock)
    : scenario_(std::move(scenario)),
      clock_(clock),
      start_(clock.Now()),
      hub_(std::make_shared<Hub>()),
      states_(scenario_.devices.size()) {
  // The faults that devices push to subscribers, in time order. A link that
  // goes down for a while comes back up by itself, which is a fault event too.
  for (const SimEvent& e : scenario_.events) {
    if (!IsFaultKind(e.kind)) continue;
    const DeviceInfo& info = scenario_.devices[e.device].info;
    std::string label = DeviceLabel(info);
    FaultEvent f;
    f.index = e.device;
    f.time = start_ + FromSeconds(e.at_seconds);
    f.code = e.code;
    switch (e.kind) {
      case EventKind::kErrorRaise:
        f.kind = FaultKind::kErrorRaised;
        f.message = fmt::format("{}: error code {} ({}){}{}", label, e.code,
                                SeverityName(e.severity), e.text.empty() ? "" : ": ", e.text);
        break;
      case EventKind::kErrorClear:
        f.kind = FaultKind::kErrorCleared;
        f.message = e.code.empty() ? fmt::format("{}: all error codes cleared", label)
                                   : fmt::format("{}: error code {} cleared", label, e.code);
        break;
      case EventKind::kLinkDown:
      case EventKind::kLinkUp:
        f.kind = e.kind == EventKind::kLinkDown ? FaultKind::kLinkDown : FaultKind::kLinkUp;
        f.port = e.port;
        f.message = fmt::format("{}: link on port {} {}", label, e.port,
                                e.kind == EventKind::kLinkDown ? "down" : "up");
        break;
      case EventKind::kDeviceLost:
        f.kind = FaultKind::kDeviceLost;
        f.message = fmt::format("{}: device lost (no longer answers on the bus)", label);
        break;
      case EventKind::kEccErrors:
        f.kind = FaultKind::kEccErrors;
        f.message = fmt::format("{}: HBM ECC errors: {} single-bit, {} double-bit", label,
                                e.single_bit, e.double_bit);
        break;
      default:
        break;
    }
    timeline_.push_back({e.at_seconds, f});
    if (e.kind == EventKind::kLinkDown && std::isfinite(e.duration_seconds)) {
      FaultEvent up = f;
      up.kind = FaultKind::kLinkUp;
      up.time = start_ + FromSeconds(e.at_seconds + e.duration_seconds);
      up.message = fmt::format("{}: link on port {} up", label, e.port);
      timeline_.push_back({e.at_seconds + e.duration_seconds, up});
    }
  }
  std::stable_sort(timeline_.begin(), timeline_.end(),
                   [](const TimedFault& a, const TimedFault& b) { return a.at < b.at; });
}

SimBackend::~SimBackend() {
  shutdown_.request_stop();
  if (fault_thread_.joinable()) {
    fault_thread_.request_stop();
    fault_thread_.join();
  }
}

std::string SimBackend::Describe() const {
  // "8 x Ascend910C", or "6 x Ascend910C + 2 x H100" for a mixed node.
  std::vector<std::pair<std::string, int>> counts;
  for (const SimDevice& d : scenario_.devices) {
    if (counts.empty() || counts.back().first != d.info.model) {
      counts.emplace_back(d.info.model, 0);
    }
    ++counts.back().second;
  }
  std::string devices;
  for (const auto& [model, n] : counts) {
    devices += fmt::format("{}{} x {}", devices.empty() ? "" : " + ", n, model);
  }
  return fmt::format("sim, scenario {} ({})", scenario_.name, devices);
}

double SimBackend::ElapsedSeconds() const { return ToSeconds(clock_.Now() - start_); }

Status SimBackend::CheckIndex(int index) const {
  int n = static_cast<int>(scenario_.devices.size());
  if (index < 0 || index >= n) {
    return NotFound(
        fmt::format("device {} does not exist: this node has {} devices (0-{})", index, n, n - 1));
  }
  return Ok();
}

Result<std::vector<DeviceInfo>> SimBackend::Enumerate() {
  std::vector<DeviceInfo> out;
  out.reserve(scenario_.devices.size());
  for (const SimDevice& d : scenario_.devices) out.push_back(d.info);
  return out;
}

Result<DeviceSample> SimBackend::Sample(int index) {
  ANXIN_TRY(CheckIndex(index));
  DeviceState st;
  double t;
  {
    std::lock_guard lock(mu_);
    st = states_[index];
    t = ElapsedSeconds();
  }
  return Evaluate(index, t, st);
}

Result<DeviceSample> SimBackend::Evaluate(int index, double t, const DeviceState& st) const {
  const SimDevice& dev = scenario_.devices[index];
  const uint64_t seed = scenario_.seed;
  DeviceSample s;
  s.index = index;
  s.time = start_ + FromSeconds(t);
  const double total = static_cast<double>(dev.info.hbm_total_bytes);

  auto noise = [&](Metric m, double at, double amplitude) {
    if (amplitude == 0) return 0.0;
    return amplitude * SmoothNoise(seed, Stream(index, m), at, dev.noise.period_seconds);
  };

  if (st.resetting) {
    // Mid-reset the chip is quiet: nothing runs, its memory is gone, its
    // links are down until the firmware brings them back.
    s.health = Health::kResetting;
    s.temperature_celsius = dev.baseline.temperature_celsius;
    s.power_watts = dev.info.tdp_watts * 0.1;
    for (int p = 0; p < dev.ports; ++p) s.links.push_back({p, false});
    return s;
  }

  const std::vector<const SimEvent*> active = ActiveEvents(scenario_, index, t, st.epoch);

  for (const SimEvent* e : active) {
    if (e->kind == EventKind::kDeviceLost) {
      return Unavailable(fmt::format(
          "{} is lost: it no longer answers on the bus (since {:.1f} s into the scenario): "
          "reset it, or drain the node and have the device checked",
          DeviceLabel(dev.info), e->at_seconds));
    }
  }

  // A hang freezes the readings of the work on the device at the values
  // they had when it began (or pins utilisation to a given value).
  const SimEvent* hang = nullptr;
  for (const SimEvent* e : active) {
    if (e->kind == EventKind::kHang && t < e->at_seconds + e->duration_seconds) hang = e;
  }
  const double work_time = hang ? hang->at_seconds : t;

  s.temperature_celsius = RampedTemperature(dev, active, t) +
                          noise(Metric::kTemperature, t, dev.noise.temperature_celsius);

  // Utilisation and power (power follows utilisation: 0.75 x TDP across 0-100 %).
  double util_noise = noise(Metric::kUtilisation, work_time, dev.noise.utilisation_percent);
  double util = std::clamp(dev.baseline.utilisation_percent + util_noise, 0.0, 100.0);
  if (hang && hang->hang_utilisation >= 0) util = hang->hang_utilisation;
  s.utilisation_percent = util;
  double watts_per_percent = dev.info.tdp_watts * 0.75 / 100;
  double power = dev.baseline.power_watts +
                 noise(Metric::kPower, work_time, dev.noise.power_watts) +
                 (util - dev.baseline.utilisation_percent) * watts_per_percent;
  s.power_watts = std::clamp(power, dev.info.tdp_watts * 0.05, dev.info.tdp_watts * 1.1);

  // HBM: the baseline, its wobble, and what leaks and steps added since the
  // last clear.
  double hbm = static_cast<double>(dev.baseline.hbm_used_bytes) +
               noise(Metric::kHbm, work_time, static_cast<double>(dev.noise.hbm_used_bytes));
  hbm = WithHbmEvents(hbm, active, t, st.memory_epoch);
  s.hbm_used_bytes = static_cast<uint64_t>(std::clamp(hbm, 0.0, total));

  // Clocks: the chip slows down once it reaches its throttle temperature.
  s.throttled = s.temperature_celsius >= dev.info.throttle_celsius;
  s.core_clock_mhz = dev.model.core_clock_mhz * (s.throttled ? 0.6 : 1.0);
  s.memory_clock_mhz = dev.model.memory_clock_mhz;

  ApplyFaults(dev, active, t, s);
  return s;
}

Result<FaultSubscription> SimBackend::SubscribeFaults(FaultCallback callback) {
  if (!scenario_.capabilities.fault_events) {
    return std::unexpected(
        CannotDo("report fault events (the scenario lists fault_events as unsupported)",
                 "poll Sample() for health and error codes instead"));
  }
  int id;
  {
    std::lock_guard lock(hub_->mu);
    id = hub_->next_id++;
    hub_->subscribers.emplace(id, std::move(callback));
  }
  {
    std::lock_guard lock(mu_);
    if (!fault_thread_.joinable()) {
      // Faults due before the first subscription are not replayed: a
      // subscriber hears what happens from then on, as with real devices.
      double from = ElapsedSeconds();
      fault_thread_ =
          std::jthread([this, from](std::stop_token stop) { DeliverFaults(from, stop); });
    }
  }
  std::weak_ptr<Hub> weak = hub_;
  return FaultSubscription([weak, id] {
    if (auto hub = weak.lock()) {
      std::lock_guard lock(hub->mu);
      hub->subscribers.erase(id);
    }
  });
}

void SimBackend::Publish(const FaultEvent& e) { hub_->Publish(e); }

void SimBackend::DeliverFaults(double from, std::stop_token stop) {
  size_t next = 0;
  while (next < timeline_.size() && timeline_[next].at < from) ++next;
  for (; next < timeline_.size(); ++next) {
    const TimedFault& f = timeline_[next];
    if (!clock_.SleepUntil(start_ + FromSeconds(f.at), stop)) return;
    {
      std::lock_guard lock(mu_);
      const DeviceState& st = states_[f.event.index];
      // A reset that finished after the fault was due has already undone it.
      if (f.at < st.epoch || st.resetting) continue;
    }
    Publish(f.event);
  }
}

Status SimBackend::ClearMemory(int index) {
  if (!scenario_.capabilities.clear_memory) {
    return std::unexpected(
        CannotDo("clear device memory (the scenario lists clear_memory as unsupported)",
                 "stop the processes on the device to free its memory"));
  }
  ANXIN_TRY(CheckIndex(index));
  std::lock_guard lock(mu_);
  DeviceState& st = states_[index];
  const DeviceInfo& info = scenario_.devices[index].info;
  if (st.resetting) {
    return FailedPrecondition(fmt::format(
        "{} is resetting: wait for the reset to finish; it clears memory too", DeviceLabel(info)));
  }
  double t = ElapsedSeconds();
  auto sample = Evaluate(index, t, st);
  if (!sample) return std::unexpected(std::move(sample).error().With("clearing memory"));
  st.memory_epoch = t;
  return Ok();
}

Status SimBackend::Reset(int index) {
  if (!scenario_.capabilities.reset) {
    return std::unexpected(
        CannotDo("reset devices (the scenario lists reset as unsupported)",
                 "reset with the vendor tool (npu-smi set -t reset -i <card> -c <chip>, or "
                 "nvidia-smi -r -i <gpu>)"));
  }
  ANXIN_TRY(CheckIndex(index));
  const SimDevice& dev = scenario_.devices[index];
  std::string label = DeviceLabel(dev.info);
  int attempt;
  Clock::TimePoint end;
  {
    std::lock_guard lock(mu_);
    DeviceState& st = states_[index];
    if (st.resetting) {
      return FailedPrecondition(
          fmt::format("{}: a reset is already in progress: wait for it to finish", label));
    }
    st.resetting = true;
    attempt = ++st.reset_attempts;
    end = clock_.Now() + FromSeconds(dev.reset.duration_seconds);
  }
  bool finished = clock_.SleepUntil(end, shutdown_.get_token());
  FaultEvent f;
  f.index = index;
  f.time = end;
  {
    std::lock_guard lock(mu_);
    DeviceState& st = states_[index];
    st.resetting = false;
    if (!finished) return Cancelled(fmt::format("{}: reset interrupted by shutdown", label));
    if (attempt > dev.reset.fail_first) {
      st.epoch = ToSeconds(end - start_);
      st.memory_epoch = st.epoch;
    }
  }
  if (attempt <= dev.reset.fail_first) {
    f.kind = FaultKind::kResetFailed;
    f.message = fmt::format("{}: reset failed (attempt {})", label, attempt);
    Publish(f);
    return Unavailable(fmt::format(
        "{}: reset failed (attempt {}; this device fails its first {}): retry the reset; if it "
        "keeps failing, take the device out of service",
        label, attempt, dev.reset.fail_first));
  }
  f.kind = FaultKind::kResetDone;
  f.message = fmt::format("{}: reset done (attempt {})", label, attempt);
  Publish(f);
  return Ok();
}

}  // namespace anxin::device::sim
