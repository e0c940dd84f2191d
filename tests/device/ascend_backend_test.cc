// The ascend backend's npu-smi fallback against fake npu-smi and hccn_tool
// scripts (fake_ascend/) that print the real captures of
// tests/fixtures/ascend/: enumeration, readings, resets and the health poll.
#include "anxin/device/ascend/ascend_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "anxin/base/testing.h"

namespace anxin::device::ascend {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::SourcePath;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

class AscendBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("ANXIN_FAKE_ASCEND_DIR", dir_.path().c_str(), 1);
    clock_.set_auto_advance(true);  // the health poll's sleeps pass at once
  }

  void UseCapture(const char* name) {
    dir_.Write("info.txt", ReadTextFile(FixturePath(std::string("ascend/") + name)));
  }

  AscendOptions Options() {
    return {.dcmi_library = "/nonexistent/libdcmi.so",
            .npu_smi = SourcePath("tests/device/fake_ascend/npu-smi"),
            .hccn_tool = SourcePath("tests/device/fake_ascend/hccn_tool"),
            .command_timeout = std::chrono::seconds(10),
            .reset_timeout = std::chrono::seconds(10),
            .poll_interval = std::chrono::seconds(5),
            .poll_timeout = std::chrono::seconds(20)};
  }

  std::string Calls() { return ReadTextFile(dir_ / "calls.log"); }

  TempDir dir_;
  VirtualClock clock_;
};

TEST_F(AscendBackendTest, EnumeratesTheChipsNpuSmiLists) {
  UseCapture("npu-smi-info-16x910B2C-busy.txt");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  auto devices = (*b)->Enumerate();
  ASSERT_THAT(devices, IsOk());
  ASSERT_EQ(devices->size(), 16u);
  EXPECT_EQ((*devices)[0].model, "Ascend910B2C");
  EXPECT_EQ((*devices)[0].vendor, "huawei");
  EXPECT_EQ((*devices)[0].pci_bus_id, "0000:66:00.0");
  EXPECT_EQ((*devices)[0].hbm_total_bytes, 65536ull << 20);
  EXPECT_EQ((*devices)[0].tdp_watts, 400);  // the model table: npu-smi does not say
  EXPECT_EQ((*devices)[15].index, 15);
  EXPECT_EQ((*b)->Describe(), "ascend via npu-smi 24.1.rc1 (16 x Ascend910B2C)");
}

TEST_F(AscendBackendTest, DevicesAreNumberedAsNpuSmiNumbersThem) {
  UseCapture("npu-smi-info-1x910B4-idle.txt");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  auto devices = (*b)->Enumerate();
  ASSERT_THAT(devices, IsOk());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].index, 5);  // "NPU 5" in npu-smi info
  auto s = (*b)->Sample(5);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->index, 5);
  EXPECT_DOUBLE_EQ(s->power_watts, 89.9);
  EXPECT_EQ(s->temperature_celsius, 39);
  EXPECT_EQ(s->hbm_used_bytes, 2922ull << 20);
  EXPECT_EQ(s->health, Health::kOk);
  EXPECT_FALSE(Reported(s->core_clock_mhz));  // npu-smi info does not print clocks
  ASSERT_EQ(s->links.size(), 1u);
  EXPECT_TRUE(s->links[0].up);
  EXPECT_THAT((*b)->Sample(0), HasCode(ErrorCode::kNotFound, HasSubstr("NPU 0 does not exist")));
}

TEST_F(AscendBackendTest, HealthPageAndLinkState) {
  UseCapture("npu-smi-info-16x910B2C-busy.txt");
  dir_.Write("health-3-0.txt", "Health Status : Alarm\nError Code : 80E01801 80CB8009\n");
  dir_.Write("link-3.txt", "link status: DOWN\n");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  auto s = (*b)->Sample(3);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->health, Health::kAlarm);
  ASSERT_EQ(s->error_codes.size(), 2u);
  EXPECT_EQ(s->error_codes[0].code, "80E01801");
  EXPECT_EQ(s->error_codes[0].severity, Severity::kMajor);
  ASSERT_EQ(s->links.size(), 1u);
  EXPECT_FALSE(s->links[0].up);
  EXPECT_THAT(Calls(), HasSubstr("npu-smi info -t health -i 3 -c 0"));
  EXPECT_THAT(Calls(), HasSubstr("hccn_tool -i 3 -link -g"));
}

