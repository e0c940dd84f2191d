// Parsers for the text Huawei's tools print, for the `ascend` backend when
// DCMI (libdcmi.so) is absent: `npu-smi info`, `npu-smi info -t health -i N
// -c C`, `npu-smi info -t usages -i N -c C` and `hccn_tool -i N -link -g`.
//
//   ANXIN_ASSIGN_OR_RETURN(ascend::NpuSmiInfo info, ascend::ParseNpuSmiInfo(
//       "| NPU   Name    | Health  | Power(W)    Temp(C) |\n"
//       "| Chip          | Bus-Id  | AICore(%)   HBM-Usage(MB) |\n"
//       "+===============+=========+=====================+\n"
//       "| 0     910B4   | OK      | 89.9        39      |\n"
//       "| 0             | 0000:41:00.0 | 0      2922 / 32768 |\n"));
//   std::printf("%s %.0f C\n", info.chips[0].name.c_str(), info.chips[0].temperature_celsius);
//
// Driver versions change column widths and the order of fields, so the
// table is read by name, not by position: each header cell lists the names
// of the values its column holds ("Power(W)    Temp(C)"), and each data cell
// holds exactly that many values, split at spaces ("59356/ 65536" and
// "0    / 0" are one value each). A name is a capitalised word and the
// lowercase words after it ("Process id"). The key-value outputs (health,
// usages, hccn_tool) are read by key, ignoring case and spacing; a key
// printed twice with different values (two outputs run together) is
// refused. A value printed as "-" or "NA" is left out (kNotReported).
//
// `npu-smi info` is read row by row, each row known by its own content, so
// separator rules, blank lines, CRLF line ends, column padding and whether
// the process table is there (before or after the devices) do not matter: a
// device is its NPU row ("<id> <name> | <health> | ...") and the Chip row
// after it ("<chip id> | <bus id> | ..."), one NPU row may have several
// Chip rows (310P), and the process table is the rows under its own header.
// A row that does not fit (a column with more or fewer values than its
// header names, a Bus-Id that is not a PCI address, an HBM total of 0, a
// Chip row with no NPU row before it, an NPU row with none after it, a chip
// listed twice, a process on an NPU the table does not list) refuses the
// whole reading with kDataLoss naming the line and what was expected: never
// a device assembled from rows of different devices.
//
// Thread safety: the functions are pure.
#ifndef ANXIN_DEVICE_ASCEND_NPU_SMI_H_
#define ANXIN_DEVICE_ASCEND_NPU_SMI_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/device/backend.h"

namespace anxin::device::ascend {

// One chip (one device) in the `npu-smi info` table.
struct NpuSmiChip {
  int npu = 0;         // the NPU (card) id: npu-smi's -i
  int chip = 0;        // the chip id on that card: npu-smi's -c
  std::string name;    // "910B2C"
  std::string health;  // "OK", "Warning", "Alarm", "Critical", ... as printed
  std::string bus_id;  // "0000:66:00.0"
  double power_watts = kNotReported;
  double temperature_celsius = kNotReported;
  double aicore_percent = kNotReported;
  uint64_t hbm_used_mb = kNotReportedCount;
  uint64_t hbm_total_mb = kNotReportedCount;
  // Where it was read: the 1-based lines of its NPU row and its Chip row.
  int npu_line = 0;
  int chip_line = 0;
};

// A process in the table's process section.
struct NpuSmiProcess {
  int npu = 0;
  int chip = 0;
  int64_t pid = 0;
  std::string name;
  uint64_t memory_mb = kNotReportedCount;
};

struct NpuSmiInfo {
  std::string version;  // "24.1.rc1"; "" when not printed
  std::vector<NpuSmiChip> chips;
  std::vector<NpuSmiProcess> processes;
};

// `npu-smi info`. kDataLoss when there is no device table or a row does not
// fit (see above); the message starts "npu-smi info: line N: ".
Result<NpuSmiInfo> ParseNpuSmiInfo(std::string_view text);

// `npu-smi info -t health -i N -c C`: "Health Status : OK" and
// "Error Code : NA" (or the codes, separated by spaces or commas).
struct NpuSmiHealth {
  std::string health;                    // as printed: "OK", "Alarm", ...
  std::vector<std::string> error_codes;  // "80E01801", ...; empty for NA
};
Result<NpuSmiHealth> ParseNpuSmiHealth(std::string_view text);

// `npu-smi info -t usages -i N -c C`: "Key : value" lines such as
// "HBM Capacity(MB) : 65536", "HBM Usage Rate(%) : 90", "Aicore Usage
// Rate(%) : 40". Keys are stored lowercase with single spaces; values that are
// not numbers are left out.
struct NpuSmiUsages {
  std::map<std::string, double> values;
  // kNotReported when absent.
  double Get(std::string_view key) const;
};
Result<NpuSmiUsages> ParseNpuSmiUsages(std::string_view text);

// `hccn_tool -i N -link -g`: "link status: UP" -> true, DOWN -> false.
Result<bool> ParseHccnLink(std::string_view text);

// "Key : value" lines: lowercase keys with single spaces -> trimmed values.
// Lines without a colon are skipped.
std::map<std::string, std::string> ParseKeyValues(std::string_view text);

}  // namespace anxin::device::ascend

#endif  // ANXIN_DEVICE_ASCEND_NPU_SMI_H_
