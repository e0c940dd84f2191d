// The nvml backend against the fake libnvidia-ml.so.1 (fake_nvml/fake_nvml.c)
// and a fake nvidia-smi: readings, fields a GPU does not support, a lost GPU,
// XID events, and resets refused while a process runs.
#include "anxin/device/nvml/nvml_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <mutex>

#include "anxin/base/testing.h"

namespace anxin::device::nvml {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("ANXIN_FAKE_NVML_SCENARIO", SourcePath("tests/device/fake_nvml/h200-node.txt").c_str(),
           1);
    setenv("ANXIN_FAKE_NVIDIA_SMI_LOG", (dir_ / "nvidia-smi.log").c_str(), 1);
    unsetenv("ANXIN_FAKE_NVIDIA_SMI_EXIT");
  }

  Result<std::unique_ptr<DeviceBackend>> Make() {
    return MakeNvmlBackend({.library = FAKE_NVML_LIBRARY,
                            .nvidia_smi = SourcePath("tests/device/fake_nvml/nvidia-smi"),
                            .reset_timeout = std::chrono::seconds(10),
                            .event_wait = std::chrono::milliseconds(20)},
                           clock_);
  }

  VirtualClock clock_;
  TempDir dir_;
};

TEST_F(NvmlBackendTest, EnumeratesWhatTheDriverReports) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  auto devices = (*b)->Enumerate();
  ASSERT_THAT(devices, IsOk());
  ASSERT_EQ(devices->size(), 4u);
  const DeviceInfo& d0 = (*devices)[0];
  EXPECT_EQ(d0.model, "H200");
  EXPECT_EQ(d0.vendor, "nvidia");
  EXPECT_EQ(d0.uuid, "GPU-1f0c2a55-0b7e-4c59-9d0e-6a1c2b3d4e01");
  EXPECT_EQ(d0.pci_bus_id, "0000:19:00.0");
  EXPECT_EQ(d0.hbm_total_bytes, 150754820096ull);
  EXPECT_EQ(d0.tdp_watts, 700);
  EXPECT_EQ(d0.throttle_celsius, 87);
  // No power limit reported: the model table's nominal figure.
  EXPECT_EQ((*devices)[1].tdp_watts, 700);
  EXPECT_EQ((*b)->Describe(), "nvml (4 x H200)");
}

TEST_F(NvmlBackendTest, SamplesConvertUnits) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  auto s = (*b)->Sample(0);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->hbm_used_bytes, 86973087744ull);
  EXPECT_EQ(s->temperature_celsius, 41);
  EXPECT_DOUBLE_EQ(s->power_watts, 512.345);  // from milliwatts
  EXPECT_EQ(s->utilisation_percent, 97);
  EXPECT_EQ(s->core_clock_mhz, 1980);
  EXPECT_EQ(s->memory_clock_mhz, 3201);
  EXPECT_FALSE(s->throttled);  // power cap only: not a slowdown
  EXPECT_EQ(s->health, Health::kOk);
  EXPECT_EQ(s->links.size(), 18u);
  EXPECT_EQ(s->ecc.single_bit, 0u);
  EXPECT_EQ(s->ecc.double_bit, 0u);
}

TEST_F(NvmlBackendTest, UnsupportedFieldsAreLeftOut) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  auto s = (*b)->Sample(1);
  ASSERT_THAT(s, IsOk());
  EXPECT_FALSE(Reported(s->power_watts));
  EXPECT_FALSE(Reported(s->ecc.single_bit));
  EXPECT_FALSE(Reported(s->ecc.double_bit));
  EXPECT_TRUE(Reported(s->temperature_celsius));
  EXPECT_EQ(s->temperature_celsius, 33);
}

TEST_F(NvmlBackendTest, LostGpuIsUnavailableAndReportedOnce) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  std::mutex mu;
  std::vector<FaultEvent> events;
  auto sub = (*b)->SubscribeFaults([&](const FaultEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });
  ASSERT_THAT(sub, IsOk());
  EXPECT_THAT((*b)->Sample(2),
              HasCode(ErrorCode::kUnavailable, HasSubstr("GPU 2: lost (NVML_ERROR_GPU_IS_LOST)")));
  EXPECT_THAT((*b)->Sample(2), HasCode(ErrorCode::kUnavailable));
  EXPECT_THAT((*b)->Sample(9), HasCode(ErrorCode::kNotFound, HasSubstr("GPU 9 does not exist")));
  sub->Cancel();
  std::lock_guard lock(mu);
  int lost = 0;
  for (const FaultEvent& e : events) lost += e.kind == FaultKind::kDeviceLost && e.index == 2;
  EXPECT_EQ(lost, 1);
}

TEST_F(NvmlBackendTest, XidEventsBecomeFaultsAndErrorCodes) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<FaultEvent> events;
  auto sub = (*b)->SubscribeFaults([&](const FaultEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
    cv.notify_all();
  });
  ASSERT_THAT(sub, IsOk());
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return events.size() >= 2; }));
    EXPECT_EQ(events[0].index, 3);
    EXPECT_EQ(events[0].kind, FaultKind::kErrorRaised);
    EXPECT_EQ(events[0].code, "Xid 74");
    EXPECT_THAT(events[0].message, HasSubstr("NVLink"));
    EXPECT_EQ(events[1].code, "Xid 63");
  }
  auto s = (*b)->Sample(3);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->error_codes.size(), 2u);
  EXPECT_EQ(s->health, Health::kAlarm);
  EXPECT_TRUE(s->throttled);  // 0x60: software and hardware thermal slowdown
  EXPECT_FALSE(s->links[5].up);
  EXPECT_EQ(s->ecc.single_bit, 12u);
}

TEST_F(NvmlBackendTest, ResetIsRefusedWhileAProcessRuns) {
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT((*b)->Reset(0),
              HasCode(ErrorCode::kFailedPrecondition, HasSubstr("while 1 process(es) run")));
  EXPECT_THAT((*b)->ClearMemory(0), HasCode(ErrorCode::kFailedPrecondition));
  ASSERT_THAT((*b)->Reset(1), IsOk());
  EXPECT_EQ(ReadTextFile(dir_ / "nvidia-smi.log"), "-r -i 1\n");
}

TEST_F(NvmlBackendTest, FailedResetSaysWhatTheToolSaid) {
  setenv("ANXIN_FAKE_NVIDIA_SMI_EXIT", "3", 1);
  auto b = Make();
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT((*b)->Reset(3), HasCode(ErrorCode::kUnavailable,
                                      HasSubstr("nvidia-smi -r -i 3 exited 3: Unable to reset")));
}

TEST_F(NvmlBackendTest, MissingLibraryOrDriverIsUnavailableWithAdvice) {
  auto missing = MakeNvmlBackend({.library = "/nonexistent/libnvidia-ml.so.1"}, clock_);
  EXPECT_THAT(missing, HasCode(ErrorCode::kUnavailable, HasSubstr("install the NVIDIA driver")));
  TempDir dir;
  setenv("ANXIN_FAKE_NVML_SCENARIO", dir.Write("s.txt", "init 9\n").c_str(), 1);
  EXPECT_THAT(Make(), HasCode(ErrorCode::kUnavailable,
                              HasSubstr("nvmlInit failed: Driver Not Loaded (nvmlReturn_t 9)")));
}

}  // namespace
}  // namespace anxin::device::nvml
