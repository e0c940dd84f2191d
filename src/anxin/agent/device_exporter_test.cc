#include "anxin/agent/device_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "anxin/base/testing.h"
#include "anxin/device/ascend/ascend_backend.h"
#include "anxin/device/ascend/npu_smi_testing.h"
#include "anxin/device/registry.h"

namespace anxin::agent {
namespace {

using ::anxin::testing::Value;
using ::anxin::testing::WaitFor;

using namespace std::chrono_literals;
using device::DeviceInfo;
using device::DeviceSample;
using ::testing::HasSubstr;
using ::testing::Not;

// Labels of device i of the sim's faults scenario, as the exporter writes them.
std::string Labels(const DeviceExporter& e, int i, std::string more = "") {
  const DeviceInfo& d = e.devices()[static_cast<size_t>(i)];
  return "{node=\"n1\",device=\"" + std::to_string(i) + "\",uuid=\"" + d.uuid + "\",model=\"" +
         d.model + "\",bus_id=\"" + d.pci_bus_id + "\",numa_node=\"" + std::to_string(d.numa_node) +
         "\"" + more + "}";
}

// A backend whose readings the test sets, without fault events.
class FakeBackend final : public device::DeviceBackend {
 public:
  std::string_view name() const override { return "fake"; }
  Result<std::vector<DeviceInfo>> Enumerate() override {
    DeviceInfo d;
    d.index = 0;
    d.uuid = "GPU-1";
    d.model = "H100";
    d.vendor = "nvidia";
    d.pci_bus_id = "0000:18:00.0";
    d.numa_node = -1;
    d.hbm_total_bytes = 80ull << 30;
    d.throttle_celsius = 0;  // not known
    return std::vector<DeviceInfo>{d};
  }
  Result<DeviceSample> Sample(int index) override {
    std::lock_guard lock(mu);
    if (delay > 0ms) std::this_thread::sleep_for(delay);
    ++samples;
    if (!sample) return Unavailable("GPU 0 has fallen off the bus");
    DeviceSample s = *sample;
    s.index = index;
    return s;
  }
  std::mutex mu;
  std::optional<DeviceSample> sample = DeviceSample{};
  std::chrono::milliseconds delay{0};
  int samples = 0;
};

std::string Text(const monitor::Registry& r, const DeviceExporter& e) {
  std::string out = r.TextExposition();
  e.WriteText(out);
  return out;
}

TEST(DeviceExporterTest, SimFaultsScenarioOnAVirtualClock) {
  VirtualClock clock(Clock::TimePoint{} + 100000s);
  auto backend = device::CreateBackend(
      "sim", {.scenario = ::anxin::testing::SourcePath("examples/scenarios/faults.yaml"),
              .clock = &clock});
  ASSERT_TRUE(backend.has_value()) << backend.error().ToString();
  monitor::Registry registry;
  auto e = DeviceExporter::Create(**backend, registry, {.node = "n1", .clock = &clock});
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  DeviceExporter& x = **e;
  ASSERT_EQ(x.devices().size(), 8u);
  EXPECT_TRUE(x.fault_events());
  EXPECT_EQ(x.snapshot(), nullptr);
  EXPECT_THAT(Text(registry, x), Not(HasSubstr("anxin_device_up{")));

  x.SampleOnce();
  std::string t = Text(registry, x);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Value(t, "anxin_device_up" + Labels(x, i)), 1) << i;
  EXPECT_EQ(Value(t, "anxin_device_info" + Labels(x, 0, ",vendor=\"huawei\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_health" + Labels(x, 0, ",state=\"ok\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_health" + Labels(x, 0, ",state=\"critical\"")), 0);
  const double used = *Value(t, "anxin_device_memory_used_bytes" + Labels(x, 1));
  const double total = *Value(t, "anxin_device_memory_total_bytes" + Labels(x, 1));
  EXPECT_NEAR(used, 50.0 * (1ull << 30), 1e9);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_device_memory_used_ratio" + Labels(x, 1)), used / total);
  EXPECT_NEAR(*Value(t, "anxin_device_utilization_ratio" + Labels(x, 2)), 0.85, 0.1);
  EXPECT_EQ(Value(t, "anxin_device_link_up" + Labels(x, 4, ",port=\"1\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_fault_events_total" + Labels(x, 4, ",kind=\"link_down\"")), 0);

  // 75 s in: NPU 3 has its ECC errors and critical code, NPU 4 lost port 1,
  // NPU 7 fell off the bus, NPU 6 raised a minor code.
  clock.Advance(75s);
  ASSERT_TRUE(WaitFor([&] {
    return Value(Text(registry, x),
                 "anxin_device_fault_events_total" + Labels(x, 7, ",kind=\"device_lost\"")) == 1;
  }));
  x.SampleOnce();
  t = Text(registry, x);
  EXPECT_EQ(Value(t, "anxin_device_up" + Labels(x, 7)), 0);
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + Labels(x, 7)), std::nullopt);
  EXPECT_EQ(Value(t, "anxin_device_health" + Labels(x, 7, ",state=\"ok\"")), std::nullopt);
  EXPECT_EQ(Value(t, "anxin_device_memory_total_bytes" + Labels(x, 7)), 64.0 * (1ull << 30));
  EXPECT_EQ(Value(t, "anxin_device_sample_errors_total" + Labels(x, 7)), 1);
  EXPECT_EQ(Value(t, "anxin_device_health" + Labels(x, 3, ",state=\"critical\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_error_codes_total" +
                         Labels(x, 3, ",code=\"80E18005\",severity=\"critical\"")),
            1);
  EXPECT_EQ(Value(t, "anxin_device_ecc_errors_total" + Labels(x, 3, ",type=\"double_bit\"")), 2);
  EXPECT_EQ(Value(t, "anxin_device_ecc_errors_total" + Labels(x, 3, ",type=\"single_bit\"")), 12);
  EXPECT_EQ(Value(t, "anxin_device_link_up" + Labels(x, 4, ",port=\"1\"")), 0);
  EXPECT_EQ(Value(t, "anxin_device_link_flaps_total" + Labels(x, 4, ",port=\"0\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_link_flaps_total" + Labels(x, 4, ",port=\"1\"")), 1);
  EXPECT_EQ(Value(t, "anxin_device_health" + Labels(x, 6, ",state=\"warning\"")), 1);

  // Sampling again counts nothing twice: counters move only on change.
  x.SampleOnce();
  t = Text(registry, x);
  EXPECT_EQ(Value(t, "anxin_device_error_codes_total" +
                         Labels(x, 3, ",code=\"80E18005\",severity=\"critical\"")),
            1);
  EXPECT_EQ(Value(t, "anxin_device_ecc_errors_total" + Labels(x, 3, ",type=\"double_bit\"")), 2);
  EXPECT_EQ(Value(t, "anxin_device_sample_errors_total" + Labels(x, 7)), 2);
  EXPECT_EQ(x.passes(), 3u);
}

TEST(DeviceExporterTest, UnreportedValuesAndLostDevicesAreLeftOut) {
  FakeBackend fake;
  DeviceSample s;
  s.hbm_used_bytes = 20ull << 30;
  s.temperature_celsius = 61;
  s.power_watts = device::kNotReported;
  s.utilisation_percent = 40;
  s.core_clock_mhz = device::kNotReported;
  s.memory_clock_mhz = 1593;
  fake.sample = s;
  monitor::Registry registry;
  VirtualClock clock;
  auto e = DeviceExporter::Create(fake, registry, {.node = "n1", .clock = &clock});
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE((*e)->fault_events());
  (*e)->SampleOnce();
  std::string t = Text(registry, **e);
  const std::string l =
      R"({node="n1",device="0",uuid="GPU-1",model="H100",bus_id="0000:18:00.0",numa_node=""})";
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + l), 61);
  EXPECT_EQ(Value(t, "anxin_device_memory_clock_hertz" + l), 1593e6);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_device_utilization_ratio" + l), 0.4);
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_power_watts")));
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_core_clock_hertz")));
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_throttle_temperature_celsius")));
  EXPECT_THAT(t, Not(HasSubstr("NaN")));

  {
    std::lock_guard lock(fake.mu);
    fake.sample.reset();
  }
  (*e)->SampleOnce();
  t = Text(registry, **e);
  EXPECT_EQ(Value(t, "anxin_device_up" + l), 0);
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_temperature_celsius")));
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_memory_used_bytes")));
  // The JSON view of the snapshot says why.
  auto snap = (*e)->snapshot();
  ASSERT_NE(snap, nullptr);
  ASSERT_FALSE(snap->rows[0].sample.has_value());
  EXPECT_THAT(snap->rows[0].sample.error().message(), HasSubstr("fallen off the bus"));
}

// The `npu-smi info` capture of a 16 x 910B2C node cut to NPUs 0 and 1.
std::string TwoNpuCapture() {
  return ::anxin::device::ascend::testing::FirstNpus(
      ::anxin::testing::ReadTextFile(
          ::anxin::testing::FixturePath("ascend/npu-smi-info-16x910B2C-busy.txt")),
      2, /*drop_device_rules=*/false);
}

std::string Replace(std::string text, std::string_view from, std::string_view to) {
  size_t at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// A reading the ascend backend refuses (an npu-smi table whose rows do not
// fit, or a chip that moved to another Bus-Id) is the device's up 0 and one
// log line, never numbers from a neighbouring device's rows.
TEST(DeviceExporterTest, ARefusedReadingIsDownAndLoggedNeverANeighboursNumbers) {
  ::anxin::testing::TempDir dir;
  const std::string capture = TwoNpuCapture();
  dir.Write("info.txt", capture);
  const std::string npu_smi =
      dir.Write("npu-smi", "#!/bin/sh\n[ \"$*\" = info ] && exec cat '" + (dir / "info.txt") +
                               "'\necho \"unsupported: $*\" >&2; exit 2\n");
  ASSERT_EQ(::chmod(npu_smi.c_str(), 0755), 0);
  VirtualClock clock;
  auto backend = device::ascend::MakeAscendBackend({.dcmi_library = "/nonexistent/libdcmi.so",
                                                    .npu_smi = npu_smi,
                                                    .hccn_tool = "/nonexistent/hccn_tool"},
                                                   clock);
  ASSERT_TRUE(backend.has_value()) << backend.error().ToString();
  monitor::Registry registry;
  auto e = DeviceExporter::Create(**backend, registry, {.node = "n1", .clock = &clock});
  ASSERT_TRUE(e.has_value());
  ASSERT_EQ((*e)->devices().size(), 2u);
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  struct Unhook {
    ~Unhook() { spdlog::default_logger()->sinks().pop_back(); }
  } unhook;
  auto sample = [&] {
    clock.Advance(2s);  // npu-smi is run again at most once a second
    (*e)->SampleOnce();
    return Text(registry, **e);
  };
  // No NUMA node outside a real node's sysfs: the label is empty.
  auto labels = [&](int i) {
    const DeviceInfo& d = (*e)->devices()[static_cast<size_t>(i)];
    EXPECT_EQ(d.numa_node, -1);
    return "{node=\"n1\",device=\"" + std::to_string(i) + "\",uuid=\"" + d.uuid + "\",model=\"" +
           d.model + "\",bus_id=\"" + d.pci_bus_id + "\",numa_node=\"\"}";
  };
  std::string t = sample();
  EXPECT_EQ(Value(t, "anxin_device_up" + labels(0)), 1);
  EXPECT_EQ(Value(t, "anxin_device_up" + labels(1)), 1);
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + labels(0)), 35);
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + labels(1)), 37);
  EXPECT_EQ(log.str(), "");

  // NPU 1's Chip row lost: the whole table is refused, for both devices.
  const std::string chip1 = "| 0                         | 0000:19:00.0";
  const size_t at = capture.find(chip1);
  ASSERT_NE(at, std::string::npos);
  dir.Write("info.txt", capture.substr(0, at) + capture.substr(capture.find('\n', at) + 1));
  t = sample();
  for (int i : {0, 1}) {
    EXPECT_EQ(Value(t, "anxin_device_up" + labels(i)), 0) << i;
    EXPECT_EQ(Value(t, "anxin_device_sample_errors_total" + labels(i)), 1) << i;
  }
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_temperature_celsius")));
  EXPECT_THAT(t, Not(HasSubstr("anxin_device_power_watts")));
  EXPECT_THAT(log.str(), HasSubstr("agent: device 1: sample refused, reported as down: NPU 1: "
                                   "npu-smi info: line 10: NPU 1 has no Chip/Bus-Id row after it"));
  // The same reason again is not logged again.
  const std::string once = log.str();
  t = sample();
  EXPECT_EQ(Value(t, "anxin_device_sample_errors_total" + labels(1)), 2);
  EXPECT_EQ(log.str(), once);

  // A table that reads, but lists NPU 1 at another Bus-Id: NPU 1 is down,
  // NPU 0 is read.
  dir.Write("info.txt", Replace(capture, "0000:19:00.0", "0000:1A:00.0"));
  t = sample();
  EXPECT_EQ(Value(t, "anxin_device_up" + labels(0)), 1);
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + labels(0)), 35);
  EXPECT_EQ(Value(t, "anxin_device_up" + labels(1)), 0);
  EXPECT_FALSE(Value(t, "anxin_device_temperature_celsius" + labels(1)).has_value());
  EXPECT_THAT(log.str(), HasSubstr("agent: device 1: sample refused, reported as down: NPU 1: "
                                   "npu-smi info now lists card 1 chip 0 at Bus-Id 0000:1A:00.0"));
  EXPECT_THAT(log.str(), HasSubstr("agent: device 0: sampled again after: NPU 0: npu-smi info: "
                                   "line 10"));

  dir.Write("info.txt", capture);
  t = sample();
  EXPECT_EQ(Value(t, "anxin_device_up" + labels(1)), 1);
  EXPECT_EQ(Value(t, "anxin_device_temperature_celsius" + labels(1)), 37);
}

