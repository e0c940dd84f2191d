// Clocks: the wall clock for programs, and a virtual clock that tests (and
// simulations) advance by hand, so that nothing time-dependent needs real
// sleeps.
//
//   std::stop_source stop;                  // request_stop() from elsewhere
//   Clock& clock = RealClock();
//   Clock::TimePoint next = clock.Now() + std::chrono::seconds(1);
//   if (!clock.SleepUntil(next, stop.get_token())) return Ok();  // stop requested
//
//   VirtualClock vc;                        // starts at TimePoint{} unless given
//   std::jthread t([&] { vc.SleepUntil(vc.Now() + 5s); });
//   vc.WaitForSleepers(1, 5s);              // the thread is now blocked
//   vc.Advance(5s);                         // ... and now it wakes up
//
// Thread safety: every method of both clocks may be called from any thread.
#ifndef ANXIN_BASE_CLOCK_H_
#define ANXIN_BASE_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

namespace anxin {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;

  virtual ~Clock() = default;

  virtual TimePoint Now() const = 0;
  // Blocks until Now() >= deadline (true) or until stop is requested (false).
  virtual bool SleepUntil(TimePoint deadline, std::stop_token stop = {}) = 0;
  bool SleepFor(Duration d, std::stop_token stop = {}) {
    return SleepUntil(Now() + d, std::move(stop));
  }
};

// The process-wide wall clock (std::chrono::system_clock). Never destroyed.
Clock& RealClock();

// A clock that only moves when told to. SleepUntil blocks until another
// thread advances the clock past the deadline, or, in auto-advance mode,
// jumps the clock to the deadline at once (for running a timed loop to its
// end without waiting).
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(TimePoint start = TimePoint{}) : now_(start) {}

  TimePoint Now() const override;
  bool SleepUntil(TimePoint deadline, std::stop_token stop = {}) override;

  // Moves the clock forward (never backward: an earlier time is ignored) and
  // wakes the sleepers whose deadline has come.
  void Advance(Duration d);
  void AdvanceTo(TimePoint t);
  void set_auto_advance(bool on);

  // How many threads are blocked in SleepUntil now.
  int sleepers() const;
  // Waits (in real time, at most real_timeout) until at least n threads are
  // blocked in SleepUntil; returns whether they are. Lets a test advance the
  // clock only once the thread under test is asleep.
  bool WaitForSleepers(int n, std::chrono::milliseconds real_timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  TimePoint now_;
  bool auto_advance_ = false;
  int sleepers_ = 0;
};

// Seconds as a double, and back; for configuration values and arithmetic.
inline double ToSeconds(Clock::Duration d) { return std::chrono::duration<double>(d).count(); }
inline Clock::Duration FromSeconds(double s) {
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(s));
}

}  // namespace anxin

#endif  // ANXIN_BASE_CLOCK_H_
