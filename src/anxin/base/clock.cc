#include "anxin/base/clock.h"

#include <algorithm>

#include "anxin/base/monotonic_clock.h"

namespace anxin {
namespace {

class WallClock final : public Clock {
 public:
  TimePoint Now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }

  bool SleepUntil(TimePoint deadline, std::stop_token stop) override {
    // A condition variable that nobody notifies: it only wakes for the
    // deadline or for a stop request, which std::condition_variable_any
    // handles through the stop token.
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, stop, deadline, [] { return false; });
    return !stop.stop_requested() && Now() >= deadline;
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
};

class SteadyWallClock final : public Clock {
 public:
  TimePoint Now() const override {
    return wall_start_ +
           std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - steady_start_);
  }

  bool SleepUntil(TimePoint deadline, std::stop_token stop) override {
    std::unique_lock lock(mu_);
    const auto steady_deadline =
        steady_start_ +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline - wall_start_);
    cv_.wait_until(lock, stop, steady_deadline, [] { return false; });
    return !stop.stop_requested() && Now() >= deadline;
  }

 private:
  const TimePoint wall_start_ = RealClock().Now();
  const std::chrono::steady_clock::time_point steady_start_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable_any cv_;
};

}  // namespace

Clock& MonotonicClock() {
  static SteadyWallClock* clock = new SteadyWallClock();
  return *clock;
}

Clock& RealClock() {
  static WallClock* clock = new WallClock();
  return *clock;
}

Clock::TimePoint VirtualClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

bool VirtualClock::SleepUntil(TimePoint deadline, std::stop_token stop) {
  std::unique_lock lock(mu_);
  if (auto_advance_ && deadline > now_) {
    now_ = deadline;
    cv_.notify_all();
  }
  ++sleepers_;
  cv_.notify_all();  // WaitForSleepers watches the count
  bool reached = cv_.wait(lock, stop, [&] { return now_ >= deadline; });
  --sleepers_;
  return reached;
}

void VirtualClock::Advance(Duration d) {
  std::lock_guard lock(mu_);
  if (d > Duration::zero()) now_ += d;
  cv_.notify_all();
}

void VirtualClock::AdvanceTo(TimePoint t) {
  std::lock_guard lock(mu_);
  now_ = std::max(now_, t);
  cv_.notify_all();
}

void VirtualClock::set_auto_advance(bool on) {
  std::lock_guard lock(mu_);
  auto_advance_ = on;
}

int VirtualClock::sleepers() const {
  std::lock_guard lock(mu_);
  return sleepers_;
}

bool VirtualClock::WaitForSleepers(int n, std::chrono::milliseconds real_timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, real_timeout, [&] { return sleepers_ >= n; });
}

}  // namespace anxin
