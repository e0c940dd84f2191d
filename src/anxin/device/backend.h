// DeviceBackend: the one door to accelerator hardware (Ascend NPUs, NVIDIA
// GPUs) and to the simulator that stands in for it.
//
//   #include "anxin/device/registry.h"   // CreateBackend
//
//   ANXIN_ASSIGN_OR_RETURN(auto backend, CreateBackend("sim", {.scenario = "demo"}));
//   ANXIN_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, backend->Enumerate());
//   for (const DeviceInfo& d : devices) {
//     Result<DeviceSample> s = backend->Sample(d.index);
//     if (!s) { /* lost or unreachable: s.error() says which and what to do */ }
//   }
//   ANXIN_ASSIGN_OR_RETURN(FaultSubscription sub,
//                          backend->SubscribeFaults([](const FaultEvent& e) {
//                            std::printf("device %d: %s\n", e.index, e.message.c_str());
//                          }));
//
// Operations a backend cannot do return kUnimplemented with a message that
// says so and what to use instead; the defaults below do exactly that.
//
// Thread safety: every method of a backend may be called from any thread.
// Fault callbacks run on a thread of the backend; they must not cancel their
// own subscription.
#ifndef ANXIN_DEVICE_BACKEND_H_
#define ANXIN_DEVICE_BACKEND_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"

namespace anxin::device {

// What a device is; fixed while the process runs.
struct DeviceInfo {
  int index = 0;           // 0-based, as npu-smi / nvidia-smi number them
  std::string uuid;        // serial (Ascend) or UUID (NVIDIA)
  std::string model;       // "Ascend910C", "H100", ...
  std::string vendor;      // "huawei" or "nvidia"
  std::string pci_bus_id;  // "0000:C1:00.0"
  int numa_node = -1;      // -1 when unknown
  uint64_t hbm_total_bytes = 0;
  double tdp_watts = 0;         // nominal board power; kNotReported when unknown
  double throttle_celsius = 0;  // where the device slows itself down; kNotReported when unknown
};

// "NPU 3" (Huawei) or "GPU 3" (others), as the vendors' tools say it.
std::string DeviceLabel(const DeviceInfo& info);

enum class Health {
  kOk,         // no fault
  kWarning,    // a minor fault; the device works
  kAlarm,      // a major fault; jobs on it are at risk
  kCritical,   // the device cannot be used until repaired or reset
  kResetting,  // a reset is in progress
};
// "OK", "Warning", "Alarm", "Critical", "Resetting" (npu-smi's words).
std::string_view HealthName(Health h);

enum class Severity { kMinor, kMajor, kCritical };
std::string_view SeverityName(Severity s);  // "minor", "major", "critical"

// An error code the device reports (Ascend: hex codes like 80E01801; NVIDIA:
// XID numbers).
struct DeviceErrorCode {
  std::string code;
  Severity severity = Severity::kMajor;
  std::string text;  // what it means, when known
};

struct EccCounters {
  uint64_t single_bit = 0;  // corrected
  uint64_t double_bit = 0;  // uncorrected
};

struct LinkState {
  int port = 0;
  bool up = true;
};

// A reading the device does not report (NVML answers "not supported", npu-smi
// prints "-", DCMI returns -8255) is left out rather than made up: a double
// reading is kNotReported (NaN), a byte or error count is kNotReportedCount.
// Test with Reported(). Tables print such a value as "-", JSON as null, and
// notes and change summaries skip it.
inline constexpr double kNotReported = std::numeric_limits<double>::quiet_NaN();
inline constexpr uint64_t kNotReportedCount = std::numeric_limits<uint64_t>::max();
inline bool Reported(double v) { return !std::isnan(v); }
inline bool Reported(uint64_t v) { return v != kNotReportedCount; }

// One reading of a device's state. Any reading may be not reported (above).
struct DeviceSample {
  int index = 0;
  Clock::TimePoint time;
  Health health = Health::kOk;
  uint64_t hbm_used_bytes = 0;
  double temperature_celsius = 0;
  double power_watts = 0;
  double utilisation_percent = 0;  // AI core (Ascend) / SM (NVIDIA), 0..100
  double core_clock_mhz = 0;
  double memory_clock_mhz = 0;
  bool throttled = false;  // the device slowed its clocks (too hot)
  std::vector<DeviceErrorCode> error_codes;
  EccCounters ecc;
  std::vector<LinkState> links;  // one per network port (Ascend RoCE ports, NVLink, ...)
};

enum class FaultKind {
  kErrorRaised,
  kErrorCleared,
  kLinkDown,
  kLinkUp,
  kDeviceLost,
  kEccErrors,
  kResetDone,
  kResetFailed,
};
std::string_view FaultKindName(FaultKind k);  // "error_raised", "link_down", ...

// A fault as the device reports it, pushed to subscribers when it happens.
struct FaultEvent {
  int index = 0;
  Clock::TimePoint time;
  FaultKind kind = FaultKind::kErrorRaised;
  std::string code;  // for error kinds
  int port = -1;     // for link kinds
  std::string message;
};
// An event of an error or device kind (no port), as backends report them.
FaultEvent MakeFaultEvent(int index, Clock::TimePoint time, FaultKind kind, std::string message,
                          std::string code = "");
using FaultCallback = std::function<void(const FaultEvent&)>;

// Ends a fault subscription when destroyed or cancelled. Move-only.
class FaultSubscription {
 public:
  FaultSubscription() = default;
  explicit FaultSubscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  FaultSubscription(FaultSubscription&& other) noexcept : cancel_(std::move(other.cancel_)) {
    other.cancel_ = nullptr;
  }
  FaultSubscription& operator=(FaultSubscription&& other) noexcept;
  FaultSubscription(const FaultSubscription&) = delete;
  FaultSubscription& operator=(const FaultSubscription&) = delete;
  ~FaultSubscription() { Cancel(); }

  // After Cancel returns, the callback is not running and will not run again.
  void Cancel();

 private:
  std::function<void()> cancel_;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // "sim", "nvml", "ascend".
  virtual std::string_view name() const = 0;
  // One line for titles: "sim, scenario demo (8 x Ascend910C)". Default: name().
  virtual std::string Describe() const { return std::string(name()); }

  virtual Result<std::vector<DeviceInfo>> Enumerate() = 0;
  // kNotFound for an index that does not exist; kUnavailable for a device
  // that is lost (fell off the bus) or does not answer.
  virtual Result<DeviceSample> Sample(int index) = 0;

  virtual Result<FaultSubscription> SubscribeFaults(FaultCallback callback);
  // Frees the device memory that processes left behind.
  virtual Status ClearMemory(int index);
  // Resets the device; blocks until the reset has finished or failed.
  virtual Status Reset(int index);

 protected:
  // kUnimplemented: "backend 'X' cannot <operation>: <advice>".
  Error CannotDo(std::string_view operation, std::string_view advice) const;
};

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_BACKEND_H_
