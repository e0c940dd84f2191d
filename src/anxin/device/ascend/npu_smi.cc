#include "anxin/device/ascend/npu_smi.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include "anxin/base/strings.h"

namespace anxin::device::ascend {
namespace {

// A table row: the text between its outer bars, split at the inner ones.
struct Row {
  int line = 0;  // 1-based, in the text given
  std::string_view text;
  std::vector<std::string_view> cells;
};

bool IsLowerWord(std::string_view w) {
  return !w.empty() && std::islower(static_cast<unsigned char>(w[0]));
}

// The names a header cell lists: "NPU   Name" -> {npu, name}; "Process id"
// -> {process id}. Lowercased.
std::vector<std::string> Names(std::string_view cell) {
  std::vector<std::string> names;
  for (std::string_view w : SplitWords(cell)) {
    if (IsLowerWord(w) && !names.empty()) {
      names.back() += " " + ToLower(w);
    } else {
      names.push_back(ToLower(w));
    }
  }
  return names;
}

// The values of a data cell: "0    / 0      59356/ 65536" -> {"0/0", "59356/65536"}.
std::vector<std::string> Values(std::string_view cell) {
  std::vector<std::string> values;
  bool join_next = false;
  for (std::string_view w : SplitWords(cell)) {
    if (!values.empty() && (join_next || w.starts_with('/'))) {
      values.back() += w;
    } else {
      values.emplace_back(w);
    }
    join_next = values.back().ends_with('/');
  }
  return values;
}

// A header row: the names of each of its cells.
struct Header {
  int line = 0;
  std::vector<std::vector<std::string>> names;
  std::vector<std::string_view> cells;  // as printed, for messages
  size_t key = 0;                       // the cell whose first name is the row's id ("npu", "chip")

  bool Has(std::string_view prefix) const {
    for (const auto& cell : names) {
      for (const std::string& n : cell) {
        if (n.starts_with(prefix)) return true;
      }
    }
    return false;
  }
};

using Fields = std::map<std::string, std::string, std::less<>>;

std::string Quoted(std::string_view s) { return "'" + std::string(Trim(s)) + "'"; }

// The row's values by the header's names. Every cell must hold as many values
// as its header cell names, except that `free_text` (a process name) takes
// the words left over in the last place of its cell.
Result<Fields> Match(const Header& header, const Row& row, std::string_view what,
                     std::string_view free_text = {}) {
  if (row.cells.size() != header.names.size()) {
    return DataLoss(fmt::format("line {}: {} columns where the {}'s header (line {}) has {}: {}",
                                row.line, row.cells.size(), what, header.line, header.names.size(),
                                Quoted(row.text)));
  }
  Fields out;
  for (size_t c = 0; c < header.names.size(); ++c) {
    const auto& names = header.names[c];
    std::vector<std::string> values = Values(row.cells[c]);
    const bool free = !names.empty() && !free_text.empty() && names.back() == free_text;
    if (free && values.size() > names.size()) {
      for (size_t j = names.size(); j < values.size(); ++j)
        values[names.size() - 1] += " " + values[j];
      values.resize(names.size());
    }
    if (values.size() != names.size()) {
      return DataLoss(fmt::format(
          "line {}: the {} holds {} value(s) in the column {}, whose header (line {}) names {} "
          "({}): {}",
          row.line, what, values.size(), Quoted(header.cells[c]), header.line, names.size(),
          fmt::join(names, ", "), Quoted(row.text)));
    }
    for (size_t i = 0; i < names.size(); ++i) out[names[i]] = std::move(values[i]);
  }
  return out;
}

// The first field whose name starts with one of the prefixes ("power"
// matches "power(w)"); nullptr when none.
const std::string* Find(const Fields& f, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    for (const auto& [k, v] : f) {
      if (k.starts_with(p)) return &v;
    }
  }
  return nullptr;
}

bool Missing(std::string_view v) { return v.empty() || v == "-" || v == "NA" || v == "N/A"; }

std::optional<double> Number(std::string_view v) {
  v = Trim(v);
  if (Missing(v)) return std::nullopt;
  double d = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

std::optional<uint64_t> Count(std::string_view v) {
  auto n = ParseInt(v);
  if (!n || *n < 0 || v.starts_with("0x") || v.starts_with("0X")) return std::nullopt;
  return static_cast<uint64_t>(*n);
}

std::optional<int> Id(std::string_view v) {
  auto n = Count(v);
  if (!n || *n >= (1u << 30)) return std::nullopt;
  return static_cast<int>(*n);
}

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c));
  });
}