TEST(DeviceExporterTest, WithoutFaultEventsFlapsAreInferredFromSamples) {
  FakeBackend fake;
  DeviceSample s;
  s.links = {{.port = 0, .up = true}, {.port = 1, .up = true}};
  s.error_codes = {{.code = "79", .severity = device::Severity::kCritical, .text = ""}};
  fake.sample = s;
  monitor::Registry registry;
  VirtualClock clock;
  auto e = DeviceExporter::Create(fake, registry, {.node = "n1", .clock = &clock});
  ASSERT_TRUE(e.has_value());
  auto set = [&](bool up0, bool with_code) {
    std::lock_guard lock(fake.mu);
    fake.sample->links[0].up = up0;
    if (!with_code)
      fake.sample->error_codes.clear();
    else
      fake.sample->error_codes = s.error_codes;
  };
  (*e)->SampleOnce();
  set(false, false);
  (*e)->SampleOnce();
  set(true, true);
  (*e)->SampleOnce();
  set(false, true);
  (*e)->SampleOnce();
  const std::string t = Text(registry, **e);
  const std::string l =
      R"({node="n1",device="0",uuid="GPU-1",model="H100",bus_id="0000:18:00.0",numa_node="")";
  EXPECT_EQ(Value(t, "anxin_device_link_flaps_total" + l + R"(,port="0"})"), 2);
  EXPECT_EQ(Value(t, "anxin_device_link_flaps_total" + l + R"(,port="1"})"), 0);
  // XID 79 appeared twice (raised, cleared, raised): each raise counts.
  EXPECT_EQ(Value(t, "anxin_device_error_codes_total" + l + R"(,code="79",severity="critical"})"),
            2);
}

