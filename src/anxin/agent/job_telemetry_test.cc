#include "anxin/agent/job_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

#include "anxin/base/testing.h"

namespace anxin::agent {
namespace {

using ::anxin::testing::Value;

using namespace std::chrono_literals;
using monitor::SdkCollectiveOp;
using monitor::SdkDatagram;
using monitor::SdkEvent;
using ::testing::HasSubstr;
using ::testing::Not;

// The value of the series written exactly as `series` (name and labels), or
// nullopt when the exposition has no such line.
SdkDatagram Datagram(std::string job, int rank, int world, std::vector<monitor::SdkEventBody> b) {
  SdkDatagram d;
  d.sender.pid = 100 + static_cast<uint32_t>(rank);
  d.sender.job = std::move(job);
  d.sender.rank = rank;
  d.sender.world_size = world;
  for (auto& body : b) d.events.push_back(SdkEvent{.time_ns = 1, .body = std::move(body)});
  return d;
}

class JobTelemetryTest : public ::testing::Test {
 protected:
  void Make(JobTelemetryOptions o = {}) {
    o.node = "n1";
    auto t = JobTelemetry::Create(registry_, clock_, o);
    ASSERT_TRUE(t.has_value()) << t.error().ToString();
    jobs_ = std::move(*t);
  }
  std::string Text() { return registry_.TextExposition(); }

  VirtualClock clock_{Clock::TimePoint{} + 1000s};
  monitor::Registry registry_;
  std::unique_ptr<JobTelemetry> jobs_;
};

TEST_F(JobTelemetryTest, StepsBecomeAHistogramAndTheLastStep) {
  Make();
  jobs_->Consume(Datagram(
      "llama", 3, 8,
      {monitor::SdkStepBegin{.step = 7}, monitor::SdkStepEnd{.step = 7, .duration_ns = 400'000'000},
       monitor::SdkStepEnd{.step = 8, .duration_ns = 600'000'000},
       // No start to measure from: counted as the last step only.
       monitor::SdkStepEnd{.step = 9, .duration_ns = 0}}));
  const std::string t = Text();
  const std::string l = R"({node="n1",job="llama",rank="3")";
  EXPECT_EQ(Value(t, "anxin_job_step_seconds_count" + l + "}"), 2);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_step_seconds_sum" + l + "}"), 1.0);
  EXPECT_EQ(Value(t, "anxin_job_step_seconds_bucket" + l + R"(,le="0.5"})"), 1);
  EXPECT_EQ(Value(t, "anxin_job_last_step" + l + "}"), 9);
  EXPECT_EQ(Value(t, "anxin_job_heartbeat_age_seconds" + l + "}"), 0);
  // Nothing reported them: no allocator or kernel series.
  EXPECT_THAT(t, Not(HasSubstr("anxin_job_allocator_reserved_bytes{")));
  EXPECT_THAT(t, Not(HasSubstr("anxin_job_kernel_jitter_ratio{")));
}

TEST_F(JobTelemetryTest, CollectiveBandwidthFollowsNcclTests) {
  Make();
  // 256 MiB all_reduce in 10 ms over 8 ranks: algbw = size / time, busbw =
  // algbw * 2(n-1)/n. all_gather over an explicit group of 4: (n-1)/n.
  jobs_->Consume(Datagram(
      "j", 0, 8,
      {monitor::SdkCollective{
           .op = SdkCollectiveOp::kAllReduce, .bytes = 256ull << 20, .duration_ns = 10'000'000},
       monitor::SdkCollective{.op = SdkCollectiveOp::kAllGather,
                              .group_size = 4,
                              .bytes = 1'000'000,
                              .duration_ns = 1'000'000},
       monitor::SdkCollective{.op = SdkCollectiveOp::kBarrier, .bytes = 0, .duration_ns = 5000}}));
  const std::string t = Text();
  const std::string l = R"({node="n1",job="j",rank="0",op=")";
  const double algbw = (256.0 * 1024 * 1024) / 0.01;
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_collective_algbw_bytes_per_second" + l + "all_reduce\"}"),
                   algbw);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_collective_busbw_bytes_per_second" + l + "all_reduce\"}"),
                   algbw * 2 * 7 / 8);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_collective_busbw_bytes_per_second" + l + "all_gather\"}"),
                   1e9 * 3 / 4);
  // A barrier has a duration but moves no data: no bandwidth series.
  EXPECT_EQ(Value(t, "anxin_job_collective_seconds_count" + l + "barrier\"}"), 1);
  EXPECT_EQ(Value(t, "anxin_job_collective_busbw_bytes_per_second" + l + "barrier\"}"),
            std::nullopt);
}

