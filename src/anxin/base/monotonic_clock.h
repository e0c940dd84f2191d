// A wall clock that never jumps, for code that measures timeouts over hours
// and also stamps what it saw with the time of day (the `anxin run`
// supervisor): the wall time at the first call plus the steady clock's time
// since. Setting the system clock (an NTP step, an operator) moves neither
// its timeouts nor its stamps; over a long run the stamps may drift from the
// system clock by what NTP slews it.
//
//   Clock& clock = MonotonicClock();
//   const Clock::TimePoint start = clock.Now();
//   clock.SleepFor(std::chrono::milliseconds(10));
//   spdlog::info("{} s", ToSeconds(clock.Now() - start));   // >= 0.01, whatever the system clock
//
// Thread safety: every method may be called from any thread.
#ifndef ANXIN_BASE_MONOTONIC_CLOCK_H_
#define ANXIN_BASE_MONOTONIC_CLOCK_H_

#include "anxin/base/clock.h"

namespace anxin {

// Never destroyed.
Clock& MonotonicClock();

}  // namespace anxin

#endif  // ANXIN_BASE_MONOTONIC_CLOCK_H_
