#include "anxin/agent/device_exporter.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>

#include "anxin/base/strings.h"

namespace anxin::agent {

using device::DeviceInfo;
using device::DeviceSample;
using device::FaultEvent;
using device::FaultKind;
using device::Health;
using device::Reported;
using monitor::Counter;
using monitor::Family;
using monitor::Gauge;
using monitor::Histogram;

namespace {

const std::vector<std::string> kDeviceLabels = {"node",  "device", "uuid",
                                                "model", "bus_id", "numa_node"};

std::vector<std::string> With(std::vector<std::string> names,
                              std::initializer_list<const char*> more) {
  for (const char* m : more) names.emplace_back(m);
  return names;
}

// A sample pass: a few ms for a node of devices, up to seconds for a
// driver that hangs.
const std::vector<double> kPassBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};

constexpr FaultKind kFaultKinds[] = {
    FaultKind::kErrorRaised, FaultKind::kErrorCleared, FaultKind::kLinkDown,
    FaultKind::kLinkUp,      FaultKind::kDeviceLost,   FaultKind::kEccErrors,
    FaultKind::kResetDone,   FaultKind::kResetFailed,
};

constexpr Health kHealthStates[] = {Health::kOk, Health::kWarning, Health::kAlarm,
                                    Health::kCritical, Health::kResetting};
std::string HealthState(Health h) {
  std::string s(device::HealthName(h));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// npu-exporter reports HBM in MB as the driver does (2^20 bytes).
constexpr double kNpuMB = 1024.0 * 1024.0;

// The gauges of one snapshot. Each pass builds a registry of its own, so
// that what a device did not report is simply absent.
struct Gauges {
  Family<Gauge>* info;
  Family<Gauge>* up;
  Family<Gauge>* memory_total;
  Family<Gauge>* throttle_temperature;
  Family<Gauge>* memory_used;
  Family<Gauge>* memory_ratio;
  Family<Gauge>* temperature;
  Family<Gauge>* power;
  Family<Gauge>* utilization;
  Family<Gauge>* core_clock;
  Family<Gauge>* memory_clock;
  Family<Gauge>* throttled;
  Family<Gauge>* health;
  Family<Gauge>* link_up;
  // npu-exporter
  Family<Gauge>* npu_temperature = nullptr;
  Family<Gauge>* npu_power = nullptr;
  Family<Gauge>* npu_hbm_used = nullptr;
  Family<Gauge>* npu_hbm_total = nullptr;
  Family<Gauge>* npu_utilization = nullptr;
  Family<Gauge>* npu_health = nullptr;
  // dcgm-exporter
  Family<Gauge>* dcgm_temp = nullptr;
  Family<Gauge>* dcgm_power = nullptr;
  Family<Gauge>* dcgm_util = nullptr;
  Family<Gauge>* dcgm_fb_used = nullptr;
  Family<Gauge>* dcgm_fb_free = nullptr;
  Family<Gauge>* dcgm_xid = nullptr;
};

Result<Gauges> AddGauges(monitor::Registry& r, Compat compat) {
  Gauges g;
  const auto& l = kDeviceLabels;
  ANXIN_ASSIGN_OR_RETURN(g.info, r.AddGauge("anxin_device_info", "The device's identity; always 1.",
                                            With(l, {"vendor"})));
  ANXIN_ASSIGN_OR_RETURN(
      g.up, r.AddGauge("anxin_device_up",
                       "1 when the last sample of the device succeeded, 0 when it is lost or "
                       "does not answer.",
                       l));
  ANXIN_ASSIGN_OR_RETURN(g.memory_total, r.AddGauge("anxin_device_memory_total_bytes",
                                                    "Device memory (HBM) size.", l));
  ANXIN_ASSIGN_OR_RETURN(g.throttle_temperature,
                         r.AddGauge("anxin_device_throttle_temperature_celsius",
                                    "Temperature at which the device slows its clocks down.", l));
  ANXIN_ASSIGN_OR_RETURN(g.memory_used, r.AddGauge("anxin_device_memory_used_bytes",
                                                   "Device memory (HBM) in use.", l));
  ANXIN_ASSIGN_OR_RETURN(g.memory_ratio,
                         r.AddGauge("anxin_device_memory_used_ratio",
                                    "Device memory in use over its size (0..1).", l));
  ANXIN_ASSIGN_OR_RETURN(g.temperature, r.AddGauge("anxin_device_temperature_celsius",
                                                   "Device (chip) temperature.", l));
  ANXIN_ASSIGN_OR_RETURN(g.power, r.AddGauge("anxin_device_power_watts", "Board power draw.", l));
  ANXIN_ASSIGN_OR_RETURN(
      g.utilization, r.AddGauge("anxin_device_utilization_ratio",
                                "Compute utilisation (AI core on Ascend, SM on NVIDIA), 0..1.", l));
  ANXIN_ASSIGN_OR_RETURN(g.core_clock,
                         r.AddGauge("anxin_device_core_clock_hertz", "Core clock.", l));
  ANXIN_ASSIGN_OR_RETURN(g.memory_clock,
                         r.AddGauge("anxin_device_memory_clock_hertz", "Memory clock.", l));
  ANXIN_ASSIGN_OR_RETURN(g.throttled,
                         r.AddGauge("anxin_device_throttled",
                                    "1 when the device has slowed its clocks (too hot).", l));
  ANXIN_ASSIGN_OR_RETURN(g.health,
                         r.AddGauge("anxin_device_health",
                                    "Device health as a state set: 1 for the current state "
                                    "(ok, warning, alarm, critical, resetting), 0 for the others.",
                                    With(l, {"state"})));
  ANXIN_ASSIGN_OR_RETURN(g.link_up,
                         r.AddGauge("anxin_device_link_up", "1 when the network port's link is up.",
                                    With(l, {"port"})));
  if (compat == Compat::kNpuExporter) {
    const std::vector<std::string> n = {"id", "model_name", "vdie_id", "pcie_bus_info"};
    ANXIN_ASSIGN_OR_RETURN(g.npu_temperature,
                           r.AddGauge("npu_chip_info_temperature", "the npu temperature", n));
    ANXIN_ASSIGN_OR_RETURN(g.npu_power, r.AddGauge("npu_chip_info_power", "the npu power", n));
    ANXIN_ASSIGN_OR_RETURN(
        g.npu_hbm_used, r.AddGauge("npu_chip_info_hbm_used_memory", "the npu hbm used memory", n));
    ANXIN_ASSIGN_OR_RETURN(g.npu_hbm_total, r.AddGauge("npu_chip_info_hbm_total_memory",
                                                       "the npu hbm total memory", n));
    ANXIN_ASSIGN_OR_RETURN(g.npu_utilization,
                           r.AddGauge("npu_chip_info_utilization", "the ai core utilization", n));
    ANXIN_ASSIGN_OR_RETURN(g.npu_health, r.AddGauge("npu_chip_info_health_status",
                                                    "the npu health status (1 healthy, 0 not)", n));
  } else if (compat == Compat::kDcgm) {
    const std::vector<std::string> d = {"gpu",    "UUID",      "pci_bus_id",
                                        "device", "modelName", "Hostname"};
    ANXIN_ASSIGN_OR_RETURN(g.dcgm_temp,
                           r.AddGauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", d));
    ANXIN_ASSIGN_OR_RETURN(g.dcgm_power,
                           r.AddGauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", d));
    ANXIN_ASSIGN_OR_RETURN(g.dcgm_util,
                           r.AddGauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", d));
    ANXIN_ASSIGN_OR_RETURN(
        g.dcgm_fb_used, r.AddGauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", d));
    ANXIN_ASSIGN_OR_RETURN(
        g.dcgm_fb_free, r.AddGauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", d));
    ANXIN_ASSIGN_OR_RETURN(g.dcgm_xid,
                           r.AddGauge("DCGM_FI_DEV_XID_ERRORS",
                                      "Value of the last XID error encountered (0: none).", d));
  }
  return g;
}

// The XID of an NVIDIA error code ("79"), or nullopt for other codes.
std::optional<double> XidOf(const std::string& code) {
  int v = 0;
  auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), v);
  if (ec != std::errc() || end != code.data() + code.size() || v < 0) return std::nullopt;
  return v;
}

void SetIfReported(Family<Gauge>* f, std::span<const std::string> labels, double v,
                   double scale = 1) {
  if (f && Reported(v)) f->WithLabels(labels).Set(v * scale);
}

}  // namespace

Result<Compat> ParseCompat(std::string_view name) {
  if (name.empty() || name == "none") return Compat::kNone;
  if (name == "npu-exporter") return Compat::kNpuExporter;
  if (name == "dcgm") return Compat::kDcgm;
  return InvalidArgument("unknown compatibility mode '" + std::string(name) +
                         "': use npu-exporter, dcgm or none");
}

std::string_view CompatName(Compat c) {
  switch (c) {
    case Compat::kNone:
      return "none";
    case Compat::kNpuExporter:
      return "npu-exporter";
    case Compat::kDcgm:
      return "dcgm";
  }
  return "none";
}

struct DeviceExporter::Counters {
  Family<Counter>* fault_events;
  Family<Counter>* error_codes;
  Family<Counter>* ecc;
  Family<Counter>* link_flaps;
  Family<Counter>* sample_errors;
  Histogram* pass_seconds;
  Counter* overruns;
};

struct DeviceExporter::Published {
  std::shared_ptr<const device::Snapshot> snapshot;
  std::unique_ptr<monitor::Registry> gauges;
};

Result<std::unique_ptr<DeviceExporter>> DeviceExporter::Create(device::DeviceBackend& backend,
                                                               monitor::Registry& registry,
                                                               DeviceExporterOptions options) {
  if (options.interval <= Clock::Duration::zero())
    return InvalidArgument("the sample interval must be above 0");
  std::unique_ptr<DeviceExporter> e(new DeviceExporter(backend, registry, std::move(options)));
  ANXIN_ASSIGN_OR_RETURN(e->infos_, backend.Enumerate());
  {
    // The gauge names are fixed: a failure here is a bug, found at start.
    monitor::Registry probe;
    ANXIN_TRY(AddGauges(probe, e->options_.compat));
  }
  auto c = std::make_unique<Counters>();
  const auto& l = kDeviceLabels;
  ANXIN_ASSIGN_OR_RETURN(
      c->fault_events,
      registry.AddCounter("anxin_device_fault_events_total",
                          "Fault events the device reported, by kind.", With(l, {"kind"})));
  ANXIN_ASSIGN_OR_RETURN(
      c->error_codes,
      registry.AddCounter("anxin_device_error_codes_total",
                          "Error codes raised by the device: each appearance counts.",
                          With(l, {"code", "severity"})));
  ANXIN_ASSIGN_OR_RETURN(c->ecc, registry.AddCounter("anxin_device_ecc_errors_total",
                                                     "Memory ECC errors: single_bit (corrected), "
                                                     "double_bit (uncorrected).",
                                                     With(l, {"type"})));
  ANXIN_ASSIGN_OR_RETURN(
      c->link_flaps,
      registry.AddCounter("anxin_device_link_flaps_total", "Times a network port's link went down.",
                          With(l, {"port"})));
  ANXIN_ASSIGN_OR_RETURN(
      c->sample_errors,
      registry.AddCounter("anxin_device_sample_errors_total",
                          "Samples of the device that failed (lost, not answering).", l));
  ANXIN_ASSIGN_OR_RETURN(auto* pass, registry.AddHistogram("anxin_agent_sample_duration_seconds",
                                                           "Time to sample every device once.",
                                                           {"node"}, kPassBuckets));
  ANXIN_ASSIGN_OR_RETURN(
      auto* overruns,
      registry.AddCounter("anxin_agent_sample_overruns_total",
                          "Sample passes that took longer than the sample interval.", {"node"}));
  const std::string& node = e->options_.node;
  c->pass_seconds = &pass->WithLabels({node});
  c->overruns = &overruns->WithLabels({node});
  for (const DeviceInfo& info : e->infos_) {
    std::vector<std::string> labels = {node,
                                       std::to_string(info.index),
                                       info.uuid,
                                       info.model,
                                       info.pci_bus_id,
                                       info.numa_node >= 0 ? std::to_string(info.numa_node) : ""};
    // Counters exist from the start, so that increase() sees the first one.
    for (FaultKind k : kFaultKinds) {
      auto v = labels;
      v.emplace_back(device::FaultKindName(k));
      c->fault_events->WithLabels(v);
    }
    for (const char* type : {"single_bit", "double_bit"}) {
      auto v = labels;
      v.emplace_back(type);
      c->ecc->WithLabels(v);
    }
    c->sample_errors->WithLabels(labels);
    e->labels_.push_back(std::move(labels));
  }
  e->states_.resize(e->infos_.size());
  e->counters_ = std::move(c);
  auto sub = backend.SubscribeFaults([raw = e.get()](const FaultEvent& f) { raw->OnFault(f); });
  if (sub) {
    e->subscription_ = std::move(*sub);
    e->subscription_active_ = true;
  } else {
    spdlog::info(
        "agent: no fault events from backend '{}' ({}); link flaps are inferred from "
        "samples",
        backend.name(), sub.error().message());
  }
  return e;
}

DeviceExporter::DeviceExporter(device::DeviceBackend& backend, monitor::Registry& registry,
                               DeviceExporterOptions options)
    : backend_(backend),
      registry_(registry),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : RealClock()) {}

DeviceExporter::~DeviceExporter() {
  Stop();
  subscription_.Cancel();
}

static size_t IndexOf(const std::vector<DeviceInfo>& infos, int index) {
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].index == index) return i;
  return infos.size();
}

void DeviceExporter::OnFault(const FaultEvent& e) {
  const size_t i = IndexOf(infos_, e.index);
  if (i == infos_.size()) return;
  if (options_.on_fault) options_.on_fault(e);
  auto v = labels_[i];
  v.emplace_back(device::FaultKindName(e.kind));
  counters_->fault_events->WithLabels(v).Inc();
  if (e.kind == FaultKind::kLinkDown && e.port >= 0) {
    v.back() = std::to_string(e.port);
    counters_->link_flaps->WithLabels(v).Inc();
  }
}

void DeviceExporter::SampleOnce() {
  std::lock_guard lock(sample_mu_);
  const auto start = std::chrono::steady_clock::now();
  auto snap = std::make_shared<device::Snapshot>();
  snap->source = backend_.Describe();
  snap->time = clock_.Now();
  auto published = std::make_shared<Published>();
  published->gauges = std::make_unique<monitor::Registry>();
  auto gauges = AddGauges(*published->gauges, options_.compat);
  if (!gauges) {  // checked in Create
    spdlog::error("agent: {}", gauges.error().ToString());
    return;
  }
  Gauges& g = *gauges;
  Counters& c = *counters_;
  for (size_t i = 0; i < infos_.size(); ++i) {
    const DeviceInfo& info = infos_[i];
    const std::vector<std::string>& l = labels_[i];
    snap->rows.push_back({info, backend_.Sample(info.index)});
    const Result<DeviceSample>& r = snap->rows.back().sample;
    auto plus = [&](std::string_view extra) {
      auto v = l;
      v.emplace_back(extra);
      return v;
    };
    g.info->WithLabels(plus(info.vendor)).Set(1);
    g.up->WithLabels(l).Set(r ? 1 : 0);
    const double total = static_cast<double>(info.hbm_total_bytes);
    if (info.hbm_total_bytes > 0) g.memory_total->WithLabels(l).Set(total);
    if (info.throttle_celsius > 0) g.throttle_temperature->WithLabels(l).Set(info.throttle_celsius);
    if (!r) {
      // No readings from a refused sample, not even a neighbour's: up 0, one
      // log line each time the reason changes.
      c.sample_errors->WithLabels(l).Inc();
      std::string why = r.error().Describe();
      if (why != states_[i].sample_error) {
        spdlog::warn("agent: device {}: sample refused, reported as down: {}", info.index, why);
        states_[i].sample_error = std::move(why);
      }
      continue;
    }
    if (!states_[i].sample_error.empty()) {
      spdlog::info("agent: device {}: sampled again after: {}", info.index,
                   states_[i].sample_error);
      states_[i].sample_error.clear();
    }
    const DeviceSample& s = *r;
    const bool used_reported = Reported(s.hbm_used_bytes);
    const double used = used_reported ? static_cast<double>(s.hbm_used_bytes) : 0;
    if (used_reported) {
      g.memory_used->WithLabels(l).Set(used);
      if (total > 0) g.memory_ratio->WithLabels(l).Set(used / total);
    }
    SetIfReported(g.temperature, l, s.temperature_celsius);
    SetIfReported(g.power, l, s.power_watts);
    SetIfReported(g.utilization, l, s.utilisation_percent, 0.01);
    SetIfReported(g.core_clock, l, s.core_clock_mhz, 1e6);
    SetIfReported(g.memory_clock, l, s.memory_clock_mhz, 1e6);
    g.throttled->WithLabels(l).Set(s.throttled ? 1 : 0);
    for (Health h : kHealthStates) g.health->WithLabels(plus(HealthState(h))).Set(h == s.health);
    DeviceState& st = states_[i];
    for (const device::LinkState& link : s.links) {
      const std::string port = std::to_string(link.port);
      g.link_up->WithLabels(plus(port)).Set(link.up ? 1 : 0);
      Counter& flaps = c.link_flaps->WithLabels(plus(port));
      auto prev = st.links.find(link.port);
      // Without fault events, a link seen up and now down is one flap.
      if (!subscription_active_ && prev != st.links.end() && prev->second && !link.up) flaps.Inc();
      st.links[link.port] = link.up;
    }
    std::set<std::string> codes;
    for (const device::DeviceErrorCode& code : s.error_codes) {
      codes.insert(code.code);
      if (!st.codes.contains(code.code)) {
        auto v = plus(code.code);
        v.emplace_back(device::SeverityName(code.severity));
        c.error_codes->WithLabels(v).Inc();
      }
    }
    st.codes = std::move(codes);
    // Cumulative counts; a smaller one means the device reset its counters.
    // Both series exist from the first sample (at 0), so that increase()
    // in an alert rule sees the first error.
    auto ecc = [&](uint64_t now, uint64_t& before, const char* type) {
      if (!Reported(now)) return;
      const uint64_t delta = now >= before ? now - before : now;
      c.ecc->WithLabels(plus(type)).Inc(static_cast<double>(delta));
      before = now;
    };
    ecc(s.ecc.single_bit, st.ecc_single, "single_bit");
    ecc(s.ecc.double_bit, st.ecc_double, "double_bit");
    st.seen = true;

    if (options_.compat == Compat::kNpuExporter) {
      const std::vector<std::string> n = {std::to_string(info.index), info.model, info.uuid,
                                          info.pci_bus_id};
      SetIfReported(g.npu_temperature, n, s.temperature_celsius);
      SetIfReported(g.npu_power, n, s.power_watts);
      if (used_reported) g.npu_hbm_used->WithLabels(n).Set(std::round(used / kNpuMB));
      if (total > 0) g.npu_hbm_total->WithLabels(n).Set(std::round(total / kNpuMB));
      SetIfReported(g.npu_utilization, n, s.utilisation_percent);
      g.npu_health->WithLabels(n).Set(s.health == Health::kOk ? 1 : 0);
    } else if (options_.compat == Compat::kDcgm) {
      const std::vector<std::string> d = {std::to_string(info.index),
                                          info.uuid,
                                          info.pci_bus_id,
                                          "nvidia" + std::to_string(info.index),
                                          info.model,
                                          options_.node};
      SetIfReported(g.dcgm_temp, d, s.temperature_celsius);
      SetIfReported(g.dcgm_power, d, s.power_watts);
      SetIfReported(g.dcgm_util, d, s.utilisation_percent);
      if (used_reported) {
        g.dcgm_fb_used->WithLabels(d).Set(std::round(ToMiB(used)));
        if (total > 0) g.dcgm_fb_free->WithLabels(d).Set(std::round(ToMiB(total - used)));
      }
      double xid = 0;
      for (const device::DeviceErrorCode& code : s.error_codes)
        if (auto x = XidOf(code.code)) xid = *x;
      g.dcgm_xid->WithLabels(d).Set(xid);
    }
  }
  published->snapshot = snap;
  {
    std::lock_guard plock(publish_mu_);
    published_ = std::move(published);
  }
  if (options_.on_snapshot) options_.on_snapshot(*snap);
  passes_.fetch_add(1, std::memory_order_relaxed);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.pass_seconds->Observe(seconds);
  if (seconds > ToSeconds(options_.interval)) c.overruns->Inc();
}

void DeviceExporter::Loop(std::stop_token stop) {
  Clock::TimePoint next = clock_.Now();
  while (!stop.stop_requested()) {
    SampleOnce();
    next += options_.interval;
    // A pass that ran past one or more ticks skips them (counted as an overrun).
    const Clock::TimePoint now = clock_.Now();
    while (next <= now) next += options_.interval;
    if (!clock_.SleepUntil(next, stop)) return;
  }
}

void DeviceExporter::Start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void DeviceExporter::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void DeviceExporter::WriteText(std::string& out) const {
  std::shared_ptr<const Published> p;
  {
    std::lock_guard lock(publish_mu_);
    p = published_;
  }
  if (p) p->gauges->WriteText(out);
}

std::shared_ptr<const device::Snapshot> DeviceExporter::snapshot() const {
  std::lock_guard lock(publish_mu_);
  if (!published_) return nullptr;
  return published_->snapshot;
}

uint64_t DeviceExporter::overruns() const {
  return static_cast<uint64_t>(counters_->overruns->value());
}

}  // namespace anxin::agent
