#include "anxin/base/time_format.h"

#include <fmt/format.h>

#include <ctime>

namespace anxin {

std::string FormatRfc3339(std::chrono::system_clock::time_point t, TimePrecision precision) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t);
  const auto secs = floor<seconds>(ms);
  const time_t tt = system_clock::to_time_t(system_clock::time_point(secs));
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::string out = fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}", tm.tm_year + 1900,
                                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (precision == TimePrecision::kMilliseconds) {
    out += fmt::format(".{:03d}", static_cast<int>((ms - secs).count()));
  }
  out += 'Z';
  return out;
}

}  // namespace anxin
