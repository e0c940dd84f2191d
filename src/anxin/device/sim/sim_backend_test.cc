#include "anxin/device/sim/sim_backend.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <set>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin::device::sim {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Four quiet devices (no noise) so that readings are exact.
constexpr std::string_view kQuietDevices = R"(
seed: 5
devices:
  count: 4
  model: Ascend910C
  ports: 2
  baseline: {temperature: 50, power: 300, utilisation: 80, hbm_used: 40GiB}
  noise: {temperature: 0, power: 0, utilisation: 0, hbm_used: 0}
  reset: {duration: 20s, fail_first: 2}
)";

struct Sim {
  explicit Sim(std::string_view events, std::string_view extra = "") {
    std::string yaml = std::string(kQuietDevices) + std::string(extra) +
                       (events.empty() ? "events: []\n" : "events:\n" + std::string(events));
    auto s = ParseScenarioText(yaml, "test.yaml");
    if (!s) {
      ADD_FAILURE() << s.error().ToString();
      s = ParseScenarioText(kQuietDevices, "test.yaml");
    }
    backend = std::make_unique<SimBackend>(std::move(*s), clock);
  }
  DeviceSample At(double t, int index) {
    clock.AdvanceTo(Clock::TimePoint{} + FromSeconds(t));
    auto s = backend->Sample(index);
    EXPECT_THAT(s, IsOk()) << "at " << t << " s";
    return s ? *s : DeviceSample{};
  }
  VirtualClock clock;
  std::unique_ptr<SimBackend> backend;
};

TEST(SimBackendTest, EnumerateDescribesDevices) {
  Sim sim("");
  auto devices = sim.backend->Enumerate();
  ASSERT_THAT(devices, IsOk());
  ASSERT_EQ(devices->size(), 4u);
  EXPECT_EQ((*devices)[2].index, 2);
  EXPECT_EQ((*devices)[2].model, "Ascend910C");
  EXPECT_EQ((*devices)[2].hbm_total_bytes, 64 * kGiB);
  EXPECT_DOUBLE_EQ((*devices)[2].throttle_celsius, 95);
  EXPECT_EQ(sim.backend->Describe(), "sim, scenario test (4 x Ascend910C)");
  EXPECT_THAT(sim.backend->Sample(4), HasCode(ErrorCode::kNotFound, HasSubstr("0-3")));
  EXPECT_THAT(sim.backend->Sample(-1), HasCode(ErrorCode::kNotFound));
}

TEST(SimBackendTest, BaselineReadings) {
  Sim sim("");
  DeviceSample s = sim.At(0, 1);
  EXPECT_EQ(s.health, Health::kOk);
  EXPECT_DOUBLE_EQ(s.temperature_celsius, 50);
  EXPECT_DOUBLE_EQ(s.power_watts, 300);
  EXPECT_DOUBLE_EQ(s.utilisation_percent, 80);
  EXPECT_EQ(s.hbm_used_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(s.core_clock_mhz, 1800);
  EXPECT_FALSE(s.throttled);
  ASSERT_EQ(s.links.size(), 2u);
  EXPECT_TRUE(s.links[0].up && s.links[1].up);
  EXPECT_TRUE(s.error_codes.empty());
  EXPECT_EQ(s.ecc.double_bit, 0u);
}

std::vector<std::string> Readings(std::string_view builtin, uint64_t seed) {
  auto scenario = BuiltinScenario(builtin);
  EXPECT_THAT(scenario, IsOk());
  scenario->seed = seed;
  VirtualClock clock;
  SimBackend sim(std::move(*scenario), clock);
  std::vector<std::string> out;
  for (double t = 0; t <= 120; t += 3.7) {
    clock.AdvanceTo(Clock::TimePoint{} + FromSeconds(t));
    for (int i = 0; i < 8; ++i) {
      auto s = sim.Sample(i);
      out.push_back(s ? fmt::format("{:.9f} {:.9f} {:.9f} {}", s->temperature_celsius,
                                    s->power_watts, s->utilisation_percent, s->hbm_used_bytes)
                      : s.error().message());
    }
  }
  return out;
}

TEST(SimBackendTest, SameSeedSameReadingsOtherSeedOtherReadings) {
  auto a = Readings("faults", 7);
  auto b = Readings("faults", 7);
  auto c = Readings("faults", 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The noise shows: readings of a busy device are not all the same.
  std::set<std::string> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), a.size() / 2);
}

