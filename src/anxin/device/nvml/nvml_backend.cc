#include "anxin/device/nvml/nvml_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "anxin/base/dynamic_library.h"
#include "anxin/base/subprocess.h"
#include "anxin/device/models.h"

namespace anxin::device::nvml {
namespace {

// The part of the NVML C API this backend uses, declared from NVIDIA's public
// API documentation (values as documented for nvml.h).
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr int NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
constexpr int NVML_FEATURE_ENABLED = 1;
constexpr unsigned int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8;
// Throttle reasons that mean "too hot" or "the hardware slowed down".
constexpr unsigned long long kHwSlowdown = 0x8;
constexpr unsigned long long kSwThermalSlowdown = 0x20;
constexpr unsigned long long kHwThermalSlowdown = 0x40;
constexpr unsigned long long kHwPowerBrakeSlowdown = 0x80;

struct Api {
  void* lib = nullptr;
  nvmlReturn_t (*Init)() = nullptr;
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*GetCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*GetUUID)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*GetTemperatureThreshold)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*GetEnforcedPowerLimit)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*GetThrottleReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*GetNvLinkState)(nvmlDevice_t, unsigned int, int*) = nullptr;
  // Only the count is asked for, so the layout of the process records does
  // not matter (nullptr buffer; NVML_ERROR_INSUFFICIENT_SIZE means "some").
  nvmlReturn_t (*GetComputeRunningProcesses)(nvmlDevice_t, unsigned int*, void*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t) = nullptr;
};

// What an XID number means and how bad it is, for the XIDs that operators
// meet most (NVIDIA's XID catalogue); others are major with no text.
struct XidInfo {
  int xid;
  Severity severity;
  const char* text;
};
constexpr XidInfo kXids[] = {
    {13, Severity::kMinor, "graphics engine exception (usually the application)"},
    {31, Severity::kMinor, "GPU memory page fault (usually the application)"},
    {43, Severity::kMinor, "GPU stopped processing (usually the application)"},
    {45, Severity::kMinor, "preemptive cleanup after an earlier error"},
    {48, Severity::kCritical, "double-bit ECC error: drain the GPU and reset it"},
    {63, Severity::kMajor, "ECC page retirement or row remap recorded: reset when idle"},
    {64, Severity::kCritical, "ECC page retirement or row remap failed: reset or replace"},
    {74, Severity::kMajor, "NVLink error: check the links and reset the GPU"},
    {79, Severity::kCritical, "GPU has fallen off the bus: reboot the node"},
    {92, Severity::kMajor, "high single-bit ECC error rate"},
    {94, Severity::kMajor, "contained ECC error: restart the affected application"},
    {95, Severity::kCritical, "uncontained ECC error: reset the GPU"},
    {119, Severity::kCritical, "GSP firmware timeout: reset the GPU"},
    {120, Severity::kCritical, "GSP firmware error: reset the GPU"},
};

DeviceErrorCode XidCode(unsigned long long xid) {
  for (const XidInfo& x : kXids) {
    if (static_cast<unsigned long long>(x.xid) == xid) {
      return {fmt::format("Xid {}", xid), x.severity, x.text};
    }
  }
  return {fmt::format("Xid {}", xid), Severity::kMajor, ""};
}

Health HealthOf(const std::vector<DeviceErrorCode>& codes) {
  Health h = Health::kOk;
  for (const DeviceErrorCode& c : codes) {
    Health ch = c.severity == Severity::kCritical ? Health::kCritical
                : c.severity == Severity::kMajor  ? Health::kAlarm
                                                  : Health::kWarning;
    h = std::max(h, ch);
  }
  return h;
}

// "NVIDIA H200" -> "H200": the table's name column, as for the sim's models.
std::string ModelName(std::string name) {
  for (std::string_view prefix : {"NVIDIA ", "Tesla "}) {
    if (name.starts_with(prefix)) name.erase(0, prefix.size());
  }
  return name;
}