TEST_F(AscendBackendTest, HbmFromTheUsagesPageWhenTheTableHasNone) {
  dir_.Write("info.txt",
             "| NPU   Name   | Health | Power(W)   Temp(C) |\n"
             "| Chip         | Bus-Id | AICore(%)   HBM-Usage(MB) |\n"
             "+==============+========+=====================+\n"
             "| 0     910B3  | OK     | 120.5      44      |\n"
             "| 0            | 0000:C1:00.0 | -   -      |\n");
  dir_.Write("usages-0-0.txt",
             "HBM Capacity(MB) : 65536\nHBM Usage Rate(%) : 50\nAicore Usage Rate(%) : 73\n");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  auto s = (*b)->Sample(0);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->hbm_used_bytes, 32768ull << 20);
  EXPECT_EQ(s->utilisation_percent, 73);
}

TEST_F(AscendBackendTest, ResetIsRefusedWhileAProcessHoldsTheChip) {
  UseCapture("npu-smi-info-16x910B2C-busy.txt");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT((*b)->Reset(0), HasCode(ErrorCode::kFailedPrecondition,
                                      HasSubstr("while a process holds it: vllm (pid 418635)")));
  EXPECT_THAT((*b)->ClearMemory(7), HasCode(ErrorCode::kFailedPrecondition));
  EXPECT_THAT(Calls(), Not(HasSubstr("set -t reset")));
}

TEST_F(AscendBackendTest, ResetThenHealthPoll) {
  UseCapture("npu-smi-info-1x910B4-idle.txt");
  dir_.Write("health-5-0.txt", "Health Status : Critical\nError Code : 80CB8009\n");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  std::mutex mu;
  std::vector<FaultEvent> events;
  auto sub = (*b)->SubscribeFaults([&](const FaultEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });
  ASSERT_THAT(sub, IsOk());
  ASSERT_EQ((*b)->Sample(5)->health, Health::kCritical);
  Clock::TimePoint before = clock_.Now();
  ASSERT_THAT((*b)->Reset(5), IsOk());
  EXPECT_GE(clock_.Now() - before, std::chrono::seconds(5));  // polled after a wait
  EXPECT_THAT(Calls(), HasSubstr("npu-smi set -t reset -i 5 -c 0"));
  EXPECT_EQ((*b)->Sample(5)->health, Health::kOk);
  std::lock_guard lock(mu);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, FaultKind::kResetDone);
}

TEST_F(AscendBackendTest, ChipThatStaysUnhealthyEndsThePoll) {
  EXPECT_GE(AscendOptions{}.poll_timeout, std::chrono::seconds(20));
  UseCapture("npu-smi-info-1x910B4-idle.txt");
  dir_.Write("after-reset-5-0.txt", "Health Status : Alarm\nError Code : 80E01801\n");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  Clock::TimePoint before = clock_.Now();
  EXPECT_THAT((*b)->Reset(5), HasCode(ErrorCode::kDeadlineExceeded,
                                      HasSubstr("NPU 5: not healthy 20 s after the reset "
                                                "(health Alarm)")));
  EXPECT_GE(clock_.Now() - before, std::chrono::seconds(20));
}

TEST_F(AscendBackendTest, FailedResetSaysWhatNpuSmiSaid) {
  UseCapture("npu-smi-info-1x910B4-idle.txt");
  dir_.Write("reset-fails", "");
  auto b = MakeAscendBackend(Options(), clock_);
  ASSERT_THAT(b, IsOk());
  std::vector<FaultEvent> events;
  std::mutex mu;
  auto sub = (*b)->SubscribeFaults([&](const FaultEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });
  EXPECT_THAT((*b)->Reset(5),
              HasCode(ErrorCode::kUnavailable,
                      HasSubstr("npu-smi set -t reset -i 5 -c 0 exited 1: Reset failed.")));
  std::lock_guard lock(mu);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, FaultKind::kResetFailed);
}

TEST_F(AscendBackendTest, NeitherDcmiNorNpuSmiIsUnavailableWithAdvice) {
  AscendOptions o = Options();
  o.npu_smi = "/nonexistent/npu-smi";
  EXPECT_THAT(MakeAscendBackend(o, clock_),
              HasCode(ErrorCode::kUnavailable, HasSubstr("install the Ascend driver")));
}

