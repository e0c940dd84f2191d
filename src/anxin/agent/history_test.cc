#include "anxin/agent/history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin::agent {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using device::DeviceInfo;
using device::DeviceSample;
using device::FaultEvent;
using device::FaultKind;
using device::Health;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Clock::TimePoint kStart = Clock::TimePoint{} + std::chrono::seconds(1'764'000'000);

DeviceInfo Npu(int index) {
  return {.index = index,
          .uuid = "uuid-" + std::to_string(index),
          .model = "Ascend910C",
          .vendor = "huawei",
          .pci_bus_id = "0000:01:00.0",
          .hbm_total_bytes = 64 * kGiB,
          .throttle_celsius = 95};
}

DeviceSample Reading(int index, double temperature = 50, uint64_t hbm = 10 * kGiB) {
  DeviceSample s;
  s.index = index;
  s.hbm_used_bytes = hbm;
  s.temperature_celsius = temperature;
  s.power_watts = 300;
  s.utilisation_percent = 85;
  s.links = {{.port = 0, .up = true}, {.port = 1, .up = true}};
  return s;
}

FaultEvent Fault(int index, Clock::TimePoint time, FaultKind kind, std::string message = "",
                 std::string code = "", int port = -1) {
  FaultEvent e;
  e.index = index;
  e.time = time;
  e.kind = kind;
  e.code = std::move(code);
  e.port = port;
  e.message = std::move(message);
  return e;
}

device::Snapshot Snap(Clock::TimePoint t, std::vector<Result<DeviceSample>> samples) {
  device::Snapshot s;
  s.source = "test";
  s.time = t;
  for (size_t i = 0; i < samples.size(); ++i)
    s.rows.push_back({Npu(static_cast<int>(i)), std::move(samples[i])});
  return s;
}

nlohmann::json Parse(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

std::vector<std::string> Kinds(const History& h, uint64_t after = 0) {
  std::vector<std::string> kinds;
  const nlohmann::json j = Parse(h.EventsJson(after));
  for (const auto& e : j["events"])
    kinds.push_back(e["label"].get<std::string>() + " " + e["kind"].get<std::string>());
  return kinds;
}

std::unique_ptr<History> Make(monitor::Registry& registry, HistoryOptions o = {}) {
  o.node = "node-a";
  auto h = History::Create(registry, o);
  EXPECT_THAT(h, IsOk());
  return h ? std::move(*h) : nullptr;
}

TEST(HistoryTest, KeepsTheWindowInARingAndServesPointsAfterSince) {
  monitor::Registry registry;
  auto h = Make(registry, {.interval = 1s, .window = 5s});
  EXPECT_EQ(h->capacity(), 5u);
  for (int i = 0; i < 8; ++i) h->RecordSnapshot(Snap(kStart + i * 1s, {Reading(0, 50 + i)}));
  auto j = Parse(h->DevicesJson(0));
  EXPECT_EQ(j["node"], "node-a");
  EXPECT_EQ(j["source"], "test");
  EXPECT_EQ(j["points"], 5);
  EXPECT_EQ(j["interval_seconds"], 1.0);
  EXPECT_EQ(j["window_seconds"], 5.0);
  ASSERT_EQ(j["devices"].size(), 1u);
  const auto& d = j["devices"][0];
  EXPECT_EQ(d["label"], "NPU 0");
  EXPECT_EQ(d["health"], "OK");
  EXPECT_EQ(d["hbm_total_bytes"], 64 * kGiB);
  EXPECT_EQ(d["throttle_celsius"], 95.0);
  const double t0 = 1'764'000'000;
  EXPECT_EQ(d["t"], nlohmann::json({t0 + 3, t0 + 4, t0 + 5, t0 + 6, t0 + 7}));
  EXPECT_EQ(d["temperature_celsius"], nlohmann::json({53.0, 54.0, 55.0, 56.0, 57.0}));
  EXPECT_EQ(d["hbm_used_bytes"][0], 10.0 * kGiB);
  EXPECT_EQ(d["links"], nlohmann::json::parse(R"([{"port":0,"up":true},{"port":1,"up":true}])"));
  // Only what came after the client's last point.
  auto since = Parse(h->DevicesJson(t0 + 5));
  EXPECT_EQ(since["devices"][0]["t"], nlohmann::json({t0 + 6, t0 + 7}));
  EXPECT_EQ(Parse(h->DevicesJson(t0 + 7))["devices"][0]["t"], nlohmann::json::array());
}

TEST(HistoryTest, MissingReadingsAreNullAndALostDeviceIsAnEvent) {
  monitor::Registry registry;
  auto h = Make(registry);
  DeviceSample quiet = Reading(0);
  quiet.power_watts = device::kNotReported;
  quiet.hbm_used_bytes = device::kNotReportedCount;
  h->RecordSnapshot(Snap(kStart, {quiet}));
  h->RecordSnapshot(Snap(kStart + 1s, {Unavailable("NPU 0 fell off the bus")}));
  h->RecordSnapshot(Snap(kStart + 2s, {Unavailable("NPU 0 fell off the bus")}));
  auto d = Parse(h->DevicesJson(0))["devices"][0];
  EXPECT_EQ(d["health"], "Lost");
  EXPECT_EQ(d["power_watts"], nlohmann::json({nullptr, nullptr, nullptr}));
  EXPECT_EQ(d["hbm_used_bytes"], nlohmann::json({nullptr, nullptr, nullptr}));
  EXPECT_EQ(d["temperature_celsius"], nlohmann::json({50.0, nullptr, nullptr}));
  h->RecordSnapshot(Snap(kStart + 3s, {Reading(0)}));
  EXPECT_THAT(Kinds(*h), ElementsAre("NPU 0 device_lost", "NPU 0 device_back"));
  auto e = Parse(h->EventsJson(0))["events"][0];
  EXPECT_EQ(e["detail"], "NPU 0 fell off the bus");
  EXPECT_EQ(e["severity"], "critical");
  EXPECT_EQ(e["source"], "agent");
  EXPECT_EQ(e["time"], "2025-11-24T16:00:01.000Z");
  EXPECT_EQ(e["unix"], 1'764'000'001.0);
}

TEST(HistoryTest, InfersCodesLinksHealthAndAlertLinesFromSamples) {
  monitor::Registry registry;
  auto h = Make(registry);
  Clock::TimePoint t = kStart;
  auto record = [&](DeviceSample s) {
    h->RecordSnapshot(Snap(t, {std::move(s)}));
    t += 1s;
  };
  record(Reading(0));  // a healthy first sample is no news
  EXPECT_THAT(Kinds(*h), ElementsAre());
  DeviceSample bad = Reading(0, 84.9);
  bad.health = Health::kCritical;
  bad.error_codes = {{.code = "80E18005",
                      .severity = device::Severity::kCritical,
                      .text = "HBM multi-bit ECC error"}};
  bad.links[1].up = false;
  record(bad);
  EXPECT_THAT(Kinds(*h), ElementsAre("NPU 0 health", "NPU 0 error_raised", "NPU 0 link_down"));
  auto events = Parse(h->EventsJson(0))["events"];
  EXPECT_EQ(events[0]["detail"], "health OK -> Critical");
  EXPECT_EQ(events[1]["detail"], "code 80E18005 (critical): HBM multi-bit ECC error");
  EXPECT_EQ(events[1]["severity"], "critical");
  EXPECT_EQ(events[2]["detail"], "port 1 down");
  const uint64_t seen = events[2]["seq"];

  // Over 85 C, then noise just under the line is not a crossing, then the
  // throttle point, then well below.
  bad.temperature_celsius = 85.2;
  record(bad);
  bad.temperature_celsius = 83.5;
  record(bad);
  bad.temperature_celsius = 95.5;
  record(bad);
  bad.temperature_celsius = 82.9;
  bad.error_codes.clear();
  bad.links[1].up = true;
  bad.health = Health::kOk;
  bad.hbm_used_bytes = 60 * kGiB;  // 93.75 %
  record(bad);
  bad.hbm_used_bytes = 57 * kGiB;  // 89 %: within the hysteresis
  record(bad);
  bad.hbm_used_bytes = 50 * kGiB;
  record(bad);
  EXPECT_THAT(Kinds(*h, seen),
              ElementsAre("NPU 0 temperature_high", "NPU 0 temperature_high", "NPU 0 health",
                          "NPU 0 error_cleared", "NPU 0 link_up", "NPU 0 temperature_normal",
                          "NPU 0 hbm_high", "NPU 0 hbm_normal"));
  events = Parse(h->EventsJson(seen))["events"];
  EXPECT_EQ(events[0]["detail"], "85 C: at or above 85 C");
  EXPECT_EQ(events[0]["severity"], "warning");
  EXPECT_EQ(events[1]["detail"], "96 C: at its 95 C throttle point");
  EXPECT_EQ(events[1]["severity"], "critical");
  EXPECT_EQ(events[6]["detail"], "HBM 93.8 % used (60.0 of 64.0 GiB)");
}

TEST(HistoryTest, ABackendEventAndTheSampleShowingItMakeOneEvent) {
  monitor::Registry registry;
  auto h = Make(registry);
  h->RecordSnapshot(Snap(kStart, {Reading(0), Reading(1)}));
  // NPU 0: the events first, then the sample that shows the same.
  h->RecordFault(Fault(0, kStart + 500ms, FaultKind::kLinkDown, "port 1 link down", "", 1));
  h->RecordFault(Fault(0, kStart + 600ms, FaultKind::kErrorRaised, "raised 80E18005", "80E18005"));
  DeviceSample down = Reading(0);
  down.links[1].up = false;
  down.error_codes = {
      {.code = "80E18005", .severity = device::Severity::kCritical, .text = "HBM ECC"}};
  // NPU 1: the sample first, then the event.
  DeviceSample raised = Reading(1);
  raised.error_codes = {{.code = "80CB8009", .severity = device::Severity::kMinor, .text = ""}};
  h->RecordSnapshot(Snap(kStart + 1s, {down, raised}));
  h->RecordFault(Fault(1, kStart + 1500ms, FaultKind::kErrorRaised, "raised 80CB8009", "80CB8009"));
  // Kinds without a state are always recorded.
  h->RecordFault(Fault(1, kStart + 1600ms, FaultKind::kEccErrors, "12 single-bit"));
  h->RecordSnapshot(Snap(kStart + 2s, {down, raised}));
  EXPECT_THAT(Kinds(*h), ElementsAre("NPU 0 link_down", "NPU 0 error_raised", "NPU 1 error_raised",
                                     "NPU 1 ecc_errors"));
  auto events = Parse(h->EventsJson(0))["events"];
  EXPECT_EQ(events[0]["source"], "device");
  EXPECT_EQ(events[0]["detail"], "port 1 link down");
  // The device's event did not say how bad the code is; the sample did.
  EXPECT_EQ(events[1]["source"], "device");
  EXPECT_EQ(events[1]["severity"], "critical");
  EXPECT_EQ(events[2]["source"], "agent");
  EXPECT_EQ(events[2]["severity"], "warning");
  // A fault for a device no snapshot has described yet still names it.
  h->RecordFault(Fault(9, kStart + 3s, FaultKind::kDeviceLost));
  EXPECT_EQ(Parse(h->EventsJson(4))["events"][0]["label"], "device 9");
}

TEST(HistoryTest, TheTimelineIsARingThatCountsWhatItOverwrote) {
  monitor::Registry registry;
  auto h = Make(registry, {.max_events = 3});
  for (int i = 0; i < 5; ++i) {
    h->RecordFault(Fault(0, kStart + i * 1s, FaultKind::kResetDone, "reset " + std::to_string(i)));
  }
  auto j = Parse(h->EventsJson(0));
  EXPECT_EQ(j["next"], 5);
  EXPECT_EQ(j["dropped"], 2);
  EXPECT_EQ(j["capacity"], 3);
  ASSERT_EQ(j["events"].size(), 3u);
  EXPECT_EQ(j["events"][0]["seq"], 3);
  EXPECT_EQ(j["events"][0]["detail"], "reset 2");
  EXPECT_EQ(j["events"][2]["seq"], 5);
  EXPECT_EQ(Parse(h->EventsJson(4))["events"].size(), 1u);
  EXPECT_EQ(Parse(h->EventsJson(5))["events"].size(), 0u);
  EXPECT_THAT(registry.TextExposition(),
              HasSubstr("anxin_agent_history_dropped_total{node=\"node-a\",what=\"events\"} 2\n"));
}

TEST(HistoryTest, DetailsAreCutAndMayBeAnyBytes) {
  monitor::Registry registry;
  auto h = Make(registry);
  std::string long_text(300, 'x');
  long_text[255] = '\xC3';  // the first byte of a two-byte sequence at the cut
  long_text[256] = '\xA9';
  h->RecordFault(Fault(0, kStart, FaultKind::kResetFailed, long_text));
  h->RecordFault(Fault(0, kStart, FaultKind::kResetFailed, "bad \xFF byte"));
  auto events = Parse(h->EventsJson(0))["events"];
  EXPECT_EQ(events[0]["detail"], std::string(255, 'x') + "...");
  EXPECT_EQ(events[1]["detail"], "bad \xEF\xBF\xBD byte");
}

RankSummary Rank(std::string job, int rank, double step_seconds, double busbw, double jitter) {
  RankSummary r;
  r.job = std::move(job);
  r.rank = rank;
  r.world_size = 4;
  r.heartbeat_age_seconds = 0.5 * rank;
  r.last_step = 10 + rank;
  r.step_seconds = step_seconds;
  r.busbw_bytes_per_second["all_reduce"] = busbw;
  r.kernel_jitter_ratio["gemm"] = jitter;
  return r;
}

TEST(HistoryTest, AJobIsItsSlowestRank) {
  monitor::Registry registry;
  auto h = Make(registry);
  h->RecordJobs(kStart, {Rank("llm", 0, 0.5, 100e9, 1.0), Rank("llm", 1, 0.7, 80e9, 3.5)});
  RankSummary late = Rank("llm", 1, 0.6, 90e9, 1.1);
  late.busbw_bytes_per_second["all_gather"] = 40e9;
  h->RecordJobs(kStart + 1s, {Rank("llm", 0, 0.5, 100e9, 1.0), late});
  auto j = Parse(h->JobsJson(0));
  ASSERT_EQ(j["jobs"].size(), 1u);
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["job"], "llm");
  EXPECT_EQ(job["ranks"], 2);
  EXPECT_EQ(job["world_size"], 4);
  EXPECT_EQ(job["last_step"], 11);
  EXPECT_EQ(job["heartbeat_age_seconds"], 0.0);
  EXPECT_EQ(job["active"], true);
  EXPECT_EQ(job["step"], nlohmann::json({11.0, 11.0}));
  EXPECT_EQ(job["step_seconds"], nlohmann::json({0.7, 0.6}));
  EXPECT_EQ(job["busbw_bytes_per_second"]["all_reduce"], nlohmann::json({80e9, 90e9}));
  // An op that appears later has no value before it did.
  EXPECT_EQ(job["busbw_bytes_per_second"]["all_gather"], nlohmann::json({nullptr, 40e9}));
  EXPECT_EQ(job["kernel_jitter_ratio"]["gemm"], nlohmann::json({3.5, 1.1}));
  const double t1 = 1'764'000'001;
  EXPECT_EQ(Parse(h->JobsJson(t1 - 1))["jobs"][0]["t"], nlohmann::json({t1}));
}

TEST(HistoryTest, JobsAndKernelsBeyondTheCapsAreCountedAndOldJobsAgeOut) {
  monitor::Registry registry;
  auto h = Make(registry, {.interval = 1s, .window = 10s, .max_jobs = 1, .max_kernels = 1});
  RankSummary two_kernels = Rank("a", 0, 0.5, 1e9, 1.0);
  two_kernels.kernel_jitter_ratio["attention"] = 2.0;
  h->RecordJobs(kStart, {two_kernels, Rank("b", 0, 0.5, 1e9, 1.0)});
  auto j = Parse(h->JobsJson(0));
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["job"], "a");
  EXPECT_EQ(j["jobs"][0]["kernel_jitter_ratio"].size(), 1u);
  const std::string metrics = registry.TextExposition();
  EXPECT_THAT(metrics,
              HasSubstr("anxin_agent_history_dropped_total{node=\"node-a\",what=\"jobs\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr("anxin_agent_history_dropped_total{node=\"node-a\",what=\"kernels\"} 1\n"));
  // "a" stops reporting: kept, marked inactive, until its last point is
  // older than the window; then "b" gets the place.
  h->RecordJobs(kStart + 5s, {});
  j = Parse(h->JobsJson(0));
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["active"], false);
  h->RecordJobs(kStart + 11s, {Rank("b", 0, 0.5, 1e9, 1.0)});
  j = Parse(h->JobsJson(0));
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["job"], "b");
}