TEST(DeviceExporterTest, CompatibilityNames) {
  FakeBackend fake;
  DeviceSample s;
  s.hbm_used_bytes = 10ull << 30;
  s.temperature_celsius = 70;
  s.power_watts = 350;
  s.utilisation_percent = 90;
  s.health = device::Health::kAlarm;
  s.error_codes = {{.code = "48", .severity = device::Severity::kMajor, .text = ""}};
  fake.sample = s;
  VirtualClock clock;
  {
    monitor::Registry registry;
    auto e = DeviceExporter::Create(fake, registry,
                                    {.node = "n1", .clock = &clock, .compat = Compat::kDcgm});
    ASSERT_TRUE(e.has_value());
    (*e)->SampleOnce();
    const std::string t = Text(registry, **e);
    const std::string d =
        R"({gpu="0",UUID="GPU-1",pci_bus_id="0000:18:00.0",device="nvidia0",modelName="H100",Hostname="n1"})";
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_GPU_TEMP" + d), 70);
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_POWER_USAGE" + d), 350);
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_GPU_UTIL" + d), 90);
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_FB_USED" + d), 10240);  // MiB
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_FB_FREE" + d), 71680);
    EXPECT_EQ(Value(t, "DCGM_FI_DEV_XID_ERRORS" + d), 48);
    EXPECT_THAT(t, HasSubstr("anxin_device_temperature_celsius{"));  // ours stay
  }
  {
    monitor::Registry registry;
    auto e = DeviceExporter::Create(
        fake, registry, {.node = "n1", .clock = &clock, .compat = Compat::kNpuExporter});
    ASSERT_TRUE(e.has_value());
    (*e)->SampleOnce();
    const std::string t = Text(registry, **e);
    const std::string n =
        R"({id="0",model_name="H100",vdie_id="GPU-1",pcie_bus_info="0000:18:00.0"})";
    EXPECT_EQ(Value(t, "npu_chip_info_temperature" + n), 70);
    EXPECT_EQ(Value(t, "npu_chip_info_hbm_used_memory" + n), 10240);  // MB
    EXPECT_EQ(Value(t, "npu_chip_info_hbm_total_memory" + n), 81920);
    EXPECT_EQ(Value(t, "npu_chip_info_utilization" + n), 90);
    EXPECT_EQ(Value(t, "npu_chip_info_health_status" + n), 0);
    EXPECT_THAT(t, Not(HasSubstr("DCGM_")));
  }
  EXPECT_FALSE(ParseCompat("prometheus").has_value());
  EXPECT_EQ(ParseCompat("npu-exporter").value(), Compat::kNpuExporter);
}