TEST_F(JobTelemetryTest, KernelJitterIsTheLastRunOverTheMedianBefore) {
  Make({.kernel_window = 4});
  auto kernel = [&](uint64_t ns) {
    jobs_->Consume(Datagram("j", 1, 2, {monitor::SdkKernel{.duration_ns = ns, .name = "gemm"}}));
  };
  const std::string l = R"({node="n1",job="j",rank="1",kernel="gemm"})";
  kernel(1'000'000);
  EXPECT_EQ(Value(Text(), "anxin_job_kernel_jitter_ratio" + l), 1);  // nothing to compare with
  for (int i = 0; i < 5; ++i) kernel(1'000'000);
  kernel(3'000'000);  // 200% slower
  std::string t = Text();
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_kernel_jitter_ratio" + l), 3.0);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_kernel_seconds_median" + l), 0.001);
  // The window holds 4 runs: after 3 more slow ones the median has moved.
  for (int i = 0; i < 3; ++i) kernel(3'000'000);
  t = Text();
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_kernel_seconds_median" + l), 0.003);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_kernel_jitter_ratio" + l), 1.0);
}

TEST_F(JobTelemetryTest, AllocatorStatsAddUpOverDevicesAndOomsCount) {
  Make();
  auto alloc = [&](int32_t device, uint64_t reserved, double frag, uint64_t ooms, uint64_t remaps) {
    monitor::SdkAllocStats a{};
    a.device = device;
    a.reserved_bytes = reserved;
    a.allocated_bytes = reserved / 2;
    a.fragmentation = frag;
    a.ooms = ooms;
    a.remaps = remaps;
    jobs_->Consume(Datagram("j", 0, 1, {a}));
  };
  alloc(0, 1000, 0.1, 1, 10);
  alloc(1, 3000, 0.4, 2, 0);
  alloc(0, 1000, 0.1, 4, 15);  // device 0: 3 more OOMs, 5 more remaps
  const std::string t = Text();
  const std::string l = R"({node="n1",job="j",rank="0"})";
  EXPECT_EQ(Value(t, "anxin_job_allocator_reserved_bytes" + l), 4000);
  EXPECT_EQ(Value(t, "anxin_job_allocator_allocated_bytes" + l), 2000);
  EXPECT_DOUBLE_EQ(*Value(t, "anxin_job_allocator_fragmentation_ratio" + l), 0.4);
  EXPECT_EQ(Value(t, "anxin_job_allocator_ooms_total" + l), 6);
  EXPECT_EQ(Value(t, "anxin_job_allocator_remaps_total" + l), 15);
}

