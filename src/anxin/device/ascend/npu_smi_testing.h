// For the tests and fuzzers of the npu-smi parser (npu_smi.h): `npu-smi info`
// tables whose every value names the device block it was printed in, laid
// out the ways real outputs differ (rules between devices or none, blank
// lines, CRLF, column padding, the process table after, before or absent,
// 1 to 16 NPUs, 1 or 2 chips per NPU), and a check that a reading took every
// device's fields from one block.
//
//   ascend::testing::TableShape shape{.npus = 8, .chips_per_npu = 2};
//   std::string text = ascend::testing::RenderTaggedTable(shape);
//   auto info = ascend::ParseNpuSmiInfo(text);
//   std::string wrong = info ? ascend::testing::FromOneBlock(text, *info) : "";
//   if (!wrong.empty()) std::puts(wrong.c_str());  // a chip assembled from two blocks
//
// Thread safety: pure functions.
#ifndef ANXIN_DEVICE_ASCEND_NPU_SMI_TESTING_H_
#define ANXIN_DEVICE_ASCEND_NPU_SMI_TESTING_H_

#include <optional>
#include <string>
#include <string_view>

#include "anxin/device/ascend/npu_smi.h"

namespace anxin::device::ascend::testing {

struct TableShape {
  int npus = 2;           // 1..32
  int chips_per_npu = 1;  // 1..4; more than one as on 310P cards
  // Which "+---+" / "+===+" lines are printed: all, all but those between
  // devices (as output pasted into a ticket often is), or none.
  enum class Rules { kAll, kNoneBetweenDevices, kNone } rules = Rules::kAll;
  bool blank_lines = false;  // an empty line after every line
  bool crlf = false;
  int gap = 0;  // > 0: the words of every cell re-joined by `gap` spaces
  int pad = 0;  // with gap: spaces after each cell's text
  enum class Processes { kAfter, kNone, kBefore } processes = Processes::kAfter;
};

// The values printed for block k (the k-th NPU), chip c: every field differs
// between blocks (npu id k, Bus-Id 0000:<0x10+k>:<c>.0, power, temperature,
// health, AICore, HBM used); name "910B3", HBM total 65536. Lines are 0.
NpuSmiChip TaggedChip(int k, int c);
// The process printed for block k, chip c (pid 400000 + 10k + c).
NpuSmiProcess TaggedProcess(int k, int c);
// The `npu-smi info` text of shape.npus tagged blocks, in the layout of a
// real 910B capture (driver 24.1.rc1).
std::string RenderTaggedTable(const TableShape& shape);

// "" when every chip of `info` (a successful ParseNpuSmiInfo(text)) was read
// from one device block of `text`: its npu_line is the nearest NPU row
// above its chip_line (only rules, blank lines and Chip rows of the same NPU
// between them), and those two rows alone, under the table's header rows,
// read as exactly that chip. Otherwise what is wrong, naming the chip.
std::string FromOneBlock(std::string_view text, const NpuSmiInfo& info);

// A real `npu-smi info` capture (one chip per NPU) cut to NPUs 0..npus-1:
// the NPU and Chip rows of the others and their process rows dropped; with
// drop_device_rules, the "+===" rules as well, as a ticket often shows them.
std::string FirstNpus(std::string_view text, int npus, bool drop_device_rules);

// A "Key Words : value" line of `npu-smi info -t ...` or hccn_tool output,
// read apart from the parsers (the fuzzers' independent scan): the words
// before the first ':' lowercased and joined by one space, and the trimmed
// text after it. nullopt for a line without ':'.
struct KeyValueLine {
  std::string key;
  std::string_view value;
};
std::optional<KeyValueLine> SplitKeyValue(std::string_view line);

// "" when the fields of a and b (lines aside) are equal, else the first that
// differs.
std::string CompareChips(const NpuSmiChip& a, const NpuSmiChip& b);

}  // namespace anxin::device::ascend::testing

#endif  // ANXIN_DEVICE_ASCEND_NPU_SMI_TESTING_H_