TEST(SimBackendTest, NoiseStaysWithinItsAmplitude) {
  auto scenario = BuiltinScenario("default");  // temperature 52 +- 1, utilisation 88 +- 3
  ASSERT_THAT(scenario, IsOk());
  VirtualClock clock;
  SimBackend sim(std::move(*scenario), clock);
  for (int k = 0; k < 200; ++k) {
    clock.Advance(370ms);
    auto s = sim.Sample(k % 8);
    ASSERT_THAT(s, IsOk());
    EXPECT_NEAR(s->temperature_celsius, 52, 1.0 + 1e-9);
    EXPECT_NEAR(s->utilisation_percent, 88, 3.0 + 1e-9);
  }
}

TEST(SimBackendTest, TemperatureRamp) {
  Sim sim(R"(
  - {at: 10s, device: 1, kind: temperature_ramp, to: 90, over: 10s}
  - {at: 30s, device: 1, kind: temperature_ramp, to: 100, over: 20s}
  - {at: 35s, device: 1, kind: temperature_ramp, to: 60, over: 10s}
)");
  EXPECT_DOUBLE_EQ(sim.At(5, 1).temperature_celsius, 50);   // before
  EXPECT_DOUBLE_EQ(sim.At(15, 1).temperature_celsius, 70);  // half-way
  EXPECT_DOUBLE_EQ(sim.At(25, 1).temperature_celsius, 90);  // reached, holds
  EXPECT_DOUBLE_EQ(sim.At(32, 1).temperature_celsius, 91);  // second ramp, 1 C per 2 s
  // The third ramp starts from where the second had got to (92.5 C at 35 s).
  EXPECT_DOUBLE_EQ(sim.At(40, 1).temperature_celsius, 76.25);
  EXPECT_DOUBLE_EQ(sim.At(60, 1).temperature_celsius, 60);
  EXPECT_DOUBLE_EQ(sim.At(60, 0).temperature_celsius, 50);  // other devices untouched
}

TEST(SimBackendTest, HotDeviceThrottles) {
  Sim sim("  - {at: 0s, device: 0, kind: temperature_ramp, to: 96}\n");
  DeviceSample s = sim.At(1, 0);
  EXPECT_DOUBLE_EQ(s.temperature_celsius, 96);
  EXPECT_TRUE(s.throttled);
  EXPECT_EQ(s.health, Health::kWarning);
  EXPECT_LT(s.core_clock_mhz, 1800);
}

TEST(SimBackendTest, HbmLeakAndStep) {
  Sim sim(R"(
  - {at: 10s, device: 2, kind: hbm_leak, rate: 1GiB, duration: 5s}
  - {at: 20s, device: 2, kind: hbm_step, bytes: 8GiB}
  - {at: 30s, device: 2, kind: hbm_step, bytes: -3GiB}
  - {at: 40s, device: 3, kind: hbm_leak, rate: 10GiB}
)");
  EXPECT_EQ(sim.At(9, 2).hbm_used_bytes, 40 * kGiB);
  EXPECT_EQ(sim.At(12, 2).hbm_used_bytes, 42 * kGiB);
  EXPECT_EQ(sim.At(19, 2).hbm_used_bytes, 45 * kGiB);  // the leak stopped after 5 s
  EXPECT_EQ(sim.At(25, 2).hbm_used_bytes, 53 * kGiB);
  EXPECT_EQ(sim.At(31, 2).hbm_used_bytes, 50 * kGiB);
  EXPECT_EQ(sim.At(41, 3).hbm_used_bytes, 50 * kGiB);
  EXPECT_EQ(sim.At(100, 3).hbm_used_bytes, 64 * kGiB);  // never beyond the HBM there is
}

