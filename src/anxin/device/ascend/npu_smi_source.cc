// The npu-smi fallback of the ascend backend: runs the tools and parses their
// text (npu_smi.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <mutex>

#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/device/ascend/npu_smi.h"
#include "anxin/device/ascend/source.h"
#include "anxin/device/models.h"

namespace anxin::device::ascend {
namespace {

class NpuSmiSource final : public ChipSource {
 public:
  NpuSmiSource(AscendOptions options, Clock& clock, NpuSmiInfo first)
      : options_(std::move(options)),
        clock_(clock),
        last_(std::move(first)),
        last_time_(clock.Now()) {}

  std::string Describe() const override {
    std::lock_guard lock(mu_);
    return last_.version.empty() ? "npu-smi" : "npu-smi " + last_.version;
  }

  Result<std::vector<Chip>> List() override {
    ANXIN_ASSIGN_OR_RETURN(NpuSmiInfo info, Info());
    bool one_chip_per_card = true;
    for (size_t i = 0; i < info.chips.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (info.chips[i].npu == info.chips[j].npu) one_chip_per_card = false;
      }
    }
    std::vector<Chip> chips;
    for (size_t i = 0; i < info.chips.size(); ++i) {
      const NpuSmiChip& c = info.chips[i];
      Chip chip;
      chip.card = c.npu;
      chip.chip = c.chip;
      chip.logic = static_cast<int>(i);
      chip.info.index = one_chip_per_card ? c.npu : static_cast<int>(i);
      chip.info.pci_bus_id = c.bus_id;
      chip.info.numa_node = NumaNodeOf(c.bus_id);
      FillModel(c.name, chip.info);
      if (Reported(c.hbm_total_mb)) chip.info.hbm_total_bytes = c.hbm_total_mb * kMiB;
      chips.push_back(std::move(chip));
    }
    return chips;
  }

  Result<DeviceSample> Read(const Chip& chip) override {
    // A refused table gives no numbers for any chip, never a neighbour's.
    Result<NpuSmiInfo> read = Info();
    if (!read) {
      return Unavailable(fmt::format("NPU {}: {}", chip.info.index, read.error().message()));
    }
    const NpuSmiInfo& info = *read;
    auto it = std::find_if(info.chips.begin(), info.chips.end(), [&](const NpuSmiChip& c) {
      return c.npu == chip.card && c.chip == chip.chip;
    });
    if (it == info.chips.end()) {
      return Unavailable(fmt::format(
          "NPU {}: npu-smi info no longer lists card {} chip {}: check the driver (dmesg)",
          chip.info.index, chip.card, chip.chip));
    }
    if (ToLower(it->bus_id) != ToLower(chip.info.pci_bus_id)) {
      return Unavailable(fmt::format(
          "NPU {}: npu-smi info now lists card {} chip {} at Bus-Id {} (line {}), not {} as when "
          "the devices were listed: the reading is refused; check the driver (dmesg)",
          chip.info.index, chip.card, chip.chip, it->bus_id, it->chip_line, chip.info.pci_bus_id));
    }
    DeviceSample s;
    s.time = clock_.Now();
    s.health = HealthFromText(it->health);
    s.power_watts = it->power_watts;
    s.temperature_celsius = it->temperature_celsius;
    s.utilisation_percent = it->aicore_percent;
    s.core_clock_mhz = kNotReported;
    s.memory_clock_mhz = kNotReported;
    s.ecc = {kNotReportedCount, kNotReportedCount};
    s.hbm_used_bytes = Reported(it->hbm_used_mb) ? it->hbm_used_mb * kMiB : kNotReportedCount;
    std::string card = std::to_string(chip.card), c = std::to_string(chip.chip);
    // Health and error codes.
    auto health = Run({options_.npu_smi, "info", "-t", "health", "-i", card, "-c", c});
    if (health) {
      if (auto h = ParseNpuSmiHealth(*health)) {
        s.health = HealthFromText(h->health);
        for (const std::string& code : h->error_codes) {
          s.error_codes.push_back({code, SeverityFor(s.health), ""});
        }
      }
    }
    // Older tables have no HBM column: the usages page has it.
    if (!Reported(s.hbm_used_bytes) || !Reported(s.utilisation_percent)) {
      auto usages = Run({options_.npu_smi, "info", "-t", "usages", "-i", card, "-c", c});
      if (usages) {
        if (auto u = ParseNpuSmiUsages(*usages)) {
          double capacity = u->Get("HBM Capacity(MB)");
          double rate = u->Get("HBM Usage Rate(%)");
          if (!Reported(s.hbm_used_bytes) && Reported(capacity) && Reported(rate)) {
            s.hbm_used_bytes = static_cast<uint64_t>(capacity * rate / 100 * kMiB);
          }
          if (!Reported(s.utilisation_percent)) {
            s.utilisation_percent = u->Get("Aicore Usage Rate(%)");
          }
        }
      }
    }
    // The chip's RoCE port, when hccn_tool is installed.
    auto link = Run({options_.hccn_tool, "-i", std::to_string(chip.logic), "-link", "-g"});
    if (link) {
      if (auto up = ParseHccnLink(*link)) s.links.push_back({0, *up});
    }
    return s;
  }

