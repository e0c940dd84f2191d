#include "anxin/device/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "anxin/base/strings.h"
#include "anxin/base/time_format.h"

namespace anxin::device {
namespace {

// Column widths between the bars, as npu-smi prints them.
constexpr int kCol1 = 27;
constexpr int kCol2 = 15;
constexpr int kCol3 = 52;
constexpr int kInner = kCol1 + kCol2 + kCol3 + 2;

const char* kReset = "\x1b[0m";
const char* kRed = "\x1b[1;31m";
const char* kYellow = "\x1b[33m";
const char* kGreen = "\x1b[32m";
const char* kCyan = "\x1b[36m";

// Text padded to width, then coloured (so colour codes do not count as width).
std::string Cell(std::string_view text, int width, const char* color, bool use_color) {
  std::string padded(text);
  if (static_cast<int>(padded.size()) < width) padded.append(width - padded.size(), ' ');
  if (!use_color || color == nullptr) return padded;
  size_t end = text.size();
  return std::string(color) + padded.substr(0, end) + kReset + padded.substr(end);
}

std::string Rule(char c) {
  return "+" + std::string(kCol1, c) + "+" + std::string(kCol2, c) + "+" + std::string(kCol3, c) +
         "+\n";
}

const char* HealthColor(const Result<DeviceSample>& s) {
  if (!s) return kRed;
  switch (s->health) {
    case Health::kOk:
      return kGreen;
    case Health::kWarning:
      return kYellow;
    case Health::kResetting:
      return kCyan;
    default:
      return kRed;
  }
}

const char* TemperatureColor(const DeviceSample& s, const DeviceInfo& info) {
  if (s.temperature_celsius >= info.throttle_celsius) return kRed;
  if (s.temperature_celsius >= kTemperatureWarningCelsius) return kYellow;
  return nullptr;
}

double Round1(double v) { return std::round(v * 10) / 10; }

double HbmRatio(const DeviceSample& s, const DeviceInfo& info) {
  return info.hbm_total_bytes && Reported(s.hbm_used_bytes)
             ? static_cast<double>(s.hbm_used_bytes) / info.hbm_total_bytes
             : 0;
}

// A reading for the table: "-" when the device does not report it.
std::string Show(double v, int decimals) {
  return Reported(v) ? fmt::format("{:.{}f}", v, decimals) : "-";
}
std::string ShowMiB(uint64_t bytes) {
  return Reported(bytes) ? fmt::format("{:.0f}", ToMiB(bytes)) : "-";
}

// A reading for JSON: null when not reported.
nlohmann::json Json1(double v) {
  return Reported(v) ? nlohmann::json(Round1(v)) : nlohmann::json(nullptr);
}
nlohmann::json JsonCount(uint64_t v) {
  return Reported(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

std::string ShortModel(const DeviceInfo& info) {
  // npu-smi shows "910B2C" for an Ascend910B2C.
  std::string_view m = info.model;
  if (m.starts_with("Ascend")) m.remove_prefix(6);
  return std::string(m);
}

int LinksUp(const DeviceSample& s) {
  return static_cast<int>(
      std::count_if(s.links.begin(), s.links.end(), [](const LinkState& l) { return l.up; }));
}

}  // namespace

Result<Snapshot> TakeSnapshot(DeviceBackend& backend, Clock& clock) {
  Snapshot snap;
  snap.source = backend.Describe();
  snap.time = clock.Now();
  ANXIN_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, backend.Enumerate());
  for (DeviceInfo& info : devices) {
    Result<DeviceSample> sample = backend.Sample(info.index);
    snap.rows.push_back(DeviceRow{std::move(info), std::move(sample)});
  }
  return snap;
}

std::vector<std::string> Notes(const Snapshot& snap) {
  std::vector<std::string> notes;
  for (const DeviceRow& row : snap.rows) {
    std::string label = DeviceLabel(row.info);
    if (!row.sample) {
      std::string why = row.sample.error().Describe();
      notes.push_back(why.starts_with(label) ? why : fmt::format("{}: {}", label, why));
      continue;
    }
    const DeviceSample& s = *row.sample;
    if (s.health == Health::kResetting) notes.push_back(label + ": resetting");
    if (s.temperature_celsius >= row.info.throttle_celsius) {
      notes.push_back(fmt::format("{}: {:.0f} C: at its {:.0f} C throttle point, clocks slowed",
                                  label, s.temperature_celsius, row.info.throttle_celsius));
    } else if (s.temperature_celsius >= kTemperatureWarningCelsius) {
      notes.push_back(fmt::format(
          "{}: {:.0f} C: above the {:.0f} C warning line (throttles at "
          "{:.0f} C)",
          label, s.temperature_celsius, kTemperatureWarningCelsius, row.info.throttle_celsius));
    }
    double ratio = HbmRatio(s, row.info);
    if (ratio > kHbmAlertRatio) {
      notes.push_back(
          fmt::format("{}: HBM {:.0f}% used ({:.1f} of {:.1f} GiB): above the {:.0f}% "
                      "alert line",
                      label, ratio * 100, ToGiB(s.hbm_used_bytes), ToGiB(row.info.hbm_total_bytes),
                      kHbmAlertRatio * 100));
    }
    for (const DeviceErrorCode& c : s.error_codes) {
      notes.push_back(fmt::format("{}: error code {} ({}){}{}", label, c.code,
                                  SeverityName(c.severity), c.text.empty() ? "" : ": ", c.text));
    }
    if (s.health != Health::kResetting) {
      for (const LinkState& l : s.links) {
        if (!l.up) notes.push_back(fmt::format("{}: link on port {} is down", label, l.port));
      }
    }
    if (Reported(s.ecc.double_bit) && s.ecc.double_bit > 0) {
      notes.push_back(
          fmt::format("{}: {} uncorrectable (double-bit) HBM ECC errors", label, s.ecc.double_bit));
    }
  }
  return notes;
}

std::string RenderTable(const Snapshot& snap, const TableStyle& style) {
  const bool c = style.color;
  bool all_npu = std::all_of(snap.rows.begin(), snap.rows.end(),
                             [](const DeviceRow& r) { return r.info.vendor == "huawei"; });
  std::string out;
  out += "+" + std::string(kInner, '-') + "+\n";
  std::string title = fmt::format(" anxin devices   {}", snap.source);
  std::string when = FormatRfc3339(snap.time) + " ";
  int gap = kInner - static_cast<int>(title.size()) - static_cast<int>(when.size());
  if (gap < 1) {
    title.resize(std::max(0, kInner - static_cast<int>(when.size()) - 1));
    gap = 1;
  }
  out += "|" + title + std::string(gap, ' ') + when + "|\n";
  out += Rule('-');
  out += fmt::format("| {:<6}{:<20}| {:<14}| {:<12}{:<18}{:<21}|\n", all_npu ? "NPU" : "GPU",
                     "Name", "Health", "Power(W)", "Temp(C)", "NUMA-Node");
  out += fmt::format("| {:<6}{:<20}| {:<14}| {:<12}{:<18}{:<21}|\n", "Chip", "", "Bus-Id",
                     all_npu ? "AICore(%)" : "Util(%)", "Links(up/total)", "HBM-Usage(MB)");
  out += Rule('=');
  for (const DeviceRow& row : snap.rows) {
    const DeviceInfo& info = row.info;
    std::string numa = info.numa_node >= 0 ? std::to_string(info.numa_node) : "-";
    std::string total_mb = fmt::format("{:.0f}", ToMiB(info.hbm_total_bytes));
    if (!row.sample) {
      out += fmt::format("| {:<6}{:<20}| {}| {:<12}{:<18}{:<21}|\n", info.index, ShortModel(info),
                         Cell("Lost", 14, kRed, c), "-", "-", numa);
      out += fmt::format("| {:<6}{:<20}| {:<14}| {:<12}{:<18}{:<21}|\n", 0, "", info.pci_bus_id,
                         "-", "-", fmt::format("- / {}", total_mb));
    } else {
      const DeviceSample& s = *row.sample;
      std::string temp = Show(s.temperature_celsius, 0);
      std::string hbm = fmt::format("{:<5}/ {}", ShowMiB(s.hbm_used_bytes), total_mb);
      double ratio = HbmRatio(s, info);
      int up = LinksUp(s);
      std::string links = fmt::format("{} / {}", up, s.links.size());
      out +=
          fmt::format("| {:<6}{:<20}| {}| {:<12}{}{:<21}|\n", info.index, ShortModel(info),
                      Cell(HealthName(s.health), 14, HealthColor(row.sample), c),
                      Show(s.power_watts, 1), Cell(temp, 18, TemperatureColor(s, info), c), numa);
      out += fmt::format("| {:<6}{:<20}| {:<14}| {:<12}{}{}|\n", 0, "", info.pci_bus_id,
                         Show(s.utilisation_percent, 0),
                         Cell(links, 18, up < static_cast<int>(s.links.size()) ? kRed : nullptr, c),
                         Cell(hbm, 21, ratio > kHbmAlertRatio ? kRed : nullptr, c));
    }
    out += Rule('=');
  }
  if (style.notes) {
    std::vector<std::string> notes = Notes(snap);
    if (!notes.empty()) {
      out += "Attention:\n";
      for (const std::string& n : notes) out += "  " + n + "\n";
    }
  }
  return out;
}

nlohmann::json SnapshotToJson(const Snapshot& snap) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceRow& row : snap.rows) {
    const DeviceInfo& info = row.info;
    nlohmann::json d = {
        {"index", info.index},
        {"uuid", info.uuid},
        {"model", info.model},
        {"vendor", info.vendor},
        {"pci_bus_id", info.pci_bus_id},
        {"numa_node", info.numa_node},
        {"hbm_total_bytes", info.hbm_total_bytes},
        {"tdp_watts", Json1(info.tdp_watts)},
        {"throttle_celsius", Json1(info.throttle_celsius)},
    };
    if (!row.sample) {
      d["health"] = "Lost";
      d["error"] = row.sample.error().Describe();
      devices.push_back(std::move(d));
      continue;
    }
    const DeviceSample& s = *row.sample;
    d["health"] = std::string(HealthName(s.health));
    d["hbm_used_bytes"] = JsonCount(s.hbm_used_bytes);
    d["temperature_celsius"] = Json1(s.temperature_celsius);
    d["power_watts"] = Json1(s.power_watts);
    d["utilisation_percent"] = Json1(s.utilisation_percent);
    d["core_clock_mhz"] = Json1(s.core_clock_mhz);
    d["memory_clock_mhz"] = Json1(s.memory_clock_mhz);
    d["throttled"] = s.throttled;
    nlohmann::json codes = nlohmann::json::array();
    for (const DeviceErrorCode& e : s.error_codes) {
      codes.push_back({{"code", e.code},
                       {"severity", std::string(SeverityName(e.severity))},
                       {"text", e.text}});
    }
    d["error_codes"] = std::move(codes);
    d["ecc"] = {{"single_bit", JsonCount(s.ecc.single_bit)},
                {"double_bit", JsonCount(s.ecc.double_bit)}};
    nlohmann::json links = nlohmann::json::array();
    for (const LinkState& l : s.links) links.push_back({{"port", l.port}, {"up", l.up}});
    d["links"] = std::move(links);
    devices.push_back(std::move(d));
  }
  return {{"time", FormatRfc3339(snap.time)}, {"source", snap.source}, {"devices", devices}};
}

}  // namespace anxin::device