TEST(SimBackendTest, ErrorCodesRaiseAndClear) {
  Sim sim(R"(
  - {at: 10s, device: 1, kind: error_raise, code: 80CB8009, severity: minor}
  - {at: 20s, device: 1, kind: error_raise, code: 80E01801, severity: major, text: bad}
  - {at: 30s, device: 1, kind: error_clear, code: 80E01801}
  - {at: 40s, device: 1, kind: error_raise, code: 80E18005, severity: critical}
  - {at: 50s, device: 1, kind: error_clear}
)");
  EXPECT_EQ(sim.At(5, 1).health, Health::kOk);
  DeviceSample s = sim.At(15, 1);
  EXPECT_EQ(s.health, Health::kWarning);
  ASSERT_EQ(s.error_codes.size(), 1u);
  EXPECT_EQ(s.error_codes[0].code, "80CB8009");
  s = sim.At(25, 1);
  EXPECT_EQ(s.health, Health::kAlarm);
  ASSERT_EQ(s.error_codes.size(), 2u);
  EXPECT_EQ(s.error_codes[1].text, "bad");
  EXPECT_EQ(sim.At(35, 1).health, Health::kWarning);
  EXPECT_EQ(sim.At(45, 1).health, Health::kCritical);
  s = sim.At(55, 1);
  EXPECT_EQ(s.health, Health::kOk);
  EXPECT_TRUE(s.error_codes.empty());
}

TEST(SimBackendTest, LinksGoDownAndUpPerPort) {
  Sim sim(R"(
  - {at: 10s, device: 0, kind: link_down, port: 1, duration: 5s}
  - {at: 20s, device: 0, kind: link_down, port: 0}
  - {at: 30s, device: 0, kind: link_up, port: 0}
)");
  auto up = [&](double t, int port) { return sim.At(t, 0).links[port].up; };
  EXPECT_TRUE(up(9, 1));
  EXPECT_FALSE(up(12, 1));
  EXPECT_TRUE(up(12, 0));
  EXPECT_TRUE(up(15, 1));  // the flap is over
  EXPECT_FALSE(up(25, 0));
  EXPECT_TRUE(up(31, 0));
}

TEST(SimBackendTest, HangFreezesReadings) {
  Sim sim(R"(
  - {at: 10s, device: 0, kind: hang, utilisation: 0, duration: 20s}
  - {at: 10s, device: 1, kind: hang}
)",
          "");
  EXPECT_DOUBLE_EQ(sim.At(5, 0).utilisation_percent, 80);
  DeviceSample s = sim.At(15, 0);
  EXPECT_DOUBLE_EQ(s.utilisation_percent, 0);
  EXPECT_LT(s.power_watts, 300);  // an idle chip draws less
  EXPECT_DOUBLE_EQ(sim.At(25, 0).utilisation_percent, 0);
  EXPECT_DOUBLE_EQ(sim.At(31, 0).utilisation_percent, 80);  // the hang ended
}

TEST(SimBackendTest, HangWithoutValueFreezesTheNoisyReadings) {
  auto s = ParseScenarioText(R"(
devices: {count: 1, baseline: {utilisation: 80, hbm_used: 40GiB},
          noise: {utilisation: 5, power: 10, hbm_used: 1GiB}}
events: [{at: 10s, device: 0, kind: hang}]
)",
                             "h.yaml");
  ASSERT_THAT(s, IsOk());
  VirtualClock clock;
  SimBackend sim(std::move(*s), clock);
  clock.AdvanceTo(Clock::TimePoint(3s));
  auto before1 = sim.Sample(0);
  clock.AdvanceTo(Clock::TimePoint(7s));
  auto before2 = sim.Sample(0);
  ASSERT_THAT(before1, IsOk());
  ASSERT_THAT(before2, IsOk());
  EXPECT_NE(before1->hbm_used_bytes, before2->hbm_used_bytes);  // alive: it wobbles
  clock.AdvanceTo(Clock::TimePoint(12s));
  auto during1 = sim.Sample(0);
  clock.AdvanceTo(Clock::TimePoint(47s));
  auto during2 = sim.Sample(0);
  ASSERT_THAT(during1, IsOk());
  ASSERT_THAT(during2, IsOk());
  EXPECT_EQ(during1->hbm_used_bytes, during2->hbm_used_bytes);  // hung: flat
  EXPECT_DOUBLE_EQ(during1->utilisation_percent, during2->utilisation_percent);
  EXPECT_DOUBLE_EQ(during1->power_watts, during2->power_watts);
}

