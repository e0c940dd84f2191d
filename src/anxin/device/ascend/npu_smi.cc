#include "anxin/device/ascend/npu_smi.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <optional>

#include "anxin/base/strings.h"

namespace anxin::device::ascend {
namespace {

// A table row: the text between its bars, or a rule line.
struct Row {
  bool rule = false;
  std::vector<std::string_view> cells;
};

std::vector<Row> TableRows(std::string_view text) {
  std::vector<Row> rows;
  for (std::string_view raw : SplitLines(text)) {
    std::string_view line = Trim(raw);
    if (line.starts_with('+')) {
      rows.push_back({.rule = true, .cells = {}});
    } else if (line.starts_with('|')) {
      line.remove_prefix(1);
      if (line.ends_with('|')) line.remove_suffix(1);
      Row row;
      for (std::string_view c : Split(line, '|')) row.cells.push_back(Trim(c));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

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

// Header names (per cell) and a row's values, matched by position within
// each cell; surplus values go to the last name of the cell (a process name
// with spaces), missing ones are absent.
using Fields = std::map<std::string, std::string, std::less<>>;
void Match(const std::vector<std::vector<std::string>>& header, const Row& row, Fields& out) {
  for (size_t c = 0; c < header.size() && c < row.cells.size(); ++c) {
    const auto& names = header[c];
    if (names.empty()) continue;
    std::vector<std::string> values = Values(row.cells[c]);
    for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
      std::string v = values[i];
      if (i + 1 == names.size()) {
        for (size_t j = i + 1; j < values.size(); ++j) v += " " + values[j];
      }
      out[names[i]] = std::move(v);
    }
  }
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
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return d;
}

double NumberOr(const std::string* v) {
  if (v == nullptr) return kNotReported;
  return Number(*v).value_or(kNotReported);
}

uint64_t Count(std::string_view v) {
  auto n = ParseInt(v);
  return n && *n >= 0 ? static_cast<uint64_t>(*n) : kNotReportedCount;
}

// "59356/65536" -> {59356, 65536}.
void UsedTotal(const std::string* v, uint64_t& used, uint64_t& total) {
  if (v == nullptr) return;
  size_t slash = v->find('/');
  if (slash == std::string::npos) return;
  used = Count(std::string_view(*v).substr(0, slash));
  total = Count(std::string_view(*v).substr(slash + 1));
}

int IntOr(const std::string* v, int fallback) {
  if (v == nullptr) return fallback;
  auto n = ParseInt(*v);
  return n && *n >= 0 && *n < (1 << 30) ? static_cast<int>(*n) : fallback;
}

std::string Joined(const Row& row) {
  std::string s;
  for (std::string_view c : row.cells) s += std::string(c) + " ";
  return s;
}

std::string NormalKey(std::string_view key) {
  std::string out;
  for (std::string_view w : SplitWords(key)) {
    if (!out.empty()) out += ' ';
    out += ToLower(w);
  }
  return out;
}

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

Result<NpuSmiInfo> ParseNpuSmiInfo(std::string_view text) {
  NpuSmiInfo info;
  std::vector<Row> rows = TableRows(text);
  enum class Mode { kNone, kChipHeader2, kChips, kProcesses } mode = Mode::kNone;
  std::vector<std::vector<std::string>> chip1, chip2, procs;
  Fields card;  // the NPU's first line, for the chip lines after it
  bool have_card = false;
  for (const Row& row : rows) {
    if (row.rule) {
      if (mode == Mode::kChips) have_card = false;
      continue;
    }
    std::string joined = Joined(row);
    std::string lower = ToLower(joined);
    if (lower.find("version") != std::string::npos && lower.find("npu-smi") != std::string::npos) {
      size_t at = lower.find("version:");
      std::string_view rest = at == std::string::npos ? std::string_view(joined).substr(8)
                                                      : std::string_view(joined).substr(at + 8);
      auto words = SplitWords(rest);
      if (!words.empty()) info.version = std::string(words[0]);
      continue;
    }
    std::vector<std::vector<std::string>> names;
    for (std::string_view c : row.cells) names.push_back(Names(c));
    if (!names.empty() && !names[0].empty() && names[0][0] == "npu") {
      if (lower.find("health") != std::string::npos) {
        chip1 = std::move(names);
        mode = Mode::kChipHeader2;
        continue;
      }
      if (lower.find("process") != std::string::npos) {
        procs = std::move(names);
        mode = Mode::kProcesses;
        continue;
      }
    }
    if (mode == Mode::kChipHeader2) {
      chip2 = std::move(names);
      mode = Mode::kChips;
      have_card = false;
      continue;
    }
    if (mode == Mode::kChips) {
      if (!have_card) {
        card.clear();
        Match(chip1, row, card);
        have_card = true;
        continue;
      }
      Fields f = card;
      Match(chip2, row, f);
      NpuSmiChip chip;
      const std::string* npu = Find(f, {"npu"});
      if (npu == nullptr || !ParseInt(*npu)) {
        return DataLoss(fmt::format("npu-smi info: a device row without an NPU id: '{}'",
                                    std::string(Trim(joined))));
      }
      chip.npu = IntOr(npu, 0);
      chip.chip = IntOr(Find(f, {"chip"}), 0);
      if (const std::string* n = Find(f, {"name"})) chip.name = *n;
      if (const std::string* h = Find(f, {"health"})) chip.health = *h;
      if (const std::string* b = Find(f, {"bus-id", "bus id", "busid"})) chip.bus_id = *b;
      chip.power_watts = NumberOr(Find(f, {"power"}));
      chip.temperature_celsius = NumberOr(Find(f, {"temp"}));
      chip.aicore_percent = NumberOr(Find(f, {"aicore"}));
      UsedTotal(Find(f, {"hbm-usage", "hbm usage", "hbm"}), chip.hbm_used_mb, chip.hbm_total_mb);
      info.chips.push_back(std::move(chip));
      continue;
    }
    if (mode == Mode::kProcesses) {
      if (lower.find("no running processes") != std::string::npos) continue;
      Fields f;
      Match(procs, row, f);
      const std::string* pid = Find(f, {"process id", "pid"});
      if (pid == nullptr || !ParseInt(*pid)) continue;
      NpuSmiProcess p;
      p.npu = IntOr(Find(f, {"npu"}), 0);
      p.chip = IntOr(Find(f, {"chip"}), 0);
      p.pid = *ParseInt(*pid);
      if (const std::string* n = Find(f, {"process name", "name"})) p.name = *n;
      if (const std::string* m = Find(f, {"process memory", "memory"})) p.memory_mb = Count(*m);
      info.processes.push_back(std::move(p));
    }
  }
  if (chip1.empty()) {
    return DataLoss(
        "npu-smi info: no device table (expected a header row naming NPU, Name and Health)");
  }
  return info;
}

Result<NpuSmiHealth> ParseNpuSmiHealth(std::string_view text) {
  auto kv = ParseKeyValues(text);
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
  for (const auto& [k, v] : ParseKeyValues(text)) {
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
  auto kv = ParseKeyValues(text);
  auto it = kv.find("link status");
  if (it == kv.end()) return DataLoss("hccn_tool -link -g: no 'link status' line");
  std::string v = ToLower(it->second);
  if (v == "up") return true;
  if (v == "down") return false;
  return DataLoss(
      fmt::format("hccn_tool -link -g: link status '{}' is neither UP nor DOWN", it->second));
}

}  // namespace anxin::device::ascend
