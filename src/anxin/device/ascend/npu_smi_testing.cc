#include "anxin/device/ascend/npu_smi_testing.h"

#include <fmt/format.h>

#include <cctype>
#include <vector>

#include "anxin/base/strings.h"

namespace anxin::device::ascend::testing {
namespace {

// The header of a real 16 x 910B2C capture (driver 24.1.rc1), verbatim.
constexpr std::string_view kVersion =
    "| npu-smi 24.1.rc1                 Version: 24.1.rc1                                         "
    "    |";
constexpr std::string_view kTopRule =
    "+-----------------------------------------------------------------------------------------"
    "-------+";
constexpr std::string_view kMidRule =
    "+---------------------------+---------------+--------------------------------------------"
    "--------+";
constexpr std::string_view kDeviceRule =
    "+===========================+===============+============================================"
    "========+";
constexpr std::string_view kHeader1 =
    "| NPU   Name                | Health        | Power(W)    Temp(C)           "
    "Hugepages-Usage(page)|";
constexpr std::string_view kHeader2 =
    "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)  "
    "      |";
constexpr std::string_view kProcessHeader =
    "| NPU     Chip              | Process id    | Process name             | Process memory(MB)  "
    "    |";

std::string Cell(std::string_view text, size_t width) {
  std::string c = " " + std::string(text);
  if (c.size() < width) c.append(width - c.size(), ' ');
  return c;
}

std::string Row(std::initializer_list<std::pair<std::string, size_t>> cells) {
  std::string row = "|";
  for (const auto& [text, width] : cells) row += Cell(text, width) + "|";
  return row;
}

// Every cell's words re-joined by `gap` spaces, `pad` spaces after.
std::string Respace(std::string_view line, int gap, int pad) {
  std::string_view t = Trim(line);
  if (!t.starts_with('|')) return std::string(line);
  t.remove_prefix(1);
  if (t.ends_with('|')) t.remove_suffix(1);
  std::string out = "|";
  for (std::string_view c : Split(t, '|')) {
    std::string cell;
    for (std::string_view w : SplitWords(c)) {
      if (!cell.empty()) cell += std::string(static_cast<size_t>(gap), ' ');
      cell += w;
    }
    out += " " + cell + std::string(static_cast<size_t>(pad), ' ') + "|";
  }
  return out;
}

// Which header a row is, by the rule of npu_smi.cc: the names of its cells
// (a capitalised word and the lowercase words after it), the first being
// "npu" with one starting "health", or "chip" with one starting "bus-id".
enum class HeaderKind { kNone, kNpu, kChip };
HeaderKind KindOf(std::string_view line) {
  std::string_view t = Trim(line);
  const std::string low = ToLower(t);
  std::string lower;  // one space between words, as npu_smi.cc compares
  for (std::string_view w : SplitWords(low)) lower += std::string(w) + " ";
  if (!t.starts_with('|') ||
      (lower.find("npu-smi") != std::string::npos && lower.find("version") != std::string::npos) ||
      lower.find("no running processes") != std::string::npos) {
    return HeaderKind::kNone;
  }
  t.remove_prefix(1);
  if (t.ends_with('|')) t.remove_suffix(1);
  std::vector<std::string> names;
  bool first_cell = true;
  std::string first;
  for (std::string_view c : Split(t, '|')) {
    std::vector<std::string> cell;
    for (std::string_view w : SplitWords(c)) {
      if (!cell.empty() && std::islower(static_cast<unsigned char>(w[0]))) {
        cell.back() += " " + ToLower(w);
      } else {
        cell.push_back(ToLower(w));
      }
    }
    if (first_cell && !cell.empty()) first = cell[0];
    first_cell = false;
    names.insert(names.end(), cell.begin(), cell.end());
  }
  auto has = [&](std::string_view p) {
    for (const std::string& n : names) {
      if (n.starts_with(p)) return true;
    }
    return false;
  };
  if (first == "npu" && has("health")) return HeaderKind::kNpu;
  if (first == "chip" && (has("bus-id") || has("bus id"))) return HeaderKind::kChip;
  return HeaderKind::kNone;
}

std::string Trimmed(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

NpuSmiChip TaggedChip(int k, int c) {
  NpuSmiChip chip;
  chip.npu = k;
  chip.chip = c;
  chip.name = "910B3";
  chip.health = k % 3 == 1 ? "Warning" : "OK";
  chip.bus_id = fmt::format("0000:{:02X}:{:02X}.0", 0x10 + k, c);
  chip.power_watts = 80 + k + 0.5;
  chip.temperature_celsius = 30 + k;
  chip.aicore_percent = (k * 7 + c) % 100;
  chip.hbm_used_mb = 1000 + 10 * static_cast<uint64_t>(k) + static_cast<uint64_t>(c);
  chip.hbm_total_mb = 65536;
  return chip;
}

NpuSmiProcess TaggedProcess(int k, int c) {
  NpuSmiProcess p;
  p.npu = k;
  p.chip = c;
  p.pid = 400000 + 10 * k + c;
  p.name = k % 2 == 0 ? "vllm" : "python3 -m worker";
  p.memory_mb = 500 + static_cast<uint64_t>(k);
  return p;
}

std::string RenderTaggedTable(const TableShape& shape) {
  using Rules = TableShape::Rules;
  std::vector<std::string> lines;
  auto rule = [&](std::string_view r) {
    if (shape.rules != Rules::kNone) lines.emplace_back(r);
  };
  auto processes = [&] {
    rule(kMidRule);
    lines.emplace_back(kProcessHeader);
    rule(kDeviceRule);
    for (int k = 0; k < shape.npus; ++k) {
      for (int c = 0; c < shape.chips_per_npu; ++c) {
        NpuSmiProcess p = TaggedProcess(k, c);
        lines.push_back(Row({{fmt::format("{:<8}{}", p.npu, p.chip), 27},
                             {std::to_string(p.pid), 15},
                             {p.name, 26},
                             {std::to_string(p.memory_mb), 25}}));
      }
      if (shape.rules == Rules::kAll) lines.emplace_back(kDeviceRule);
    }
    if (shape.rules == Rules::kNoneBetweenDevices) lines.emplace_back(kDeviceRule);
  };
  if (shape.processes == TableShape::Processes::kBefore) processes();
  rule(kTopRule);
  lines.emplace_back(kVersion);
  rule(kMidRule);
  lines.emplace_back(kHeader1);
  lines.emplace_back(kHeader2);
  rule(kDeviceRule);
  for (int k = 0; k < shape.npus; ++k) {
    NpuSmiChip n = TaggedChip(k, 0);
    lines.push_back(Row({{fmt::format("{:<6}{}", n.npu, n.name), 27},
                         {n.health, 15},
                         {fmt::format("{:<12}{:<18}0    / 0", Trimmed(n.power_watts),
                                      static_cast<int>(n.temperature_celsius)),
                          52}}));
    for (int c = 0; c < shape.chips_per_npu; ++c) {
      NpuSmiChip chip = TaggedChip(k, c);
      lines.push_back(Row(
          {{std::to_string(chip.chip), 27},
           {chip.bus_id, 15},
           {fmt::format("{:<12}0    / 0          {} / {}", static_cast<int>(chip.aicore_percent),
                        chip.hbm_used_mb, chip.hbm_total_mb),
            52}}));
    }
    if (shape.rules == Rules::kAll) lines.emplace_back(kDeviceRule);
  }
  if (shape.rules == Rules::kNoneBetweenDevices) lines.emplace_back(kDeviceRule);
  if (shape.processes == TableShape::Processes::kAfter) processes();
  std::string text;
  const char* end = shape.crlf ? "\r\n" : "\n";
  for (const std::string& line : lines) {
    text += shape.gap > 0 ? Respace(line, shape.gap, shape.pad) : line;
    text += end;
    if (shape.blank_lines) text += end;
  }
  return text;
}

std::string CompareChips(const NpuSmiChip& a, const NpuSmiChip& b) {
  auto same = [](double x, double y) { return x == y || (!Reported(x) && !Reported(y)); };
  if (a.npu != b.npu) return fmt::format("npu {} vs {}", a.npu, b.npu);
  if (a.chip != b.chip) return fmt::format("chip {} vs {}", a.chip, b.chip);
  if (a.name != b.name) return fmt::format("name {} vs {}", a.name, b.name);
  if (a.health != b.health) return fmt::format("health {} vs {}", a.health, b.health);
  if (a.bus_id != b.bus_id) return fmt::format("bus id {} vs {}", a.bus_id, b.bus_id);
  if (!same(a.power_watts, b.power_watts)) {
    return fmt::format("power {} vs {}", a.power_watts, b.power_watts);
  }
  if (!same(a.temperature_celsius, b.temperature_celsius)) {
    return fmt::format("temperature {} vs {}", a.temperature_celsius, b.temperature_celsius);
  }
  if (!same(a.aicore_percent, b.aicore_percent)) {
    return fmt::format("aicore {} vs {}", a.aicore_percent, b.aicore_percent);
  }
  if (a.hbm_used_mb != b.hbm_used_mb)
    return fmt::format("hbm used {} vs {}", a.hbm_used_mb, b.hbm_used_mb);
  if (a.hbm_total_mb != b.hbm_total_mb) {
    return fmt::format("hbm total {} vs {}", a.hbm_total_mb, b.hbm_total_mb);
  }
  return "";
}

std::string FromOneBlock(std::string_view text, const NpuSmiInfo& info) {
  std::vector<std::string_view> lines = SplitLines(text);
  const int count = static_cast<int>(lines.size());
  std::vector<HeaderKind> kinds;
  for (std::string_view l : lines) kinds.push_back(KindOf(l));
  auto is_row = [&](int line) {
    return Trim(lines[static_cast<size_t>(line - 1)]).starts_with('|');
  };
  for (const NpuSmiChip& chip : info.chips) {
    const std::string who = fmt::format("NPU {} chip {} (lines {} and {})", chip.npu, chip.chip,
                                        chip.npu_line, chip.chip_line);
    if (chip.npu_line < 1 || chip.chip_line <= chip.npu_line || chip.chip_line > count ||
        !is_row(chip.npu_line) || !is_row(chip.chip_line)) {
      return who + ": not an NPU row above a Chip row";
    }
    for (int l = chip.npu_line + 1; l < chip.chip_line; ++l) {
      if (!is_row(l)) continue;  // a rule or a blank line
      bool sibling = false;
      for (const NpuSmiChip& other : info.chips) {
        sibling |= other.chip_line == l && other.npu_line == chip.npu_line;
      }
      if (!sibling)
        return fmt::format("{}: line {} between its rows is not a Chip row of it", who, l);
    }
    // The nearest header rows above, and the two rows alone.
    int h1 = 0, h2 = 0;
    for (int l = chip.npu_line - 1; l >= 1 && (h1 == 0 || h2 == 0); --l) {
      HeaderKind kind = kinds[static_cast<size_t>(l - 1)];
      if (h1 == 0 && kind == HeaderKind::kNpu) h1 = l;
      if (h2 == 0 && kind == HeaderKind::kChip) h2 = l;
    }
    if (h1 == 0 || h2 == 0) return who + ": no header rows above it";
    std::string alone;
    for (int l : {h1, h2, chip.npu_line, chip.chip_line}) {
      alone += std::string(lines[static_cast<size_t>(l - 1)]) + "\n";
    }
    auto again = ParseNpuSmiInfo(alone);
    if (!again)
      return fmt::format("{}: its two rows alone do not read: {}", who, again.error().message());
    if (again->chips.size() != 1) return who + ": its two rows alone are not one chip";
    std::string diff = CompareChips(chip, again->chips[0]);
    if (!diff.empty()) return fmt::format("{}: {} (reported vs its own rows)", who, diff);
  }
  return "";
}

std::string FirstNpus(std::string_view text, int npus, bool drop_device_rules) {
  std::string out;
  bool in_processes = false, drop_chip_row = false;
  for (std::string_view line : SplitLines(text)) {
    if (drop_device_rules && line.starts_with("+===")) continue;
    if (line.find("Process id") != std::string_view::npos) in_processes = true;
    // A device table row: an NPU row and the Chip row after it, or a process row.
    const bool row = line.size() > 3 && line.starts_with("| ") &&
                     std::isdigit(static_cast<unsigned char>(line[2]));
    if (row && drop_chip_row) {
      drop_chip_row = false;
      continue;
    }
    if (row && ParseInt(SplitWords(line.substr(2)).front()).value_or(0) >= npus) {
      drop_chip_row = !in_processes;
      continue;
    }
    out.append(line);
    out += '\n';
  }
  return out;
}

std::optional<KeyValueLine> SplitKeyValue(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  KeyValueLine kv;
  for (std::string_view w : SplitWords(line.substr(0, colon))) {
    if (!kv.key.empty()) kv.key += ' ';
    kv.key += ToLower(w);
  }
  kv.value = Trim(line.substr(colon + 1));
  return kv;
}

}  // namespace anxin::device::ascend::testing
