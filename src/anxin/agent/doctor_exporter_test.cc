#include "anxin/agent/doctor_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "anxin/base/testing.h"

namespace anxin::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Series(std::string_view check, std::string_view state, int value) {
  return "anxin_doctor_check_status{node=\"n1\",check=\"" + std::string(check) + "\",state=\"" +
         std::string(state) + "\"} " + std::to_string(value) + "\n";
}

// A copy of the good host tree of doctor's tests, which a test then drifts.
class DriftingHost : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(ANXIN_SOURCE_DIR "/tests/fixtures/doctor/host_a", dir_.path(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  TempDir dir_;
};

TEST_F(DriftingHost, ExportsEachCheckAndSeesADriftOnTheNextRound) {
  monitor::Registry registry;
  auto doctor = DoctorExporter::Create(registry, {.node = "n1", .root = dir_.path()});
  ASSERT_THAT(doctor, IsOk());
  const size_t checks = (*doctor)->RunOnce();
  EXPECT_GE(checks, 10u);
  std::string text = registry.TextExposition();
  EXPECT_THAT(text, HasSubstr("# TYPE anxin_doctor_check_status gauge\n"));
  EXPECT_THAT(text, HasSubstr(Series("irq.irqbalance", "pass", 1)));
  EXPECT_THAT(text, HasSubstr(Series("irq.irqbalance", "fail", 0)));
  EXPECT_THAT(text, HasSubstr("anxin_doctor_runs_total{node=\"n1\"} 1\n"));

  // After a reboot irqbalance is back.
  dir_.Write("proc/1311/comm", "irqbalance\n");
  (*doctor)->RunOnce();
  text = registry.TextExposition();
  EXPECT_THAT(text, HasSubstr(Series("irq.irqbalance", "fail", 1)));
  EXPECT_THAT(text, HasSubstr(Series("irq.irqbalance", "pass", 0)));
  EXPECT_THAT(text, HasSubstr("anxin_doctor_runs_total{node=\"n1\"} 2\n"));
  // Exactly one state of each check is current.
  size_t current = 0;
  for (std::string_view state : {"pass", "skip", "warn", "fail"}) {
    if (text.find(Series("irq.irqbalance", state, 1)) != std::string::npos) ++current;
  }
  EXPECT_EQ(current, 1u);
}

TEST_F(DriftingHost, RunsOnItsOwnLoopUntilStopped) {
  monitor::Registry registry;
  auto doctor =
      DoctorExporter::Create(registry, {.node = "n1", .root = dir_.path(), .interval = 100ms});
  ASSERT_THAT(doctor, IsOk());
  (*doctor)->Start();
  const bool three_rounds = WaitFor(
      [&] {
        return registry.TextExposition().find("anxin_doctor_runs_total{node=\"n1\"} 3\n") !=
               std::string::npos;
      },
      20s);
  (*doctor)->Stop();
  const std::string text = registry.TextExposition();
  EXPECT_THAT(text, Not(HasSubstr("anxin_doctor_runs_total{node=\"n1\"} 0\n")));
  EXPECT_THAT(text, HasSubstr("anxin_doctor_last_run_timestamp_seconds{node=\"n1\"} "));
  EXPECT_TRUE(three_rounds) << "fewer than 3 rounds in 20 s";
}

TEST(DoctorExporterTest, RefusesAZeroInterval) {
  monitor::Registry registry;
  EXPECT_FALSE(DoctorExporter::Create(registry, {.node = "n1", .interval = 0ms}).has_value());
}

}  // namespace
}  // namespace anxin::agent
