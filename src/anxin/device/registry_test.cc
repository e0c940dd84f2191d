#include "anxin/device/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin::device {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(RegistryTest, SimIsTheDefaultAndRunsTheDefaultScenario) {
  EXPECT_EQ(kDefaultBackend, "sim");
  VirtualClock clock;
  auto b = CreateBackend("sim", {.scenario = "", .clock = &clock});
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->name(), "sim");
  auto devices = (*b)->Enumerate();
  ASSERT_THAT(devices, IsOk());
  EXPECT_EQ(devices->size(), 8u);
}

TEST(RegistryTest, UnknownBackendListsTheKnownOnes) {
  EXPECT_THAT(CreateBackend("nvlm", {}),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("unknown device backend 'nvlm' (known: ascend, nvml, sim")));
}

TEST(RegistryTest, BadScenarioComesBackFromTheFactory) {
  EXPECT_THAT(CreateBackend("sim", {.scenario = "/no/such/file.yaml", .clock = nullptr}),
              HasCode(ErrorCode::kNotFound, HasSubstr("/no/such/file.yaml")));
}

TEST(RegistryTest, FlagsWinOverTheConfigurationWhichWinsOverTheDefault) {
  VirtualClock clock;
  GlobalConfig config;
  config.device.backend = "";
  config.device.scenario = "/no/such/config-scenario.yaml";
  // No flag: the configuration's scenario is used (and fails to load).
  EXPECT_THAT(CreateConfiguredBackend("", "", config, &clock),
              HasCode(ErrorCode::kNotFound, HasSubstr("config-scenario.yaml")));
  // The flag's scenario over the configuration's; an empty backend is sim.
  EXPECT_THAT(CreateConfiguredBackend("", "/no/such/flag-scenario.yaml", config, &clock),
              HasCode(ErrorCode::kNotFound, HasSubstr("flag-scenario.yaml")));
  config.device.scenario = "";
  auto b = CreateConfiguredBackend("", "", config, &clock);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->name(), "sim");
  config.device.backend = "nvlm";
  EXPECT_THAT(CreateConfiguredBackend("", "", config, &clock),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("'nvlm'")));
  EXPECT_THAT(CreateConfiguredBackend("simm", "", config, &clock),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("'simm'")));
}

class FixedBackend : public DeviceBackend {
 public:
  std::string_view name() const override { return "fixed"; }
  Result<std::vector<DeviceInfo>> Enumerate() override {
    return std::vector<DeviceInfo>{DeviceInfo{}};
  }
  Result<DeviceSample> Sample(int) override { return DeviceSample{}; }
};

TEST(RegistryTest, BackendsRegisterByName) {
  RegisterBackend("fixed", "one fixed device", [](const BackendOptions&) {
    return Result<std::unique_ptr<DeviceBackend>>(std::make_unique<FixedBackend>());
  });
  auto b = CreateBackend("fixed", {});
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->name(), "fixed");
  // Sorted by name, beside the backends this build has (sim, nvml, ascend).
  std::vector<std::string> names;
  for (const auto& b : RegisteredBackends()) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ascend", "fixed", "nvml", "sim"}));
}

}  // namespace
}  // namespace anxin::device
