#include "anxin/device/backend.h"

#include <fmt/format.h>

namespace anxin::device {

std::string DeviceLabel(const DeviceInfo& info) {
  return fmt::format("{} {}", info.vendor == "huawei" ? "NPU" : "GPU", info.index);
}

std::string_view HealthName(Health h) {
  switch (h) {
    case Health::kOk:
      return "OK";
    case Health::kWarning:
      return "Warning";
    case Health::kAlarm:
      return "Alarm";
    case Health::kCritical:
      return "Critical";
    case Health::kResetting:
      return "Resetting";
  }
  return "Unknown";
}

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kMinor:
      return "minor";
    case Severity::kMajor:
      return "major";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

std::string_view FaultKindName(FaultKind k) {
  switch (k) {
    case FaultKind::kErrorRaised:
      return "error_raised";
    case FaultKind::kErrorCleared:
      return "error_cleared";
    case FaultKind::kLinkDown:
      return "link_down";
    case FaultKind::kLinkUp:
      return "link_up";
    case FaultKind::kDeviceLost:
      return "device_lost";
    case FaultKind::kEccErrors:
      return "ecc_errors";
    case FaultKind::kResetDone:
      return "reset_done";
    case FaultKind::kResetFailed:
      return "reset_failed";
  }
  return "unknown";
}

FaultSubscription& FaultSubscription::operator=(FaultSubscription&& other) noexcept {
  if (this != &other) {
    Cancel();
    cancel_ = std::move(other.cancel_);
    other.cancel_ = nullptr;
  }
  return *this;
}

void FaultSubscription::Cancel() {
  if (cancel_) {
    auto cancel = std::move(cancel_);
    cancel_ = nullptr;
    cancel();
  }
}

Result<FaultSubscription> DeviceBackend::SubscribeFaults(FaultCallback) {
  return std::unexpected(
      CannotDo("report fault events", "poll Sample() for health and error codes instead"));
}

Status DeviceBackend::ClearMemory(int) {
  return std::unexpected(CannotDo(
      "clear device memory",
      "stop the processes on the device (npu-smi info / nvidia-smi list them) to free it"));
}

Status DeviceBackend::Reset(int) {
  return std::unexpected(
      CannotDo("reset devices",
               "reset with the vendor tool (npu-smi set -t reset -i <card> -c <chip>, or "
               "nvidia-smi -r -i <gpu>)"));
}

Error DeviceBackend::CannotDo(std::string_view operation, std::string_view advice) const {
  return Error(ErrorCode::kUnimplemented,
               fmt::format("backend '{}' cannot {}: {}", name(), operation, advice));
}

FaultEvent MakeFaultEvent(int index, Clock::TimePoint time, FaultKind kind, std::string message,
                          std::string code) {
  FaultEvent e;
  e.index = index;
  e.time = time;
  e.kind = kind;
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

}  // namespace anxin::device
