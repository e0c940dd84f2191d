// The `ascend` device backend: Huawei Ascend NPUs through DCMI (libdcmi.so,
// loaded with dlopen) when it loads, else through the text of `npu-smi` and
// `hccn_tool` (npu_smi.h), found on PATH.
//
//   VirtualClock clock;
//   Result<std::unique_ptr<DeviceBackend>> npus = ascend::MakeAscendBackend({}, clock);
//   if (!npus) return std::unexpected(npus.error());  // neither DCMI nor npu-smi: kUnavailable
//   ANXIN_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, (*npus)->Enumerate());
//
// Devices are the chips npu-smi lists, numbered by NPU id when every card has
// one chip (910B: "NPU 5" is device 5), else in the order listed. What each
// source reads is in docs/devices.md; readings a source does not have are
// kNotReported.
//
// Reset(i) runs `npu-smi set -t reset -i CARD -c CHIP`, refused with
// kFailedPrecondition while a process holds the chip (npu-smi info lists it),
// then polls the chip's health every poll_interval until it reads OK, for at
// most poll_timeout (the driver needs 20 s or more to bring a chip back), and
// pushes kResetDone or kResetFailed to fault subscribers. ClearMemory(i) is
// the same reset: the driver frees a chip's memory only by resetting it.
//
// Thread safety: all methods may be called from any thread.
#ifndef ANXIN_DEVICE_ASCEND_ASCEND_BACKEND_H_
#define ANXIN_DEVICE_ASCEND_ASCEND_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"

namespace anxin::device::ascend {

struct AscendOptions {
  // DCMI library; "" = $ANXIN_DCMI_LIBRARY, else "libdcmi.so" found by the
  // dynamic loader. One that does not load means the npu-smi fallback.
  std::string dcmi_library;
  // The tools, looked up in PATH unless they contain a '/'.
  std::string npu_smi = "npu-smi";
  std::string hccn_tool = "hccn_tool";
  std::chrono::seconds command_timeout{30};
  std::chrono::seconds reset_timeout{120};
  // The health poll after a reset (on the backend's clock).
  Clock::Duration poll_interval = std::chrono::seconds(2);
  Clock::Duration poll_timeout = std::chrono::seconds(60);
};

// kUnavailable when neither DCMI loads nor npu-smi runs (the message says
// what to install), or when npu-smi prints a device table that is refused
// ("ascend: npu-smi info: line N: ...", see npu_smi.h).
Result<std::unique_ptr<DeviceBackend>> MakeAscendBackend(const AscendOptions& options,
                                                         Clock& clock);

}  // namespace anxin::device::ascend

#endif  // ANXIN_DEVICE_ASCEND_ASCEND_BACKEND_H_