TEST_F(JobTelemetryTest, RecoveryCountsBecomeJobSeriesWithoutARank) {
  Make();
  auto rec = [&](uint64_t restarts, uint64_t incidents, double seconds, std::string cls) {
    jobs_->Consume(
        Datagram("j", 0, 1,
                 {monitor::SdkRecovery{.restarts_total = restarts,
                                       .incidents_total = incidents,
                                       .recovery_ns = static_cast<uint64_t>(seconds * 1e9),
                                       .fault_class = std::move(cls)}}));
  };
  rec(0, 1, 0, "hang");  // a fault: no recovery time yet
  std::string t = Text();
  EXPECT_EQ(Value(t, R"(anxin_job_incidents_total{node="n1",job="j",fault_class="hang"})"), 1);
  EXPECT_THAT(t, Not(HasSubstr("anxin_job_last_recovery_seconds{")));
  rec(1, 1, 0, "hang");     // the relaunch
  rec(1, 1, 12.5, "hang");  // progress again
  rec(1, 1, 12.5, "hang");  // the same counts again (a resend) add nothing
  rec(2, 1, 0, "process_exit");
  rec(2, 1, 3.25, "process_exit");
  t = Text();
  EXPECT_EQ(Value(t, R"(anxin_job_restarts_total{node="n1",job="j"})"), 2);
  EXPECT_EQ(Value(t, R"(anxin_job_incidents_total{node="n1",job="j",fault_class="hang"})"), 1);
  EXPECT_EQ(Value(t, R"(anxin_job_incidents_total{node="n1",job="j",fault_class="process_exit"})"),
            1);
  EXPECT_DOUBLE_EQ(*Value(t, R"(anxin_job_last_recovery_seconds{node="n1",job="j"})"), 3.25);
  // The supervisor is not a rank: no per-rank series, no rank counted.
  EXPECT_THAT(t, Not(HasSubstr("anxin_job_heartbeat_age_seconds{")));
  EXPECT_EQ(jobs_->stats().ranks, 0u);
}

TEST_F(JobTelemetryTest, HeartbeatAgeGrowsAndSilentRanksAreForgotten) {
  Make({.expiry = 10min});
  jobs_->Consume(Datagram("j", 0, 2, {monitor::SdkHeartbeat{}}));
  jobs_->Consume(Datagram("j", 1, 2, {monitor::SdkStepEnd{.step = 1, .duration_ns = 1000}}));
  clock_.Advance(150s);
  jobs_->Consume(Datagram("j", 1, 2, {monitor::SdkHeartbeat{}}));
  std::string t = Text();
  EXPECT_EQ(Value(t, R"(anxin_job_heartbeat_age_seconds{node="n1",job="j",rank="0"})"), 150);
  EXPECT_EQ(Value(t, R"(anxin_job_heartbeat_age_seconds{node="n1",job="j",rank="1"})"), 0);
  clock_.Advance(9min);  // rank 0 silent for 10.5 min, rank 1 for 9
  t = Text();
  EXPECT_THAT(t, Not(HasSubstr(R"(rank="0")")));
  EXPECT_EQ(Value(t, R"(anxin_job_last_step{node="n1",job="j",rank="1"})"), 1);
  EXPECT_EQ(jobs_->stats().ranks, 1u);
  clock_.Advance(2min);
  t = Text();
  EXPECT_THAT(t, Not(HasSubstr(R"(job="j")")));
  EXPECT_EQ(jobs_->stats().jobs, 0u);
}

TEST_F(JobTelemetryTest, CapsDropAndCountWhatGoesOver) {
  Make({.max_jobs = 1, .max_ranks = 2, .max_kernels = 1});
  jobs_->Consume(Datagram("a", 0, 4, {monitor::SdkHeartbeat{}}));
  jobs_->Consume(Datagram("b", 0, 4, {monitor::SdkHeartbeat{}, monitor::SdkHeartbeat{}}));
  jobs_->Consume(Datagram("a", 1, 4, {monitor::SdkHeartbeat{}}));
  jobs_->Consume(Datagram("a", 2, 4, {monitor::SdkHeartbeat{}}));
  jobs_->Consume(Datagram("a", 0, 4,
                          {monitor::SdkKernel{.duration_ns = 5, .name = "k1"},
                           monitor::SdkKernel{.duration_ns = 5, .name = "k2"}}));
  JobTelemetryStats s = jobs_->stats();
  EXPECT_EQ(s.jobs, 1u);
  EXPECT_EQ(s.ranks, 2u);
  EXPECT_EQ(s.dropped_jobs, 2u);  // events
  EXPECT_EQ(s.dropped_ranks, 1u);
  EXPECT_EQ(s.dropped_kernels, 1u);
  const std::string t = Text();
  EXPECT_EQ(Value(t, R"(anxin_agent_telemetry_dropped_total{node="n1",limit="jobs"})"), 2);
  EXPECT_THAT(t, Not(HasSubstr(R"(job="b")")));
  EXPECT_THAT(t, Not(HasSubstr(R"(kernel="k2")")));
}

