// What changed on a node between two snapshots, in a few lines for people:
// the end of `anxin demo` and of `anxin devices --watch`.
//
//   Snapshot first, last;   // two frames of a watch (TakeSnapshot)
//   for (const std::string& line : DescribeChanges(first, last)) std::puts(line.c_str());
//   // "NPU 3: temperature 52 C -> 95 C (+43 C): at its 95 C throttle point"
#ifndef ANXIN_DEVICE_SUMMARY_H_
#define ANXIN_DEVICE_SUMMARY_H_

#include <string>
#include <vector>

#include "anxin/device/table.h"

namespace anxin::device {

// Changes smaller than these are the ordinary wobble of a busy device.
inline constexpr double kNotableTemperatureCelsius = 5;
inline constexpr double kNotableHbmBytes = 1024.0 * 1024 * 1024;
inline constexpr double kNotableUtilisationPercent = 30;

// One line per notable change, by device; empty when nothing changed beyond
// the thresholds above. Devices are matched by index.
std::vector<std::string> DescribeChanges(const Snapshot& before, const Snapshot& after);

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_SUMMARY_H_
