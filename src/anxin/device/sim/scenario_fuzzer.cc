// libFuzzer target for scenario files: any bytes must parse or give an error,
// never crash, and a scenario that parses must run (every device sampled at a
// few times, a reset and a memory clear).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/base/clock.h"
#include "anxin/device/sim/scenario.h"
#include "anxin/device/sim/sim_backend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto scenario = anxin::device::sim::ParseScenarioText(text, "fuzz.yaml");
  if (!scenario) return 0;
  anxin::VirtualClock clock;
  clock.set_auto_advance(true);  // resets complete at once
  int count = static_cast<int>(scenario->devices.size());
  anxin::device::sim::SimBackend sim(std::move(*scenario), clock);
  for (double t : {0.0, 1.5, 30.0, 600.0}) {
    clock.AdvanceTo(anxin::Clock::TimePoint{} + anxin::FromSeconds(t));
    for (int i = 0; i < count; ++i) (void)sim.Sample(i);
  }
  (void)sim.ClearMemory(0);
  (void)sim.Reset(0);
  (void)sim.Sample(0);
  return 0;
}
