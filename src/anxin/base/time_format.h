// Wall-clock times as RFC 3339 text in UTC, the one form anxin writes in
// journals, JSON reports, device tables and alerts.
//
//   using namespace std::chrono;
//   system_clock::time_point t = system_clock::from_time_t(1796218130) + 250ms;
//   std::string a = FormatRfc3339(t);                           // "2026-12-02T13:28:50.250Z"
//   std::string b = FormatRfc3339(t, TimePrecision::kSeconds);  // "2026-12-02T13:28:50Z"
//
// Thread safety: pure functions.
#ifndef ANXIN_BASE_TIME_FORMAT_H_
#define ANXIN_BASE_TIME_FORMAT_H_

#include <chrono>
#include <string>

namespace anxin {

enum class TimePrecision {
  kSeconds,       // "2026-12-02T13:28:50Z" (fractions dropped)
  kMilliseconds,  // "2026-12-02T13:28:50.250Z" (finer digits dropped)
};

// t in UTC with a 'Z' zone. Times before the epoch count down correctly
// ("1969-12-31T23:59:59.500Z" for -500 ms).
std::string FormatRfc3339(std::chrono::system_clock::time_point t,
                          TimePrecision precision = TimePrecision::kMilliseconds);

}  // namespace anxin

#endif  // ANXIN_BASE_TIME_FORMAT_H_