// "0000:66:00.0": domain, bus, device and function, in hex.
bool IsPciAddress(std::string_view s) {
  std::vector<std::string_view> parts = Split(s, ':');
  if (parts.size() != 3) return false;
  size_t dot = parts[2].find('.');
  if (dot == std::string_view::npos) return false;
  std::string_view dev = parts[2].substr(0, dot), fn = parts[2].substr(dot + 1);
  return parts[0].size() >= 4 && parts[0].size() <= 8 && IsHex(parts[0]) && parts[1].size() == 2 &&
         IsHex(parts[1]) && dev.size() == 2 && IsHex(dev) && fn.size() == 1 && fn[0] >= '0' &&
         fn[0] <= '7';
}

// A chip name: "910B3", "310P3", "Ascend910".
bool IsName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// Every value of a device row other than `words` (ids, name, health, Bus-Id)
// is a reading: a number, "-"/"NA", or "used / total".
Status CheckReadings(const Fields& f, std::initializer_list<std::string_view> words,
                     const Row& row) {
  for (const auto& [name, v] : f) {
    if (std::any_of(words.begin(), words.end(),
                    [&](std::string_view w) { return name.starts_with(w); })) {
      continue;
    }
    if (Missing(v) || Number(v)) continue;
    size_t slash = v.find('/');
    if (slash != std::string::npos && Count(std::string_view(v).substr(0, slash)) &&
        Count(std::string_view(v).substr(slash + 1))) {
      continue;
    }
    return DataLoss(
        fmt::format("line {}: expected a number, '-' or 'used / total' for {}, got {}: {}",
                    row.line, name, Quoted(v), Quoted(row.text)));
  }
  return Ok();
}

