// Helpers shared by the check files (internal to the doctor module).
#ifndef ANXIN_DOCTOR_CHECK_UTIL_H_
#define ANXIN_DOCTOR_CHECK_UTIL_H_

#include <string>

#include "anxin/doctor/finding.h"

namespace anxin::doctor::internal {

// Raises f.severity to at least s and records the line as evidence.
inline void Note(Finding& f, Severity s, std::string evidence) {
  if (s > f.severity) f.severity = s;
  f.evidence.push_back(std::move(evidence));
}

inline Finding Skip(std::string why) {
  Finding f;
  f.severity = Severity::kSkip;
  f.summary = std::move(why);
  return f;
}

}  // namespace anxin::doctor::internal

#endif  // ANXIN_DOCTOR_CHECK_UTIL_H_