// The DCMI source, against the fake libdcmi.so.
class AscendDcmiTest : public AscendBackendTest {
 protected:
  void SetUp() override {
    AscendBackendTest::SetUp();
    setenv("ANXIN_FAKE_DCMI_SCENARIO", SourcePath("tests/device/fake_dcmi/910b-node.txt").c_str(),
           1);
  }
  AscendOptions DcmiOptions() {
    AscendOptions o = Options();
    o.dcmi_library = FAKE_DCMI_LIBRARY;
    return o;
  }
};

TEST_F(AscendDcmiTest, ReadsThroughDcmiWhenItLoads) {
  auto b = MakeAscendBackend(DcmiOptions(), clock_);
  ASSERT_THAT(b, IsOk());
  auto devices = (*b)->Enumerate();
  ASSERT_THAT(devices, IsOk());
  ASSERT_EQ(devices->size(), 4u);
  EXPECT_EQ((*b)->Describe(), "ascend via dcmi (4 x Ascend910B2C)");
  EXPECT_EQ((*devices)[0].pci_bus_id, "0000:66:00.0");
  EXPECT_EQ((*devices)[3].pci_bus_id, "0000:3f:00.0");
  EXPECT_EQ((*devices)[0].hbm_total_bytes, 65536ull << 20);
  auto s = (*b)->Sample(0);
  ASSERT_THAT(s, IsOk());
  EXPECT_DOUBLE_EQ(s->power_watts, 86.8);  // from 0.1 W
  EXPECT_EQ(s->temperature_celsius, 35);
  EXPECT_EQ(s->hbm_used_bytes, 59356ull << 20);
  EXPECT_EQ(s->memory_clock_mhz, 1600);
  EXPECT_EQ(s->utilisation_percent, 87);
  EXPECT_EQ(s->health, Health::kOk);
  // The RoCE port's state from dcmi_get_device_network_health.
  ASSERT_EQ(s->links.size(), 1u);
  EXPECT_TRUE(s->links[0].up);
  // npu-smi was never asked: DCMI answered everything.
  EXPECT_THAT(ReadTextFile(dir_ / "calls.log"), Not(HasSubstr("npu-smi info")));
}

TEST_F(AscendDcmiTest, NotSupportedIsLeftOutAndNotReadyIsUnavailable) {
  auto b = MakeAscendBackend(DcmiOptions(), clock_);
  ASSERT_THAT(b, IsOk());
  auto s1 = (*b)->Sample(1);
  ASSERT_THAT(s1, IsOk());
  EXPECT_FALSE(Reported(s1->power_watts));  // -8255
  EXPECT_EQ(s1->temperature_celsius, 37);
  // Port detection not set up (6): no link state, rather than a made-up one.
  EXPECT_TRUE(s1->links.empty());
  EXPECT_THAT((*b)->Sample(2),
              HasCode(ErrorCode::kUnavailable, HasSubstr("NPU 2: not ready (DCMI -8012")));
  auto s3 = (*b)->Sample(3);
  ASSERT_THAT(s3, IsOk());
  EXPECT_EQ(s3->health, Health::kAlarm);
  ASSERT_EQ(s3->error_codes.size(), 2u);
  EXPECT_EQ(s3->error_codes[0].code, "80E01801");
  EXPECT_EQ(s3->error_codes[1].code, "80CB8009");
  // Unreachable (3): the port is down.
  ASSERT_EQ(s3->links.size(), 1u);
  EXPECT_FALSE(s3->links[0].up);
}

TEST_F(AscendDcmiTest, FailedInitFallsBackToNpuSmi) {
  setenv("ANXIN_FAKE_DCMI_SCENARIO", dir_.Write("init.txt", "init -8005\n").c_str(), 1);
  UseCapture("npu-smi-info-1x910B4-idle.txt");
  auto b = MakeAscendBackend(DcmiOptions(), clock_);
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT((*b)->Describe(), HasSubstr("ascend via npu-smi 25.5.2"));
  AscendOptions o = DcmiOptions();
  o.npu_smi = "/nonexistent/npu-smi";
  EXPECT_THAT(MakeAscendBackend(o, clock_),
              HasCode(ErrorCode::kUnavailable, HasSubstr("DCMI: dcmi_init failed (-8005)")));
}

}  // namespace
}  // namespace anxin::device::ascend