// A health word: "OK", "Warning", "Alarm", ...
bool IsWord(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

// A reading: a number, or "-"/"NA" (kNotReported). Anything else refuses the row.
Result<double> Reading(const Fields& f, std::initializer_list<std::string_view> names,
                       const Row& row, std::string_view label) {
  const std::string* v = Find(f, names);
  if (v == nullptr || Missing(*v)) return kNotReported;
  if (auto d = Number(*v)) return *d;
  return DataLoss(fmt::format("line {}: expected a number or '-' for {}, got {}: {}", row.line,
                              label, Quoted(*v), Quoted(row.text)));
}

std::string CellText(std::string_view line) {
  line = Trim(line);
  line.remove_prefix(1);
  if (line.ends_with('|')) line.remove_suffix(1);
  return std::string(line);
}

std::string NormalKey(std::string_view key) {
  std::string out;
  for (std::string_view w : SplitWords(key)) {
    if (!out.empty()) out += ' ';
    out += ToLower(w);
  }
  return out;
}

// Reads the table; errors without the "npu-smi info: " prefix.
class InfoReader {
 public:
  Result<NpuSmiInfo> Read(std::string_view text) {
    std::vector<std::string_view> lines = SplitLines(text);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string_view line = Trim(lines[i]);
      if (!line.starts_with('|')) continue;  // rules, blank lines, a shell prompt
      Row row{.line = static_cast<int>(i) + 1, .text = line, .cells = {}};
      line.remove_prefix(1);
      if (line.ends_with('|')) line.remove_suffix(1);
      for (std::string_view c : Split(line, '|')) row.cells.push_back(Trim(c));
      ANXIN_TRY(Take(row));
    }
    if (npu_header_.line == 0) {
      return DataLoss("no device table (expected a header row naming NPU, Name and Health)");
    }
    if (chip_header_.line == 0) {
      return DataLoss(fmt::format(
          "line {}: the device header has no second row naming Chip and Bus-Id after it",
          npu_header_.line));
    }
    ANXIN_TRY(CloseCard(0));
    if (info_.chips.empty()) {
      return DataLoss(
          fmt::format("line {}: no device rows under the device header", chip_header_.line));
    }
    for (const auto& [line, npu, chip] : process_refs_) {
      bool listed = std::any_of(info_.chips.begin(), info_.chips.end(), [&](const NpuSmiChip& c) {
        return c.npu == npu && (chip < 0 || c.chip == chip);
      });
      if (!listed) {
        return DataLoss(fmt::format(
            "line {}: the process table names NPU {}{}, which the device table does not list", line,
            npu, chip < 0 ? "" : fmt::format(" chip {}", chip)));
      }
    }
    return std::move(info_);
  }

 private:
  enum class Section { kNone, kDevices, kProcesses };

  Status Take(const Row& row) {
    std::string lower = ToLower(row.text);
    if (lower.find("npu-smi") != std::string::npos && lower.find("version") != std::string::npos) {
      std::string joined = CellText(row.text);
      std::string low = ToLower(joined);
      size_t at = low.find("version:");
      std::string_view rest = at == std::string::npos ? std::string_view(joined).substr(8)
                                                      : std::string_view(joined).substr(at + 8);
      auto words = SplitWords(rest);
      if (!words.empty()) info_.version = std::string(words[0]);
      return CloseCard(row.line);
    }
    const std::string cell = NormalKey(CellText(row.text));
    if (cell.starts_with("no running processes")) {
      // "No running processes found in NPU 5"
      auto words = SplitWords(cell);
      std::optional<int> npu = words.empty() ? std::nullopt : Id(words.back());
      if (!npu) {
        return DataLoss(
            fmt::format("line {}: expected 'No running processes found in NPU <id>': {}", row.line,
                        Quoted(row.text)));
      }
      process_refs_.push_back({row.line, *npu, -1});
      return CloseCard(row.line);
    }
    // Data rows start with a number; only other rows can be headers.
    if (row.cells.empty() || row.cells[0].empty() ||
        std::isdigit(static_cast<unsigned char>(row.cells[0][0]))) {
      return DataRow(row);
    }
    Header h;
    h.line = row.line;
    h.cells = row.cells;
    for (std::string_view c : row.cells) h.names.push_back(Names(c));
    const std::string first =
        !h.names.empty() && !h.names[0].empty() ? h.names[0][0] : std::string();
    if (first == "npu" && h.Has("health")) {
      ANXIN_TRY(CloseCard(row.line));
      npu_header_ = std::move(h);
      section_ = Section::kDevices;
      return Ok();
    }
    if (first == "chip" && (h.Has("bus-id") || h.Has("bus id"))) {
      ANXIN_TRY(CloseCard(row.line));
      chip_header_ = std::move(h);
      section_ = Section::kDevices;
      return Ok();
    }
    if (first == "npu" && h.Has("process")) {
      ANXIN_TRY(CloseCard(row.line));
      process_header_ = std::move(h);
      section_ = Section::kProcesses;
      return Ok();
    }
    return DataRow(row);
  }

  Status DataRow(const Row& row) {
    switch (section_) {
      case Section::kDevices:
        return DeviceRow(row);
      case Section::kProcesses:
        return ProcessRow(row);
      case Section::kNone:
        break;
    }
    return DataLoss(fmt::format(
        "line {}: a table row before any header row (expected 'NPU Name | Health | ...'): {}",
        row.line, Quoted(row.text)));
  }

  // An NPU row: "<id> <name> | <health> | ...". A Chip row: "<chip id> [<more
  // ids>] | <bus id> | ...". Told apart by their first column.
  Status DeviceRow(const Row& row) {
    if (npu_header_.line == 0 || chip_header_.line == 0) {
      return DataLoss(fmt::format(
          "line {}: a device row before the two device header rows (NPU Name | Health and Chip "
          "| Bus-Id): {}",
          row.line, Quoted(row.text)));
    }
    std::vector<std::string> id =
        row.cells.empty() ? std::vector<std::string>() : Values(row.cells[0]);
    const bool all_ids = !id.empty() && std::all_of(id.begin(), id.end(), [](const std::string& v) {
      return Id(v).has_value();
    });
    if (all_ids) return ChipRow(row);
    if (id.size() >= 2 && Id(id[0])) return NpuRow(row);
    return DataLoss(fmt::format(
        "line {}: expected an NPU row (NPU id and name first, like '0  910B3') or a Chip row "
        "(chip id first, then its Bus-Id), got {}",
        row.line, Quoted(row.text)));
  }

  Status NpuRow(const Row& row) {
    ANXIN_TRY(CloseCard(row.line));
    ANXIN_ASSIGN_OR_RETURN(Fields f, Match(npu_header_, row, "NPU row"));
    const std::string* npu = Find(f, {"npu"});
    const std::string* name = Find(f, {"name"});
    const std::string* health = Find(f, {"health"});
    if (npu == nullptr || !Id(*npu)) {
      return DataLoss(
          fmt::format("line {}: expected an NPU id, got {}", row.line, Quoted(row.text)));
    }
    if (name == nullptr || Id(*name) || !IsName(*name)) {
      return DataLoss(fmt::format("line {}: expected a chip name like 910B3 after the NPU id: {}",
                                  row.line, Quoted(row.text)));
    }
    if (health == nullptr || !IsWord(*health)) {
      return DataLoss(
          fmt::format("line {}: expected a health word (OK, Warning, Alarm, ...) in the "
                      "Health column, got {}: {}",
                      row.line, Quoted(health ? *health : ""), Quoted(row.text)));
    }
    ANXIN_TRY(CheckReadings(f, {"npu", "name", "health"}, row));
    card_ = Card{
        .line = row.line, .npu = *Id(*npu), .fields = std::move(f), .chips = 0, .text = row.text};
    return Ok();
  }

  Status ChipRow(const Row& row) {
    if (!card_) {
      return DataLoss(fmt::format(
          "line {}: a Chip/Bus-Id row with no NPU row before it (a device is its NPU row and the "
          "Chip row after it): {}",
          row.line, Quoted(row.text)));
    }
    ANXIN_ASSIGN_OR_RETURN(Fields f, Match(chip_header_, row, "Chip row"));
    NpuSmiChip chip;
    chip.npu = card_->npu;
    chip.npu_line = card_->line;
    chip.chip_line = row.line;
    chip.chip = *Id(*Find(f, {"chip"}));
    const Fields& n = card_->fields;
    chip.name = *Find(n, {"name"});
    chip.health = *Find(n, {"health"});
    const std::string* bus = Find(f, {"bus-id", "bus id", "busid"});
    if (bus == nullptr || !IsPciAddress(*bus)) {
      return DataLoss(fmt::format(
          "line {}: expected a PCI address like 0000:66:00.0 in the Bus-Id column, got {}: {}",
          row.line, Quoted(bus ? *bus : ""), Quoted(row.text)));
    }
    chip.bus_id = *bus;
    ANXIN_TRY(CheckReadings(f, {"chip", "bus"}, row));
    const Row npu_row{.line = card_->line, .text = card_->text, .cells = {}};
    ANXIN_ASSIGN_OR_RETURN(chip.power_watts, Reading(n, {"power"}, npu_row, "Power(W)"));
    ANXIN_ASSIGN_OR_RETURN(chip.temperature_celsius, Reading(n, {"temp"}, npu_row, "Temp(C)"));
    ANXIN_ASSIGN_OR_RETURN(chip.aicore_percent, Reading(f, {"aicore"}, row, "AICore(%)"));
    if (const std::string* hbm = Find(f, {"hbm-usage", "hbm usage", "hbm"});
        hbm != nullptr && !Missing(*hbm)) {
      size_t slash = hbm->find('/');
      std::optional<uint64_t> used, total;
      if (slash != std::string::npos) {
        used = Count(std::string_view(*hbm).substr(0, slash));
        total = Count(std::string_view(*hbm).substr(slash + 1));
      }
      if (!used || !total || *total == 0 || *used > *total) {
        return DataLoss(fmt::format(
            "line {}: expected HBM-Usage as 'used / total' in MB with a total above 0 and not "
            "below the used, got {}: {}",
            row.line, Quoted(*hbm), Quoted(row.text)));
      }
      chip.hbm_used_mb = *used;
      chip.hbm_total_mb = *total;
    }
    for (const NpuSmiChip& other : info_.chips) {
      if (other.npu == chip.npu && other.chip == chip.chip) {
        return DataLoss(fmt::format(
            "line {}: NPU {} chip {} is listed twice (lines {} and {}): a row of one device "
            "follows another's",
            row.line, chip.npu, chip.chip, other.chip_line, row.line));
      }
      if (other.npu != chip.npu && ToLower(other.bus_id) == ToLower(chip.bus_id)) {
        return DataLoss(fmt::format("line {}: Bus-Id {} is already NPU {}'s (line {})", row.line,
                                    chip.bus_id, other.npu, other.chip_line));
      }
    }
    ++card_->chips;
    info_.chips.push_back(std::move(chip));
    return Ok();
  }

  Status ProcessRow(const Row& row) {
    ANXIN_ASSIGN_OR_RETURN(Fields f, Match(process_header_, row, "process row", "process name"));
    const std::string* npu = Find(f, {"npu"});
    const std::string* chip = Find(f, {"chip"});
    const std::string* pid = Find(f, {"process id", "pid"});
    NpuSmiProcess p;
    if (npu == nullptr || !Id(*npu) || (chip != nullptr && !Id(*chip)) || pid == nullptr ||
        !Count(*pid)) {
      return DataLoss(fmt::format(
          "line {}: expected a process row (NPU id, chip id, process id, name, memory): {}",
          row.line, Quoted(row.text)));
    }
    p.npu = *Id(*npu);
    p.chip = chip ? *Id(*chip) : 0;
    p.pid = static_cast<int64_t>(*Count(*pid));
    if (const std::string* n = Find(f, {"process name", "name"})) p.name = *n;
    if (const std::string* m = Find(f, {"process memory", "memory"}); m && !Missing(*m)) {
      auto mb = Count(*m);
      if (!mb) {
        return DataLoss(fmt::format("line {}: expected the process memory in MB, got {}: {}",
                                    row.line, Quoted(*m), Quoted(row.text)));
      }
      p.memory_mb = *mb;
    }
    process_refs_.push_back({row.line, p.npu, p.chip});
    info_.processes.push_back(std::move(p));
    return Ok();
  }

  // The NPU row being read gets no more Chip rows; `next` is the line that
  // ends it (0: the end of the text).
  Status CloseCard(int next) {
    if (card_ && card_->chips == 0) {
      return DataLoss(fmt::format(
          "line {}: NPU {} has no Chip/Bus-Id row after it ({})", card_->line, card_->npu,
          next == 0 ? std::string("the text ends") : fmt::format("line {} follows", next)));
    }
    card_.reset();
    return Ok();
  }

  struct Card {
    int line = 0;
    int npu = 0;
    Fields fields;
    int chips = 0;
    std::string_view text;
  };
  struct ProcessRef {
    int line = 0;
    int npu = 0;
    int chip = -1;  // -1: any chip of the NPU
  };

  NpuSmiInfo info_;
  Header npu_header_, chip_header_, process_header_;
  Section section_ = Section::kNone;
  std::optional<Card> card_;
  std::vector<ProcessRef> process_refs_;
};

}  // namespace

