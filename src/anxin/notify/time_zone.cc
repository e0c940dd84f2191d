#include "anxin/notify/time_zone.h"

#include <fmt/format.h>

#include <algorithm>

#include "anxin/base/file.h"

namespace anxin::notify {
namespace {

uint32_t Be32(std::string_view d, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(d[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(d[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(d[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(d[at + 3]));
}
int64_t Be64(std::string_view d, size_t at) {
  return static_cast<int64_t>((static_cast<uint64_t>(Be32(d, at)) << 32) | Be32(d, at + 4));
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/' ||
      name.find("..") != std::string_view::npos) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' ||
           c == '+';
  });
}

}  // namespace

TimeZone::TimeZone() = default;

Result<TimeZone> TimeZone::Load(std::string_view name, std::string_view zoneinfo_dir) {
  if (name == "UTC" || name == "Z" || name.empty()) return TimeZone();
  if ((name[0] == '+' || name[0] == '-') && name.size() == 6 && name[3] == ':') {
    auto digit = [&](size_t i) { return std::isdigit(static_cast<unsigned char>(name[i])); };
    if (digit(1) && digit(2) && digit(4) && digit(5)) {
      const int h = (name[1] - '0') * 10 + (name[2] - '0');
      const int m = (name[4] - '0') * 10 + (name[5] - '0');
      if (h <= 14 && m <= 59) {
        TimeZone tz;
        tz.name_ = std::string(name);
        tz.types_ = {Type{(h * 3600 + m * 60) * (name[0] == '-' ? -1 : 1), std::string(name)}};
        return tz;
      }
    }
  }
  if (!ValidName(name)) {
    return InvalidArgument("time zone '" + std::string(name) +
                           "': expected UTC, an offset like +08:00 or a name like Asia/Shanghai");
  }
  const std::string path = std::string(zoneinfo_dir) + "/" + std::string(name);
  auto data = ReadFile(path);
  if (!data) {
    return NotFound("time zone '" + std::string(name) + "': no zoneinfo file " + path +
                    " (install tzdata, or use an offset like +08:00)");
  }
  return FromTzif(name, *data);
}

Result<TimeZone> TimeZone::FromTzif(std::string_view name, std::string_view d) {
  auto corrupt = [&](std::string_view why) {
    return DataLoss("time zone '" + std::string(name) + "': not a valid TZif file (" +
                    std::string(why) + ")");
  };
  if (d.size() < 44 || d.substr(0, 4) != "TZif") return corrupt("no TZif header");
  // Counts of a header at `at`: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
  auto counts = [&](size_t at, uint32_t c[6]) {
    for (int i = 0; i < 6; ++i) c[i] = Be32(d, at + 20 + 4 * i);
  };
  uint32_t c[6];
  counts(0, c);
  size_t at = 44;
  int time_size = 4;
  if (d[4] >= '2') {
    // Skip the 32-bit block; the 64-bit one follows with a header of its own.
    const uint64_t v1 =
        uint64_t{c[3]} * 5 + uint64_t{c[4]} * 6 + c[5] + uint64_t{c[2]} * 8 + c[1] + c[0];
    if (at + v1 + 44 > d.size()) return corrupt("truncated");
    at += v1;
    if (d.substr(at, 4) != "TZif") return corrupt("no second header");
    counts(at, c);
    at += 44;
    time_size = 8;
  }
  const uint32_t timecnt = c[3], typecnt = c[4], charcnt = c[5];
  if (typecnt == 0 || typecnt > 256 || timecnt > 100000 || charcnt > 10000)
    return corrupt("counts");
  const uint64_t need = uint64_t{timecnt} * (time_size + 1) + uint64_t{typecnt} * 6 + charcnt;
  if (at + need > d.size()) return corrupt("truncated");
  TimeZone tz;
  tz.name_ = std::string(name);
  tz.transitions_.resize(timecnt);
  for (uint32_t i = 0; i < timecnt; ++i) {
    tz.transitions_[i] =
        time_size == 8 ? Be64(d, at + 8 * i) : static_cast<int32_t>(Be32(d, at + 4 * i));
    if (i > 0 && tz.transitions_[i] <= tz.transitions_[i - 1]) return corrupt("unordered");
  }
  at += size_t{timecnt} * time_size;
  tz.transition_type_.resize(timecnt);
  for (uint32_t i = 0; i < timecnt; ++i) {
    tz.transition_type_[i] = static_cast<uint8_t>(d[at + i]);
    if (tz.transition_type_[i] >= typecnt) return corrupt("type index");
  }
  at += timecnt;
  const size_t chars_at = at + size_t{typecnt} * 6;
  tz.types_.clear();
  for (uint32_t i = 0; i < typecnt; ++i) {
    Type t;
    t.offset = static_cast<int32_t>(Be32(d, at + 6 * i));
    const uint8_t abbr = static_cast<uint8_t>(d[at + 6 * i + 5]);
    if (abbr >= charcnt || std::abs(t.offset) > 26 * 3600) return corrupt("type");
    std::string_view chars = d.substr(chars_at + abbr, charcnt - abbr);
    t.abbreviation = std::string(chars.substr(0, chars.find('\0')));
    tz.types_.push_back(std::move(t));
  }
  return tz;
}

int TimeZone::OffsetAt(int64_t t, std::string* abbreviation) const {
  size_t type = 0;
  if (!transitions_.empty()) {
    auto it = std::upper_bound(transitions_.begin(), transitions_.end(), t);
    if (it != transitions_.begin())
      type = transition_type_[static_cast<size_t>(it - transitions_.begin() - 1)];
  }
  if (abbreviation) *abbreviation = types_[type].abbreviation;
  return types_[type].offset;
}

std::string TimeZone::Format(int64_t t) const {
  std::string abbr;
  const int64_t local = t + OffsetAt(t, &abbr);
  // Civil date from days (H. Hinnant's algorithm).
  int64_t days = local >= 0 ? local / 86400 : (local - 86399) / 86400;
  int64_t secs = local - days * 86400;
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} {}", year, month, day, secs / 3600,
                     secs / 60 % 60, secs % 60, abbr);
}

}  // namespace anxin::notify
