// Internal to the ascend backend: where readings come from (DCMI or the
// npu-smi text), behind one interface. Not for other modules.
#ifndef ANXIN_DEVICE_ASCEND_SOURCE_H_
#define ANXIN_DEVICE_ASCEND_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/ascend/ascend_backend.h"
#include "anxin/device/backend.h"

namespace anxin::device::ascend {

// One chip: its identity and how the tools address it.
struct Chip {
  DeviceInfo info;  // info.index: anxin's device number
  int card = 0;     // npu-smi -i, DCMI card id
  int chip = 0;     // npu-smi -c, DCMI device id within the card
  int logic = 0;    // hccn_tool -i
};

class ChipSource {
 public:
  virtual ~ChipSource() = default;
  // "dcmi" or "npu-smi 24.1.rc1".
  virtual std::string Describe() const = 0;
  virtual Result<std::vector<Chip>> List() = 0;
  // sample.index is set by the caller.
  virtual Result<DeviceSample> Read(const Chip& chip) = 0;
};

// Unavailable when the library does not load or dcmi_init fails.
Result<std::unique_ptr<ChipSource>> MakeDcmiSource(const AscendOptions& options, Clock& clock);
// Unavailable when npu-smi does not run or prints no device table; kDataLoss
// (ParseNpuSmiInfo's "npu-smi info: line N: ...") when it prints one that is
// refused.
Result<std::unique_ptr<ChipSource>> MakeNpuSmiSource(const AscendOptions& options, Clock& clock);

// npu-smi's words -> Health: "OK", "Warning", "Alarm", "Critical"; anything
// else is a Warning (the chip says something is off).
Health HealthFromText(std::string_view text);
// The severity an error code gets from the chip's health.
Severity SeverityFor(Health h);
// Model, vendor, TDP and throttle point from the chip name ("910B2C").
void FillModel(std::string_view chip_name, DeviceInfo& info);
// /sys/bus/pci/devices/<bus id>/numa_node, or -1.
int NumaNodeOf(std::string bus_id);

}  // namespace anxin::device::ascend

#endif  // ANXIN_DEVICE_ASCEND_SOURCE_H_