std::map<std::string, std::string> ParseKeyValues(std::string_view text) {
  std::map<std::string, std::string> out;
  for (std::string_view line : SplitLines(text)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string key = NormalKey(line.substr(0, colon));
    if (key.empty()) continue;
    out.emplace(std::move(key), std::string(Trim(line.substr(colon + 1))));
  }
  return out;
}

namespace {

// ParseKeyValues, refusing a key printed twice with different values (two
// outputs run together): `what` names the output in the message.
Result<std::map<std::string, std::string>> UniqueKeyValues(std::string_view text,
                                                           std::string_view what) {
  std::map<std::string, std::string> out;
  std::map<std::string, size_t> where;
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    std::string key = NormalKey(lines[i].substr(0, colon));
    if (key.empty()) continue;
    std::string value(Trim(lines[i].substr(colon + 1)));
    auto [it, added] = out.emplace(key, value);
    if (added) {
      where[key] = i + 1;
    } else if (it->second != value) {
      return DataLoss(fmt::format(
          "{}: line {}: '{}' is '{}', but '{}' on line {}: one device's output is expected", what,
          i + 1, key, value, it->second, where[key]));
    }
  }
  return out;
}

}  // namespace

Result<NpuSmiInfo> ParseNpuSmiInfo(std::string_view text) {
  InfoReader reader;
  auto info = reader.Read(text);
  if (!info) {
    return DataLoss(
        fmt::format("npu-smi info: {}; the reading is refused (no device is listed "
                    "from it): send the full output of `npu-smi info` with a report",
                    info.error().message()));
  }
  return info;
}

