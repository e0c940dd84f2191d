// The `nvml` device backend: NVIDIA GPUs through the driver's management
// library, libnvidia-ml.so.1, loaded with dlopen when the backend is made (no
// link-time dependency: the program runs where there is no driver).
//
//   VirtualClock clock;
//   Result<std::unique_ptr<DeviceBackend>> gpus = nvml::MakeNvmlBackend({}, clock);
//   if (!gpus) return std::unexpected(gpus.error());  // no driver: kUnavailable, with advice
//   ANXIN_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, (*gpus)->Enumerate());
//
// What it reads, per GPU: name, UUID, PCI bus id, memory total and used,
// temperature and the slowdown threshold, power draw and the enforced power
// limit, SM utilisation, SM and memory clocks, clock throttle reasons
// (thermal and hardware slowdown set `throttled`), volatile ECC counts and
// the state of each NVLink. A field the GPU does not support is left out
// (kNotReported); a GPU that fell off the bus (NVML_ERROR_GPU_IS_LOST) answers
// kUnavailable and, once, a kDeviceLost fault. XID errors arrive through an
// NVML event set on a thread of the backend, started by the first
// SubscribeFaults; they become kErrorRaised faults and the GPU's error codes
// ("Xid 79"). Reset and ClearMemory run `nvidia-smi -r -i N` (the driver
// cannot free another process's memory without a reset), refused with
// kFailedPrecondition while a compute process runs on the GPU.
//
// Thread safety: all methods may be called from any thread.
#ifndef ANXIN_DEVICE_NVML_NVML_BACKEND_H_
#define ANXIN_DEVICE_NVML_NVML_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"

namespace anxin::device::nvml {

struct NvmlOptions {
  // The library to load; "" = $ANXIN_NVML_LIBRARY, else "libnvidia-ml.so.1"
  // found by the dynamic loader (LD_LIBRARY_PATH, ld.so.cache).
  std::string library;
  // The tool Reset and ClearMemory run, looked up in PATH.
  std::string nvidia_smi = "nvidia-smi";
  std::chrono::seconds reset_timeout{120};
  // How long the event thread waits for an event before it checks for a stop.
  std::chrono::milliseconds event_wait{200};
};

// kUnavailable when the library does not load or the driver does not answer
// (the message says what to install or load).
Result<std::unique_ptr<DeviceBackend>> MakeNvmlBackend(const NvmlOptions& options, Clock& clock);

}  // namespace anxin::device::nvml

#endif  // ANXIN_DEVICE_NVML_NVML_BACKEND_H_