TEST(SimBackendTest, DeviceLostUntilReset) {
  Sim sim("  - {at: 10s, device: 2, kind: device_lost}\n",
          "  overrides: [{index: 2, reset: {duration: 5s, fail_first: 0}}]\n");
  EXPECT_THAT(sim.backend->Sample(2), IsOk());
  sim.clock.AdvanceTo(Clock::TimePoint(11s));
  EXPECT_THAT(sim.backend->Sample(2), HasCode(ErrorCode::kUnavailable, HasSubstr("NPU 2 is lost")));
  EXPECT_THAT(sim.backend->Sample(1), IsOk());
  EXPECT_THAT(sim.backend->ClearMemory(2), HasCode(ErrorCode::kUnavailable));
  sim.clock.set_auto_advance(true);  // Reset sleeps 5 s on the clock
  EXPECT_THAT(sim.backend->Reset(2), IsOk());
  EXPECT_EQ(sim.clock.Now(), Clock::TimePoint(16s));
  EXPECT_THAT(sim.backend->Sample(2), IsOk());
}

TEST(SimBackendTest, ResetTakesItsTimeFailsFirstKTimesThenClearsFaults) {
  Sim sim(R"(
  - {at: 1s, device: 3, kind: error_raise, code: 80E01801}
  - {at: 1s, device: 3, kind: link_down, port: 0}
  - {at: 1s, device: 3, kind: hbm_leak, rate: 1GiB}
  - {at: 1s, device: 3, kind: temperature_ramp, to: 80}
  - {at: 200s, device: 3, kind: error_raise, code: 80CB8009, severity: minor}
)");
  sim.clock.AdvanceTo(Clock::TimePoint(10s));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    SCOPED_TRACE(attempt);
    auto done = std::async(std::launch::async, [&] { return sim.backend->Reset(3); });
    ASSERT_TRUE(sim.clock.WaitForSleepers(1, 10000ms));
    sim.clock.Advance(19s);
    auto mid = sim.backend->Sample(3);
    ASSERT_THAT(mid, IsOk());
    EXPECT_EQ(mid->health, Health::kResetting);
    EXPECT_EQ(mid->hbm_used_bytes, 0u);
    EXPECT_THAT(sim.backend->Reset(3), HasCode(ErrorCode::kFailedPrecondition));
    EXPECT_THAT(sim.backend->ClearMemory(3), HasCode(ErrorCode::kFailedPrecondition));
    EXPECT_EQ(done.wait_for(0s), std::future_status::timeout);  // not before 20 s
    sim.clock.Advance(1s);
    Status st = done.get();
    auto after = sim.backend->Sample(3);
    ASSERT_THAT(after, IsOk());
    if (attempt <= 2) {
      EXPECT_THAT(st, HasCode(ErrorCode::kUnavailable, HasSubstr("reset failed (attempt")));
      EXPECT_EQ(after->health, Health::kAlarm);  // still faulty
      EXPECT_FALSE(after->links[0].up);
    } else {
      EXPECT_THAT(st, IsOk());
      EXPECT_EQ(after->health, Health::kOk);
      EXPECT_TRUE(after->error_codes.empty());
      EXPECT_TRUE(after->links[0].up);
      EXPECT_EQ(after->hbm_used_bytes, 40 * kGiB);
      EXPECT_DOUBLE_EQ(after->temperature_celsius, 50);
    }
  }
  // Events after the reset still happen.
  EXPECT_EQ(sim.At(201, 3).health, Health::kWarning);
}

TEST(SimBackendTest, ClearMemoryEndsLeaksAndSteps) {
  Sim sim(R"(
  - {at: 0s, device: 0, kind: hbm_leak, rate: 1GiB}
  - {at: 5s, device: 0, kind: hbm_step, bytes: 4GiB}
  - {at: 20s, device: 0, kind: hbm_step, bytes: 2GiB}
)");
  EXPECT_EQ(sim.At(10, 0).hbm_used_bytes, 54 * kGiB);
  EXPECT_THAT(sim.backend->ClearMemory(0), IsOk());
  EXPECT_EQ(sim.At(10, 0).hbm_used_bytes, 40 * kGiB);
  EXPECT_EQ(sim.At(15, 0).hbm_used_bytes, 40 * kGiB);
  EXPECT_EQ(sim.At(21, 0).hbm_used_bytes, 42 * kGiB);  // a later step still counts
  EXPECT_THAT(sim.backend->ClearMemory(9), HasCode(ErrorCode::kNotFound));
}