TEST(DeviceExporterTest, TheLoopSamplesEveryIntervalAndCountsOverruns) {
  FakeBackend fake;
  monitor::Registry registry;
  VirtualClock clock;
  auto e = DeviceExporter::Create(fake, registry, {.node = "n1", .clock = &clock, .interval = 10s});
  ASSERT_TRUE(e.has_value());
  (*e)->Start();
  ASSERT_TRUE(clock.WaitForSleepers(1, 5s));
  EXPECT_EQ((*e)->passes(), 1u);
  clock.Advance(10s);
  ASSERT_TRUE(WaitFor([&] { return (*e)->passes() == 2; }));
  ASSERT_TRUE(clock.WaitForSleepers(1, 5s));
  // Not yet due: the loop stays asleep (a virtual clock wakes a sleeper only
  // once its deadline has come), and is due again 10 s after the last pass.
  clock.Advance(5s);
  EXPECT_EQ(clock.sleepers(), 1);
  EXPECT_EQ((*e)->passes(), 2u);
  clock.Advance(5s);
  ASSERT_TRUE(WaitFor([&] { return (*e)->passes() == 3; }));
  ASSERT_TRUE(clock.WaitForSleepers(1, 5s));
  (*e)->Stop();
  EXPECT_EQ((*e)->overruns(), 0u);
  // A pass slower than the interval (a device read that hangs) is an overrun.
  monitor::Registry registry2;
  auto slow =
      DeviceExporter::Create(fake, registry2, {.node = "n1", .clock = &clock, .interval = 5ms});
  ASSERT_TRUE(slow.has_value());
  fake.delay = 20ms;
  (*slow)->SampleOnce();
  EXPECT_EQ((*slow)->overruns(), 1u);
  EXPECT_EQ(Value(registry2.TextExposition(), R"(anxin_agent_sample_overruns_total{node="n1"})"),
            1);
}

}  // namespace
}  // namespace anxin::agent