// "00000000:19:00.0" (NVML) -> "0000:19:00.0" (lspci, sysfs, the sim).
std::string BusId(const nvmlPciInfo_t& pci) {
  return fmt::format("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
}

int NumaNode(std::string bus_id) {
  for (char& c : bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (in >> node && node >= 0) return node;
  return -1;
}

class NvmlBackend final : public DeviceBackend {
 public:
  NvmlBackend(Api api, std::string library, NvmlOptions options, Clock& clock)
      : api_(api), library_(std::move(library)), options_(std::move(options)), clock_(clock) {}

  ~NvmlBackend() override {
    events_thread_ = std::jthread();  // stop and join before NVML goes
    if (event_set_ != nullptr) api_.EventSetFree(event_set_);
    api_.Shutdown();
    dlclose(api_.lib);
  }

  std::string_view name() const override { return "nvml"; }

  std::string Describe() const override {
    std::lock_guard lock(mu_);
    if (infos_.empty()) return "nvml";
    return fmt::format("nvml ({} x {})", infos_.size(), infos_[0].model);
  }

  Result<std::vector<DeviceInfo>> Enumerate() override {
    std::lock_guard lock(mu_);
    ANXIN_TRY(EnumerateLocked());
    return infos_;
  }

  Result<DeviceSample> Sample(int index) override {
    std::unique_lock lock(mu_);
    ANXIN_TRY(EnumerateLocked());
    ANXIN_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(index));
    if (lost_[index]) return std::unexpected(Lost(index, lock));
    DeviceSample s;
    s.index = index;
    s.time = clock_.Now();
    s.temperature_celsius = kNotReported;
    s.power_watts = kNotReported;
    s.utilisation_percent = kNotReported;
    s.core_clock_mhz = kNotReported;
    s.memory_clock_mhz = kNotReported;
    s.hbm_used_bytes = kNotReportedCount;
    s.ecc = {kNotReportedCount, kNotReportedCount};
    bool lost = false;
    // One NVML call: true when it answered; not supported (or not permitted)
    // leaves the reading out; a lost GPU ends the sample.
    auto read = [&](nvmlReturn_t rc, const char* what) -> Result<bool> {
      if (rc == NVML_SUCCESS) return true;
      if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NO_PERMISSION) return false;
      if (rc == NVML_ERROR_GPU_IS_LOST) {
        lost = true;
        return false;
      }
      return Unavailable(
          fmt::format("GPU {}: {} failed: {} (nvmlReturn_t {})", index, what, ErrorText(rc), rc));
    };
    nvmlMemory_t mem{};
    ANXIN_ASSIGN_OR_RETURN(bool ok, read(api_.GetMemoryInfo(dev, &mem), "nvmlDeviceGetMemoryInfo"));
    if (ok) s.hbm_used_bytes = mem.used;
    unsigned int v = 0;
    if (!lost) {
      ANXIN_ASSIGN_OR_RETURN(
          ok, read(api_.GetTemperature(dev, NVML_TEMPERATURE_GPU, &v), "nvmlDeviceGetTemperature"));
      if (ok) s.temperature_celsius = v;
    }
    if (!lost) {
      ANXIN_ASSIGN_OR_RETURN(ok, read(api_.GetPowerUsage(dev, &v), "nvmlDeviceGetPowerUsage"));
      if (ok) s.power_watts = v / 1000.0;  // milliwatts
    }
    if (!lost) {
      nvmlUtilization_t u{};
      ANXIN_ASSIGN_OR_RETURN(
          ok, read(api_.GetUtilizationRates(dev, &u), "nvmlDeviceGetUtilizationRates"));
      if (ok) s.utilisation_percent = u.gpu;
    }
    if (!lost) {
      ANXIN_ASSIGN_OR_RETURN(
          ok, read(api_.GetClockInfo(dev, NVML_CLOCK_SM, &v), "nvmlDeviceGetClockInfo"));
      if (ok) s.core_clock_mhz = v;
    }
    if (!lost) {
      ANXIN_ASSIGN_OR_RETURN(
          ok, read(api_.GetClockInfo(dev, NVML_CLOCK_MEM, &v), "nvmlDeviceGetClockInfo"));
      if (ok) s.memory_clock_mhz = v;
    }
    if (!lost) {
      unsigned long long reasons = 0;
      ANXIN_ASSIGN_OR_RETURN(ok, read(api_.GetThrottleReasons(dev, &reasons),
                                      "nvmlDeviceGetCurrentClocksThrottleReasons"));
      if (ok) {
        s.throttled = (reasons & (kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown |
                                  kHwPowerBrakeSlowdown)) != 0;
      }
    }
    for (int type : {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED}) {
      if (lost) break;
      unsigned long long n = 0;
      ANXIN_ASSIGN_OR_RETURN(ok, read(api_.GetTotalEccErrors(dev, type, NVML_VOLATILE_ECC, &n),
                                      "nvmlDeviceGetTotalEccErrors"));
      if (ok) (type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? s.ecc.single_bit : s.ecc.double_bit) = n;
    }
    for (unsigned int link = 0; link < kMaxNvLinks && !lost; ++link) {
      int active = 0;
      nvmlReturn_t rc = api_.GetNvLinkState(dev, link, &active);
      // A link the GPU does not have answers "not supported" or "invalid
      // argument": the GPU's links end there.
      if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT ||
          rc == NVML_ERROR_NOT_FOUND) {
        break;
      }
      ANXIN_ASSIGN_OR_RETURN(ok, read(rc, "nvmlDeviceGetNvLinkState"));
      if (ok) s.links.push_back({static_cast<int>(link), active == NVML_FEATURE_ENABLED});
    }
    if (lost) return std::unexpected(Lost(index, lock));
    s.error_codes = xids_[index];
    s.health = HealthOf(s.error_codes);
    if (s.ecc.double_bit != kNotReportedCount && s.ecc.double_bit > 0) {
      s.health = std::max(s.health, Health::kAlarm);
    }
    if (s.throttled) s.health = std::max(s.health, Health::kWarning);
    return s;
  }

  Result<FaultSubscription> SubscribeFaults(FaultCallback callback) override {
    int id = 0;
    {
      std::lock_guard lock(mu_);
      ANXIN_TRY(EnumerateLocked());
      if (!events_thread_.joinable()) ANXIN_TRY(StartEventsLocked());
      id = next_subscriber_++;
    }
    {
      // Not under mu_: callbacks run under sub_mu_ and may call Sample.
      std::lock_guard sub_lock(sub_mu_);
      subscribers_[id] = std::move(callback);
    }
    return FaultSubscription([this, id] {
      // sub_mu_ is held while callbacks run, so after this the callback is
      // neither running nor will run.
      std::lock_guard sub_lock(sub_mu_);
      subscribers_.erase(id);
    });
  }

  Status ClearMemory(int index) override { return ResetVia(index, "clear the memory of"); }
  Status Reset(int index) override { return ResetVia(index, "reset"); }

 private:
  std::string ErrorText(nvmlReturn_t rc) const {
    const char* t = api_.ErrorString ? api_.ErrorString(rc) : nullptr;
    return t ? t : "unknown error";
  }

  Error LostError(int index) const {
    return Error(ErrorCode::kUnavailable,
                 fmt::format("GPU {}: lost (NVML_ERROR_GPU_IS_LOST): it no longer answers on the "
                             "bus; reset it (nvidia-smi -r -i {}) or reboot the node",
                             index, index));
  }

  // A lost GPU: kUnavailable, and the first time a kDeviceLost fault.
  // REQUIRES: lock holds mu_; releases it.
  Error Lost(int index, std::unique_lock<std::mutex>& lock) {
    lost_[index] = true;
    const bool first = !lost_published_[index];
    lost_published_[index] = true;
    lock.unlock();
    if (first) {
      Publish(MakeFaultEvent(index, clock_.Now(), FaultKind::kDeviceLost,
                             fmt::format("GPU {} is lost (NVML_ERROR_GPU_IS_LOST)", index)));
    }
    return LostError(index);
  }

  // REQUIRES: mu_ held.
  Status EnumerateLocked() {
    if (enumerated_) return Ok();
    unsigned int count = 0;
    nvmlReturn_t rc = api_.GetCount(&count);
    if (rc != NVML_SUCCESS) {
      return Unavailable(
          fmt::format("nvml: nvmlDeviceGetCount failed: {} (nvmlReturn_t {})", ErrorText(rc), rc));
    }
    for (unsigned int i = 0; i < count; ++i) {
      DeviceInfo info;
      info.index = static_cast<int>(i);
      info.vendor = "nvidia";
      info.tdp_watts = kNotReported;
      info.throttle_celsius = kNotReported;
      nvmlDevice_t dev = nullptr;
      rc = api_.GetHandleByIndex(i, &dev);
      if (rc != NVML_SUCCESS && rc != NVML_ERROR_GPU_IS_LOST) {
        return Unavailable(
            fmt::format("nvml: GPU {}: nvmlDeviceGetHandleByIndex failed: {}", i, ErrorText(rc)));
      }
      handles_.push_back(dev);
      lost_.push_back(rc == NVML_ERROR_GPU_IS_LOST);
      lost_published_.push_back(false);
      xids_.emplace_back();
      if (rc == NVML_ERROR_GPU_IS_LOST) {
        info.model = "unknown";
        infos_.push_back(std::move(info));
        continue;
      }
      char buf[96] = {};
      if (api_.GetName(dev, buf, sizeof buf) == NVML_SUCCESS) info.model = ModelName(buf);
      char uuid[96] = {};
      if (api_.GetUUID(dev, uuid, sizeof uuid) == NVML_SUCCESS) info.uuid = uuid;
      nvmlPciInfo_t pci{};
      if (api_.GetPciInfo(dev, &pci) == NVML_SUCCESS) {
        info.pci_bus_id = BusId(pci);
        info.numa_node = NumaNode(info.pci_bus_id);
      }
      nvmlMemory_t mem{};
      if (api_.GetMemoryInfo(dev, &mem) == NVML_SUCCESS) info.hbm_total_bytes = mem.total;
      unsigned int v = 0;
      if (api_.GetEnforcedPowerLimit(dev, &v) == NVML_SUCCESS) info.tdp_watts = v / 1000.0;
      if (api_.GetTemperatureThreshold &&
          api_.GetTemperatureThreshold(dev, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &v) ==
              NVML_SUCCESS) {
        info.throttle_celsius = v;
      }
      // What the driver does not say, a known model may (models.h).
      std::string_view base = std::string_view(info.model).substr(0, info.model.find(' '));
      if (const ModelSpec* m = FindModel(base)) {
        if (!Reported(info.tdp_watts)) info.tdp_watts = m->tdp_watts;
        if (!Reported(info.throttle_celsius)) info.throttle_celsius = m->throttle_celsius;
      }
      infos_.push_back(std::move(info));
    }
    enumerated_ = true;
    return Ok();
  }

  // REQUIRES: mu_ held, enumerated.
  Result<nvmlDevice_t> Handle(int index) const {
    if (index < 0 || index >= static_cast<int>(handles_.size())) {
      return NotFound(fmt::format("GPU {} does not exist (this node has {} GPUs: 0-{})", index,
                                  handles_.size(), static_cast<int>(handles_.size()) - 1));
    }
    return handles_[index];
  }

  // REQUIRES: mu_ held.
  Status StartEventsLocked() {
    nvmlEventSet_t set = nullptr;
    nvmlReturn_t rc = api_.EventSetCreate(&set);
    if (rc != NVML_SUCCESS) {
      return std::unexpected(CannotDo("report fault events",
                                      fmt::format("nvmlEventSetCreate failed ({}); poll Sample() "
                                                  "for health instead",
                                                  ErrorText(rc))));
    }
    event_set_ = set;
    int registered = 0;
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (lost_[i]) continue;
      if (api_.RegisterEvents(handles_[i], nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS) {
        ++registered;
      }
    }
    if (registered == 0 && !handles_.empty()) {
      return std::unexpected(CannotDo("report fault events",
                                      "no GPU here supports XID events; poll Sample() for health"));
    }
    events_thread_ = std::jthread([this](std::stop_token stop) { EventLoop(stop); });
    return Ok();
  }

  void EventLoop(std::stop_token stop) {
    const auto wait_ms = static_cast<unsigned int>(options_.event_wait.count());
    while (!stop.stop_requested()) {
      nvmlEventData_t data{};
      nvmlReturn_t rc = api_.EventSetWait(event_set_, &data, wait_ms);
      if (rc == NVML_ERROR_TIMEOUT) continue;
      if (rc != NVML_SUCCESS) {
        // A GPU lost under the event set, or an event set that stopped
        // working: do not spin.
        clock_.SleepFor(options_.event_wait, stop);
        continue;
      }
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      int index = -1;
      DeviceErrorCode code = XidCode(data.eventData);
      {
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < handles_.size(); ++i) {
          if (handles_[i] == data.device) index = static_cast<int>(i);
        }
        if (index < 0) continue;
        auto& codes = xids_[index];
        if (std::none_of(codes.begin(), codes.end(),
                         [&](const DeviceErrorCode& c) { return c.code == code.code; })) {
          codes.push_back(code);
        }
      }
      Publish(MakeFaultEvent(
          index, clock_.Now(), FaultKind::kErrorRaised,
          fmt::format("GPU {}: {} ({}){}{}", index, code.code, SeverityName(code.severity),
                      code.text.empty() ? "" : ": ", code.text),
          code.code));
    }
  }

  void Publish(const FaultEvent& e) {
    std::lock_guard lock(sub_mu_);
    for (auto& [id, cb] : subscribers_) cb(e);
  }

  Status ResetVia(int index, std::string_view what) {
    nvmlDevice_t dev = nullptr;
    {
      std::lock_guard lock(mu_);
      ANXIN_TRY(EnumerateLocked());
      ANXIN_ASSIGN_OR_RETURN(dev, Handle(index));
      if (!lost_[index] && api_.GetComputeRunningProcesses) {
        unsigned int n = 0;
        nvmlReturn_t rc = api_.GetComputeRunningProcesses(dev, &n, nullptr);
        if (rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && n > 0)) {
          return FailedPrecondition(
              fmt::format("GPU {}: cannot {} it while {} process(es) run on it: stop them first "
                          "(nvidia-smi lists them)",
                          index, what, n));
        }
      }
    }
    std::string gpu = std::to_string(index);
    ANXIN_ASSIGN_OR_RETURN(CommandOutput out, RunCommand({options_.nvidia_smi, "-r", "-i", gpu},
                                                         {.timeout = options_.reset_timeout}));
    if (!out.ok()) {
      std::string why = out.OneLineMessage();
      Publish(MakeFaultEvent(index, clock_.Now(), FaultKind::kResetFailed,
                             fmt::format("GPU {}: reset failed", index)));
      return Unavailable(
          fmt::format("GPU {}: nvidia-smi -r -i {} {}: {}", index, gpu, out.Describe(), why));
    }
    {
      std::lock_guard lock(mu_);
      lost_[index] = false;
      lost_published_[index] = false;
      xids_[index].clear();
    }
    Publish(MakeFaultEvent(index, clock_.Now(), FaultKind::kResetDone,
                           fmt::format("GPU {}: reset done", index)));
    return Ok();
  }

  const Api api_;
  const std::string library_;
  const NvmlOptions options_;
  Clock& clock_;

  mutable std::mutex mu_;
  bool enumerated_ = false;                         // guarded by mu_
  std::vector<DeviceInfo> infos_;                   // guarded by mu_
  std::vector<nvmlDevice_t> handles_;               // guarded by mu_
  std::vector<bool> lost_;                          // guarded by mu_
  std::vector<bool> lost_published_;                // guarded by mu_
  std::vector<std::vector<DeviceErrorCode>> xids_;  // guarded by mu_
  nvmlEventSet_t event_set_ = nullptr;              // set once under mu_, then read by the thread

  std::mutex sub_mu_;
  int next_subscriber_ = 0;                   // guarded by mu_
  std::map<int, FaultCallback> subscribers_;  // guarded by sub_mu_
  std::jthread events_thread_;                // last: stopped first
};

}  // namespace

