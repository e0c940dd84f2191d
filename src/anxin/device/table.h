// Views of a node's devices: a table in the style of `npu-smi info`, a JSON
// document, and the short notes that flag what an operator should look at.
//
//   #include "anxin/device/registry.h"
//
//   ANXIN_ASSIGN_OR_RETURN(auto backend, CreateBackend("sim", {}));
//   ANXIN_ASSIGN_OR_RETURN(Snapshot snap, TakeSnapshot(*backend, RealClock()));
//   std::fputs(RenderTable(snap, {.color = false}).c_str(), stdout);
//   std::puts(SnapshotToJson(snap).dump().c_str());
#ifndef ANXIN_DEVICE_TABLE_H_
#define ANXIN_DEVICE_TABLE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"

namespace anxin::device {

// One device at one moment: its identity and its reading, or why there is no
// reading (a lost device).
struct DeviceRow {
  DeviceInfo info;
  Result<DeviceSample> sample;
};

struct Snapshot {
  std::string source;  // DeviceBackend::Describe()
  Clock::TimePoint time;
  std::vector<DeviceRow> rows;
};

// Enumerates and samples every device. Fails only if enumeration fails; a
// device that cannot be sampled is a row with an error.
Result<Snapshot> TakeSnapshot(DeviceBackend& backend, Clock& clock);

// The alert lines from field practice: HBM above 90 % used, temperature from
// 85 C (warning) and at the device's throttle point, plus faults.
inline constexpr double kHbmAlertRatio = 0.90;
inline constexpr double kTemperatureWarningCelsius = 85;

// What deserves attention in a snapshot, one line per finding, e.g.
// "NPU 3: 96 C: at its 95 C throttle point, clocks slowed".
std::vector<std::string> Notes(const Snapshot& snap);

struct TableStyle {
  bool color = false;  // ANSI colours for health, hot devices and full HBM
  bool notes = true;   // the Notes() lines under the table
};
// The table, ending in a newline.
std::string RenderTable(const Snapshot& snap, const TableStyle& style = {});

// {"time": "...", "source": "...", "devices": [{"index": 0, "model": ..., "health": "OK",
//  "hbm_used_bytes": ..., ...}]}; a device without a reading has "health": "Lost" and
// "error": "...". Documented in docs/devices.md.
nlohmann::json SnapshotToJson(const Snapshot& snap);

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_TABLE_H_
