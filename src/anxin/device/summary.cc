#include "anxin/device/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "anxin/base/strings.h"

namespace anxin::device {
namespace {

const DeviceRow* FindRow(const Snapshot& snap, int index) {
  for (const DeviceRow& r : snap.rows) {
    if (r.info.index == index) return &r;
  }
  return nullptr;
}

bool HasCode(const DeviceSample& s, const std::string& code) {
  return std::any_of(s.error_codes.begin(), s.error_codes.end(),
                     [&](const DeviceErrorCode& c) { return c.code == code; });
}

std::vector<std::string> Compare(const DeviceInfo& info, const DeviceSample& a,
                                 const DeviceSample& b) {
  std::vector<std::string> parts;
  if (a.health != b.health) {
    parts.push_back(fmt::format("health {} -> {}", HealthName(a.health), HealthName(b.health)));
  }
  double dt = b.temperature_celsius - a.temperature_celsius;
  if (std::abs(dt) >= kNotableTemperatureCelsius) {
    std::string p = fmt::format("temperature {:.0f} C -> {:.0f} C ({:+.0f} C)",
                                a.temperature_celsius, b.temperature_celsius, dt);
    if (b.temperature_celsius >= info.throttle_celsius) {
      p += fmt::format(", at its {:.0f} C throttle point", info.throttle_celsius);
    } else if (b.temperature_celsius >= kTemperatureWarningCelsius) {
      p += fmt::format(", above the {:.0f} C warning line", kTemperatureWarningCelsius);
    }
    parts.push_back(std::move(p));
  }
  // Readings left out (kNotReported, NaN) compare false and drop out here.
  double dh = Reported(a.hbm_used_bytes) && Reported(b.hbm_used_bytes)
                  ? static_cast<double>(b.hbm_used_bytes) - static_cast<double>(a.hbm_used_bytes)
                  : 0;
  if (std::abs(dh) >= kNotableHbmBytes) {
    double ratio = info.hbm_total_bytes ? b.hbm_used_bytes / double(info.hbm_total_bytes) : 0;
    std::string p = fmt::format(
        "HBM used {:.1f} GiB -> {:.1f} GiB ({:+.1f} GiB), now {:.0f}% of "
        "{:.0f} GiB",
        ToGiB(a.hbm_used_bytes), ToGiB(b.hbm_used_bytes), ToGiB(dh), ratio * 100,
        ToGiB(info.hbm_total_bytes));
    if (ratio > kHbmAlertRatio) {
      p += fmt::format(", above the {:.0f}% alert line", kHbmAlertRatio * 100);
    }
    parts.push_back(std::move(p));
  }
  if (std::abs(b.utilisation_percent - a.utilisation_percent) >= kNotableUtilisationPercent) {
    parts.push_back(fmt::format("utilisation {:.0f}% -> {:.0f}%", a.utilisation_percent,
                                b.utilisation_percent));
  }
  for (const DeviceErrorCode& c : b.error_codes) {
    if (!HasCode(a, c.code)) {
      parts.push_back(fmt::format("error code {} raised ({})", c.code, SeverityName(c.severity)));
    }
  }
  for (const DeviceErrorCode& c : a.error_codes) {
    if (!HasCode(b, c.code)) parts.push_back(fmt::format("error code {} cleared", c.code));
  }
  for (const LinkState& lb : b.links) {
    for (const LinkState& la : a.links) {
      if (la.port == lb.port && la.up != lb.up) {
        parts.push_back(fmt::format("link on port {} {}", lb.port, lb.up ? "back up" : "down"));
      }
    }
  }
  if (Reported(a.ecc.double_bit) && Reported(b.ecc.double_bit) &&
      b.ecc.double_bit > a.ecc.double_bit) {
    parts.push_back(
        fmt::format("{} new double-bit ECC errors", b.ecc.double_bit - a.ecc.double_bit));
  }
  if (Reported(a.ecc.single_bit) && Reported(b.ecc.single_bit) &&
      b.ecc.single_bit > a.ecc.single_bit) {
    parts.push_back(
        fmt::format("{} new single-bit ECC errors", b.ecc.single_bit - a.ecc.single_bit));
  }
  return parts;
}

}  // namespace

std::vector<std::string> DescribeChanges(const Snapshot& before, const Snapshot& after) {
  std::vector<std::string> lines;
  for (const DeviceRow& b : after.rows) {
    const DeviceRow* a = FindRow(before, b.info.index);
    std::string label = DeviceLabel(b.info);
    if (a == nullptr) {
      lines.push_back(label + ": appeared");
      continue;
    }
    if (a->sample && !b.sample) {
      lines.push_back(label + ": lost: it no longer answers");
      continue;
    }
    if (!a->sample && b.sample) {
      lines.push_back(label + ": answers again (was lost)");
      continue;
    }
    if (!a->sample) continue;
    std::vector<std::string> parts = Compare(b.info, *a->sample, *b.sample);
    if (!parts.empty()) lines.push_back(fmt::format("{}: {}", label, fmt::join(parts, "; ")));
  }
  return lines;
}

}  // namespace anxin::device