// A supervisor's finished recovery is a timeline event of its job; a record
// that only carries counters is not.
TEST(HistoryTest, ARecoveryOfAJobIsAnEvent) {
  monitor::Registry registry;
  auto h = Make(registry);
  h->RecordRecovery(kStart, "llm",
                    {.restarts_total = 1, .incidents_total = 1, .fault_class = "hang"});
  EXPECT_EQ(Parse(h->EventsJson(0))["events"].size(), 0u);
  h->RecordRecovery(kStart + 1s, "llm",
                    {.restarts_total = 2,
                     .incidents_total = 1,
                     .recovery_ns = 2'500'000'000,
                     .fault_class = "network"});
  auto events = Parse(h->EventsJson(0))["events"];
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["device"], -1);
  EXPECT_EQ(events[0]["label"], "job llm");
  EXPECT_EQ(events[0]["kind"], "recovered");
  EXPECT_EQ(events[0]["source"], "job");
  EXPECT_EQ(events[0]["detail"],
            "network fault: the job runs again, 2.50 s after the fault (restart 2)");
}

TEST(HistoryTest, RefusesZeroSizes) {
  monitor::Registry registry;
  EXPECT_THAT(History::Create(registry, {.interval = 0s}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(History::Create(registry, {.max_events = 0}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("must be above 0")));
  // A tiny interval does not make the rings unbounded.
  auto h = History::Create(registry, {.interval = 1ms, .window = 1h});
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ((*h)->capacity(), 3600u);
}

}  // namespace
}  // namespace anxin::agent