TEST_F(JobTelemetryTest, TheCollectHookOutlivesTheTelemetry) {
  Make();
  jobs_->Consume(Datagram("j", 0, 1, {monitor::SdkHeartbeat{}}));
  jobs_.reset();
  EXPECT_THAT(Text(), HasSubstr("anxin_job_heartbeat_age_seconds"));  // no crash
}

TEST(JobTelemetryOptionsTest, ZeroCapsAreRefused) {
  monitor::Registry registry;
  VirtualClock clock;
  EXPECT_FALSE(JobTelemetry::Create(registry, clock, {.max_kernels = 0}).has_value());
}

TEST_F(JobTelemetryTest, TakeRanksGivesTheWorstSinceTheLastTake) {
  Make();
  using monitor::SdkCollective;
  using monitor::SdkKernel;
  using monitor::SdkStepEnd;
  auto step = [](uint64_t n, double seconds) -> monitor::SdkEventBody {
    return SdkStepEnd{.step = n, .duration_ns = static_cast<uint64_t>(seconds * 1e9)};
  };
  auto reduce = [](double seconds) -> monitor::SdkEventBody {
    return SdkCollective{.op = SdkCollectiveOp::kAllReduce,
                         .group_size = 0,
                         .bytes = 1'000'000'000,
                         .duration_ns = static_cast<uint64_t>(seconds * 1e9),
                         .algorithm = "ring"};
  };
  auto kernel = [](double ms) -> monitor::SdkEventBody {
    return SdkKernel{.duration_ns = static_cast<uint64_t>(ms * 1e6), .name = "gemm"};
  };
  EXPECT_TRUE(jobs_->TakeRanks().empty());
  // A slow step, a slow all_reduce and a slow kernel between two takes,
  // each followed by normal ones: the take still sees them.
  jobs_->Consume(Datagram("j", 1, 2,
                          {step(1, 0.2), step(2, 0.9), step(3, 0.2), reduce(0.01), reduce(0.04),
                           reduce(0.01), kernel(1), kernel(1), kernel(3), kernel(1)}));
  clock_.Advance(2s);
  auto ranks = jobs_->TakeRanks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].job, "j");
  EXPECT_EQ(ranks[0].rank, 1);
  EXPECT_EQ(ranks[0].world_size, 2);
  EXPECT_EQ(ranks[0].last_step, 3u);
  EXPECT_DOUBLE_EQ(ranks[0].heartbeat_age_seconds, 2);
  EXPECT_DOUBLE_EQ(ranks[0].step_seconds, 0.9);
  // 1 GB in 40 ms, times 2(n-1)/n = 1 for two ranks.
  EXPECT_DOUBLE_EQ(ranks[0].busbw_bytes_per_second.at("all_reduce"), 25e9);
  EXPECT_DOUBLE_EQ(ranks[0].kernel_jitter_ratio.at("gemm"), 3);
  // Nothing new: the values stay.
  ranks = jobs_->TakeRanks();
  EXPECT_DOUBLE_EQ(ranks[0].step_seconds, 0.9);
  EXPECT_DOUBLE_EQ(ranks[0].kernel_jitter_ratio.at("gemm"), 3);
  // Something new starts a new period.
  jobs_->Consume(Datagram("j", 1, 2, {step(4, 0.3), reduce(0.02), kernel(1)}));
  ranks = jobs_->TakeRanks();
  EXPECT_DOUBLE_EQ(ranks[0].step_seconds, 0.3);
  EXPECT_DOUBLE_EQ(ranks[0].busbw_bytes_per_second.at("all_reduce"), 50e9);
  EXPECT_DOUBLE_EQ(ranks[0].kernel_jitter_ratio.at("gemm"), 1);
}

}  // namespace
}  // namespace anxin::agent
