// The `sim` device backend: a node of simulated accelerators driven by a
// scenario (scenario.h) on a clock. Time 0 of the scenario is the clock's time
// when the backend is made.
//
//   VirtualClock clock;
//   ANXIN_ASSIGN_OR_RETURN(Scenario s, LoadScenario("examples/scenarios/faults.yaml"));
//   SimBackend sim(std::move(s), clock);
//   clock.Advance(std::chrono::seconds(10));
//   Result<DeviceSample> reading = sim.Sample(3);  // what NPU 3 reads 10 s in
//
// Readings are a pure function of the scenario, its seed, the time and the
// operations done so far (resets, memory clears): two backends made from the
// same scenario read the same at the same virtual times.
//
// Semantics of the operations:
// - Reset(i) blocks for reset.duration on the clock; the first reset.fail_first
//   resets of a device fail (kUnavailable). A successful reset ends the effect
//   of every event of that device that began before the reset finished (error
//   codes, links, hangs, ramps, leaks, loss); later events still happen.
// - ClearMemory(i) ends the effect of the HBM leaks and steps that began
//   before it: HBM use returns to the baseline.
// - A lost device answers Sample with kUnavailable until it is reset.
// - Health is the worst severity among the raised error codes (minor ->
//   Warning, major -> Alarm, critical -> Critical); a device at or above its
//   throttle temperature is at least Warning.
//
// Thread safety: all methods may be called from any thread. REQUIRES: the
// clock outlives the backend.
#ifndef ANXIN_DEVICE_SIM_SIM_BACKEND_H_
#define ANXIN_DEVICE_SIM_SIM_BACKEND_H_

#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/device/backend.h"
#include "anxin/device/sim/scenario.h"

namespace anxin::device::sim {

class SimBackend final : public DeviceBackend {
 public:
  SimBackend(Scenario scenario, Clock& clock);
  ~SimBackend() override;

  std::string_view name() const override { return "sim"; }
  std::string Describe() const override;
  Result<std::vector<DeviceInfo>> Enumerate() override;
  Result<DeviceSample> Sample(int index) override;
  Result<FaultSubscription> SubscribeFaults(FaultCallback callback) override;
  Status ClearMemory(int index) override;
  Status Reset(int index) override;

  const Scenario& scenario() const { return scenario_; }
  // Seconds since the scenario began.
  double ElapsedSeconds() const;

  struct Hub;  // fault subscribers (sim_backend.cc)

 private:
  struct DeviceState {
    double epoch = -1;         // events before this time no longer act
    double memory_epoch = -1;  // HBM events before this time no longer act
    int reset_attempts = 0;
    bool resetting = false;
  };
  // A fault as the device will report it, at scenario time `at`.
  struct TimedFault {
    double at = 0;
    FaultEvent event;
  };

  Status CheckIndex(int index) const;
  Result<DeviceSample> Evaluate(int index, double t, const DeviceState& st) const;
  void DeliverFaults(double from, std::stop_token stop);
  void Publish(const FaultEvent& e);

  const Scenario scenario_;
  Clock& clock_;
  const Clock::TimePoint start_;
  std::vector<TimedFault> timeline_;
  std::shared_ptr<Hub> hub_;

  mutable std::mutex mu_;
  std::vector<DeviceState> states_;  // guarded by mu_
  std::stop_source shutdown_;
  std::jthread fault_thread_;  // last: stopped and joined before the rest goes
};

}  // namespace anxin::device::sim

#endif  // ANXIN_DEVICE_SIM_SIM_BACKEND_H_
