// Fuzzes ParseNpuSmiInfo (the `npu-smi info` parser). Seeded with the real
// captures in tests/fixtures/ascend/. Two checks on every input, besides "no
// crash, hang or sanitizer report":
//  - the bytes as text: a reading that succeeds took each chip's fields from
//    one device block (testing::FromOneBlock);
//  - the bytes as choices: a tagged table (npu_smi_testing.h) of a shape they
//    pick, with one of its data lines deleted, repeated, moved or given a
//    word no column accepts (or none changed: two changes can make a table
//    that reads right as printed but not as rendered). Unchanged, it must read in full; changed,
//    it must be refused or read with each chip's every field equal to those
//    of the one block its NPU id and its Bus-Id name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/strings.h"
#include "anxin/device/ascend/npu_smi.h"
#include "anxin/device/ascend/npu_smi_testing.h"

namespace {

using namespace anxin::device::ascend;

[[noreturn]] void Fail(const std::string& what, std::string_view text) {
  std::fprintf(stderr, "invariant broken: %s\n--- input ---\n%.*s\n", what.c_str(),
               static_cast<int>(text.size()), text.data());
  std::abort();
}

void CheckRaw(std::string_view text) {
  auto info = ParseNpuSmiInfo(text);
  if (!info) return;
  std::string wrong = testing::FromOneBlock(text, *info);
  if (!wrong.empty()) Fail(wrong, text);
}

struct Bytes {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  uint8_t Next() { return at < size ? data[at++] : 0; }
};

void CheckTagged(const uint8_t* data, size_t size) {
  Bytes b{data, size};
  testing::TableShape shape;
  shape.npus = 1 + b.Next() % 16;
  shape.chips_per_npu = 1 + b.Next() % 2;
  shape.rules = static_cast<testing::TableShape::Rules>(b.Next() % 3);
  uint8_t f = b.Next();
  shape.blank_lines = f & 1;
  shape.crlf = f & 2;
  shape.gap = (f >> 2) % 3 == 0 ? 0 : 1 + (f >> 4) % 8;
  shape.pad = (f >> 5) % 4;
  shape.processes = static_cast<testing::TableShape::Processes>(b.Next() % 3);
  std::string text = testing::RenderTaggedTable(shape);
  std::vector<std::string> lines;
  for (std::string_view l : anxin::SplitLines(text)) lines.emplace_back(l);
  // Data lines only: the header rows and the version say what columns mean,
  // and a changed header changes what a right reading is.
  std::vector<size_t> data_lines;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view t = anxin::Trim(lines[i]);
    if (t.starts_with("| ") && t.size() > 2 && t[2] >= '0' && t[2] <= '9') data_lines.push_back(i);
  }
  const int changes = b.Next() % 2;
  for (int m = 0; m < changes && !data_lines.empty(); ++m) {
    size_t i = data_lines[b.Next() % data_lines.size()] % lines.size();
    size_t j = data_lines[b.Next() % data_lines.size()] % lines.size();
    switch (b.Next() % 4) {
      case 0:
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 1:
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(j), lines[i]);
        break;
      case 2: {
        std::string moved = lines[i];
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(j % (lines.size() + 1)), moved);
        break;
      }
      default: {
        // A word no column accepts, over one word of the line.
        std::string& l = lines[i];
        size_t word = l.find_first_not_of(" |", b.Next() % l.size());
        if (word == std::string::npos) break;
        size_t end = l.find_first_of(" |", word);
        l.replace(word, (end == std::string::npos ? l.size() : end) - word, "?#");
        break;
      }
    }
    // Positions moved: recompute which lines are data lines.
    data_lines.clear();
    for (size_t k = 0; k < lines.size(); ++k) {
      std::string_view t = anxin::Trim(lines[k]);
      if (t.starts_with("| ") && t.size() > 2 && t[2] >= '0' && t[2] <= '9') {
        data_lines.push_back(k);
      }
    }
  }
  std::string changed;
  for (const std::string& l : lines) changed += l + "\n";
  auto info = ParseNpuSmiInfo(changed);
  if (changes == 0 && !info) Fail("a tagged table is refused: " + info.error().message(), changed);
  if (!info) return;
  if (changes == 0 && info->chips.size() != static_cast<size_t>(shape.npus * shape.chips_per_npu)) {
    Fail("a tagged table lost chips", changed);
  }
  for (const NpuSmiChip& chip : info->chips) {
    // The block the NPU row names and the block the Chip row names.
    const int from_npu_row = chip.npu;
    int from_chip_row = -1;
    for (int k = 0; k < shape.npus; ++k) {
      if (testing::TaggedChip(k, chip.chip).bus_id == chip.bus_id) from_chip_row = k;
    }
    if (from_chip_row != from_npu_row) {
      Fail("NPU " + std::to_string(chip.npu) + " read with the Chip row of block " +
               std::to_string(from_chip_row),
           changed);
    }
    std::string diff = testing::CompareChips(chip, testing::TaggedChip(from_npu_row, chip.chip));
    if (!diff.empty()) Fail("NPU " + std::to_string(chip.npu) + ": " + diff, changed);
  }
  std::string wrong = testing::FromOneBlock(changed, *info);
  if (!wrong.empty()) Fail(wrong, changed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckRaw(std::string_view(reinterpret_cast<const char*>(data), size));
  CheckTagged(data, size);
  return 0;
}