  // `npu-smi info`, run at most once a second (a snapshot samples every chip).
  Result<NpuSmiInfo> Info() {
    std::lock_guard lock(mu_);
    if (clock_.Now() - last_time_ < std::chrono::seconds(1)) return last_;
    ANXIN_ASSIGN_OR_RETURN(std::string text, Run({options_.npu_smi, "info"}));
    ANXIN_ASSIGN_OR_RETURN(last_, ParseNpuSmiInfo(text));
    last_time_ = clock_.Now();
    return last_;
  }

  // A tool's stdout, or why it gave none.
  Result<std::string> Run(std::vector<std::string> argv) const {
    std::string shown = fmt::format("{}", fmt::join(argv, " "));
    ANXIN_ASSIGN_OR_RETURN(CommandOutput out,
                           RunCommand(std::move(argv), {.timeout = options_.command_timeout}));
    if (!out.ok()) {
      return Unavailable(fmt::format("{} {}: {}", shown, out.Describe(), out.OneLineMessage()));
    }
    return std::move(out.stdout_text);
  }

 private:
  const AscendOptions options_;
  Clock& clock_;
  mutable std::mutex mu_;
  NpuSmiInfo last_;             // guarded by mu_
  Clock::TimePoint last_time_;  // guarded by mu_
};

}  // namespace

Health HealthFromText(std::string_view text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "ok") return Health::kOk;
  if (t == "alarm" || t == "major") return Health::kAlarm;
  if (t == "critical") return Health::kCritical;
  if (t == "resetting") return Health::kResetting;
  return Health::kWarning;
}

Severity SeverityFor(Health h) {
  switch (h) {
    case Health::kAlarm:
      return Severity::kMajor;
    case Health::kCritical:
      return Severity::kCritical;
    default:
      return Severity::kMinor;
  }
}

void FillModel(std::string_view chip_name, DeviceInfo& info) {
  info.vendor = "huawei";
  std::string name(chip_name);
  if (!name.empty() && !name.starts_with("Ascend")) name = "Ascend" + name;
  info.model = name.empty() ? "Ascend" : name;
  info.tdp_watts = kNotReported;
  info.throttle_celsius = kNotReported;
  if (const ModelSpec* m = FindModel(info.model)) {
    info.tdp_watts = m->tdp_watts;
    info.throttle_celsius = m->throttle_celsius;
  }
}

int NumaNodeOf(std::string bus_id) {
  if (bus_id.empty()) return -1;
  for (char& c : bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (in >> node && node >= 0) return node;
  return -1;
}

Result<std::unique_ptr<ChipSource>> MakeNpuSmiSource(const AscendOptions& options, Clock& clock) {
  auto out = RunCommand({options.npu_smi, "info"}, {.timeout = options.command_timeout});
  if (!out) return Unavailable(out.error().message());
  if (!out->ok()) {
    return Unavailable(
        fmt::format("{} info {}: {}", options.npu_smi, out->Describe(), out->OneLineMessage()));
  }
  auto info = ParseNpuSmiInfo(out->stdout_text);
  // A device table with a row that does not fit: refused as it is (kDataLoss),
  // not reported as a missing tool.
  if (!info && info.error().message().starts_with("npu-smi info: line ")) {
    return std::unexpected(info.error());
  }
  if (!info) {
    return Unavailable(fmt::format("{} info printed no table this backend reads: {}",
                                   options.npu_smi, info.error().message()));
  }
  return std::unique_ptr<ChipSource>(
      std::make_unique<NpuSmiSource>(options, clock, *std::move(info)));
}

}  // namespace anxin::device::ascend