TEST(SimBackendTest, UnsupportedOperationsSaySoAndWhatToDo) {
  Sim sim("", "unsupported: [reset, clear_memory, fault_events]\n");
  EXPECT_THAT(sim.backend->Reset(0),
              HasCode(ErrorCode::kUnimplemented, HasSubstr("backend 'sim' cannot reset devices")));
  EXPECT_THAT(sim.backend->Reset(0), HasCode(ErrorCode::kUnimplemented, HasSubstr("npu-smi")));
  EXPECT_THAT(sim.backend->ClearMemory(0),
              HasCode(ErrorCode::kUnimplemented, HasSubstr("cannot clear device memory")));
  EXPECT_THAT(sim.backend->SubscribeFaults([](const FaultEvent&) {}),
              HasCode(ErrorCode::kUnimplemented, HasSubstr("poll Sample()")));
}

// A backend that implements only what every backend must.
class MinimalBackend : public DeviceBackend {
 public:
  std::string_view name() const override { return "minimal"; }
  Result<std::vector<DeviceInfo>> Enumerate() override { return std::vector<DeviceInfo>{}; }
  Result<DeviceSample> Sample(int) override { return NotFound("none"); }
};

TEST(DeviceBackendTest, DefaultsAreUnimplementedWithAdvice) {
  MinimalBackend b;
  EXPECT_THAT(b.Reset(0), HasCode(ErrorCode::kUnimplemented,
                                  HasSubstr("backend 'minimal' cannot reset devices: reset with")));
  EXPECT_THAT(b.ClearMemory(0),
              HasCode(ErrorCode::kUnimplemented, HasSubstr("stop the processes")));
  EXPECT_THAT(b.SubscribeFaults([](const FaultEvent&) {}), HasCode(ErrorCode::kUnimplemented));
  EXPECT_EQ(b.Describe(), "minimal");
}

class FaultLog {
 public:
  void Add(const FaultEvent& e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  // Waits (real time, bounded) until n events arrived; returns them.
  std::vector<FaultEvent> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FaultEvent> events_;
};

TEST(SimBackendTest, FaultEventsArriveWhenTheyHappen) {
  Sim sim(R"(
  - {at: 10s, device: 1, kind: error_raise, code: 80E01801, severity: critical, text: HBM}
  - {at: 20s, device: 2, kind: link_down, port: 1, duration: 5s}
  - {at: 30s, device: 3, kind: ecc_errors, double_bit: 2}
  - {at: 40s, device: 0, kind: device_lost}
  - {at: 50s, device: 1, kind: error_clear}
  - {at: 60s, device: 1, kind: temperature_ramp, to: 90}
)");
  FaultLog log;
  auto sub = sim.backend->SubscribeFaults([&](const FaultEvent& e) { log.Add(e); });
  ASSERT_THAT(sub, IsOk());
  sim.clock.AdvanceTo(Clock::TimePoint(15s));
  auto events = log.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, FaultKind::kErrorRaised);
  EXPECT_EQ(events[0].index, 1);
  EXPECT_EQ(events[0].code, "80E01801");
  EXPECT_EQ(events[0].time, Clock::TimePoint(10s));
  EXPECT_THAT(events[0].message, HasSubstr("NPU 1: error code 80E01801 (critical): HBM"));

  sim.clock.AdvanceTo(Clock::TimePoint(100s));
  events = log.WaitFor(6);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[1].kind, FaultKind::kLinkDown);
  EXPECT_EQ(events[1].port, 1);
  EXPECT_EQ(events[2].kind, FaultKind::kLinkUp);  // the flap ends by itself
  EXPECT_EQ(events[2].time, Clock::TimePoint(25s));
  EXPECT_EQ(events[3].kind, FaultKind::kEccErrors);
  EXPECT_EQ(events[4].kind, FaultKind::kDeviceLost);
  EXPECT_EQ(events[5].kind, FaultKind::kErrorCleared);

  // Resets report themselves too.
  sub->Cancel();
  FaultLog log2;
  auto sub2 = sim.backend->SubscribeFaults([&](const FaultEvent& e) { log2.Add(e); });
  ASSERT_THAT(sub2, IsOk());
  sim.clock.set_auto_advance(true);
  EXPECT_THAT(sim.backend->Reset(0), HasCode(ErrorCode::kUnavailable));  // fails first 2
  events = log2.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, FaultKind::kResetFailed);
  // Publishing is synchronous, so the cancelled subscription would have heard it by now.
  EXPECT_EQ(log.WaitFor(6).size(), 6u);
}

}  // namespace
}  // namespace anxin::device::sim