Result<std::unique_ptr<DeviceBackend>> MakeNvmlBackend(const NvmlOptions& options, Clock& clock) {
  std::string library = LibraryPath(options.library, "ANXIN_NVML_LIBRARY", "libnvidia-ml.so.1");
  Api api;
  ANXIN_ASSIGN_OR_RETURN(
      api.lib, OpenLibrary("nvml", library,
                           "install the NVIDIA driver (it ships libnvidia-ml.so.1), point "
                           "LD_LIBRARY_PATH or ANXIN_NVML_LIBRARY at it, or use --backend sim on "
                           "a machine without NVIDIA GPUs"));
  bool ok =
      LoadSymbol(api.lib, "nvmlInit_v2", api.Init) &&
      LoadSymbol(api.lib, "nvmlShutdown", api.Shutdown) &&
      LoadSymbol(api.lib, "nvmlErrorString", api.ErrorString) &&
      LoadSymbol(api.lib, "nvmlDeviceGetCount_v2", api.GetCount) &&
      LoadSymbol(api.lib, "nvmlDeviceGetHandleByIndex_v2", api.GetHandleByIndex) &&
      LoadSymbol(api.lib, "nvmlDeviceGetName", api.GetName) &&
      LoadSymbol(api.lib, "nvmlDeviceGetUUID", api.GetUUID) &&
      LoadSymbol(api.lib, "nvmlDeviceGetPciInfo_v3", api.GetPciInfo) &&
      LoadSymbol(api.lib, "nvmlDeviceGetMemoryInfo", api.GetMemoryInfo) &&
      LoadSymbol(api.lib, "nvmlDeviceGetTemperature", api.GetTemperature) &&
      LoadSymbol(api.lib, "nvmlDeviceGetPowerUsage", api.GetPowerUsage) &&
      LoadSymbol(api.lib, "nvmlDeviceGetEnforcedPowerLimit", api.GetEnforcedPowerLimit) &&
      LoadSymbol(api.lib, "nvmlDeviceGetUtilizationRates", api.GetUtilizationRates) &&
      LoadSymbol(api.lib, "nvmlDeviceGetClockInfo", api.GetClockInfo) &&
      LoadSymbol(api.lib, "nvmlDeviceGetCurrentClocksThrottleReasons", api.GetThrottleReasons) &&
      LoadSymbol(api.lib, "nvmlDeviceGetTotalEccErrors", api.GetTotalEccErrors) &&
      LoadSymbol(api.lib, "nvmlDeviceGetNvLinkState", api.GetNvLinkState) &&
      LoadSymbol(api.lib, "nvmlEventSetCreate", api.EventSetCreate) &&
      LoadSymbol(api.lib, "nvmlDeviceRegisterEvents", api.RegisterEvents) &&
      LoadSymbol(api.lib, "nvmlEventSetWait_v2", api.EventSetWait) &&
      LoadSymbol(api.lib, "nvmlEventSetFree", api.EventSetFree);
  if (!ok) {
    dlclose(api.lib);
    return Unavailable(fmt::format(
        "nvml: {} lacks NVML functions this backend needs: update the NVIDIA driver (R450 or "
        "newer)",
        library));
  }
  // Optional: older drivers lack them; the model table fills in.
  LoadSymbol(api.lib, "nvmlDeviceGetTemperatureThreshold", api.GetTemperatureThreshold);
  if (!LoadSymbol(api.lib, "nvmlDeviceGetComputeRunningProcesses_v3",
                  api.GetComputeRunningProcesses) &&
      !LoadSymbol(api.lib, "nvmlDeviceGetComputeRunningProcesses_v2",
                  api.GetComputeRunningProcesses)) {
    LoadSymbol(api.lib, "nvmlDeviceGetComputeRunningProcesses", api.GetComputeRunningProcesses);
  }
  nvmlReturn_t rc = api.Init();
  if (rc != NVML_SUCCESS) {
    std::string text = api.ErrorString(rc) ? api.ErrorString(rc) : "unknown error";
    dlclose(api.lib);
    return Unavailable(fmt::format(
        "nvml: nvmlInit failed: {} (nvmlReturn_t {}): check that the NVIDIA driver is loaded "
        "and that nvidia-smi works",
        text, rc));
  }
  auto backend = std::make_unique<NvmlBackend>(api, library, options, clock);
  // Enumerated now, so that Describe() names the GPUs from the start.
  ANXIN_TRY(backend->Enumerate());
  return std::unique_ptr<DeviceBackend>(std::move(backend));
}

}  // namespace anxin::device::nvml