Result<NpuSmiHealth> ParseNpuSmiHealth(std::string_view text) {
  ANXIN_ASSIGN_OR_RETURN(auto kv, UniqueKeyValues(text, "npu-smi info -t health"));
  auto it = kv.find("health status");
  if (it == kv.end()) it = kv.find("health");
  if (it == kv.end() || it->second.empty()) {
    return DataLoss("npu-smi info -t health: no 'Health Status' line");
  }
  NpuSmiHealth h;
  h.health = it->second;
  for (const auto& [k, v] : kv) {
    if (!k.starts_with("error code") || k.find("count") != std::string::npos) continue;
    std::string codes = v;
    for (char& c : codes) {
      if (c == ',' || c == ';') c = ' ';
    }
    for (std::string_view w : SplitWords(codes)) {
      if (!Missing(w)) h.error_codes.emplace_back(w);
    }
  }
  return h;
}

double NpuSmiUsages::Get(std::string_view key) const {
  auto it = values.find(NormalKey(key));
  return it == values.end() ? kNotReported : it->second;
}

Result<NpuSmiUsages> ParseNpuSmiUsages(std::string_view text) {
  NpuSmiUsages u;
  ANXIN_ASSIGN_OR_RETURN(auto kv, UniqueKeyValues(text, "npu-smi info -t usages"));
  for (const auto& [k, v] : kv) {
    if (auto d = Number(v)) u.values[k] = *d;
  }
  if (u.values.empty()) {
    return DataLoss(
        "npu-smi info -t usages: no 'Key : number' lines (expected e.g. 'HBM "
        "Usage Rate(%) : 3')");
  }
  return u;
}

Result<bool> ParseHccnLink(std::string_view text) {
  // Every "link status" line counts: two that disagree (outputs of two
  // ports run together) are refused, not read as the first.
  std::optional<bool> up;
  int first_line = 0;
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos || NormalKey(lines[i].substr(0, colon)) != "link status") {
      continue;
    }
    std::string_view value = Trim(lines[i].substr(colon + 1));
    std::string v = ToLower(value);
    if (v != "up" && v != "down") {
      return DataLoss(fmt::format(
          "hccn_tool -link -g: line {}: link status '{}' is neither UP nor DOWN", i + 1, value));
    }
    if (up && *up != (v == "up")) {
      return DataLoss(fmt::format(
          "hccn_tool -link -g: line {}: link status {} contradicts line {}: one port per output "
          "is expected",
          i + 1, value, first_line));
    }
    if (!up) first_line = static_cast<int>(i) + 1;
    up = v == "up";
  }
  if (!up) return DataLoss("hccn_tool -link -g: no 'link status' line");
  return *up;
}

}  // namespace anxin::device::ascend
