#include "anxin/monitor/metric_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::monitor {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, ExpositionOfEachType) {
  Registry r;
  auto c = r.AddCounter("anxin_sdk_datagrams_received_total", "Datagrams received.", {"node"});
  ASSERT_THAT(c, IsOk());
  (*c)->WithLabels({"n1"}).Inc();
  (*c)->WithLabels({"n1"}).Inc(2);
  auto g = r.AddGauge("anxin_device_temperature_celsius", "Die temperature.", {"node", "device"});
  ASSERT_THAT(g, IsOk());
  (*g)->WithLabels({"n1", "1"}).Set(71.5);
  (*g)->WithLabels({"n1", "0"}).Set(64);
  auto h = r.AddHistogram("anxin_job_step_duration_seconds", "Step time.", {"job"}, {0.5, 1, 2});
  ASSERT_THAT(h, IsOk());
  Histogram& steps = (*h)->WithLabels({"j"});
  for (double v : {0.25, 0.5, 0.75, 1.5, 3.0}) steps.Observe(v);
  auto plain = r.AddGauge("anxin_up", "Always 1.", {});
  ASSERT_THAT(plain, IsOk());
  (*plain)->WithLabels(std::initializer_list<std::string_view>{}).Set(1);

  EXPECT_EQ(r.TextExposition(),
            "# HELP anxin_device_temperature_celsius Die temperature.\n"
            "# TYPE anxin_device_temperature_celsius gauge\n"
            "anxin_device_temperature_celsius{node=\"n1\",device=\"0\"} 64\n"
            "anxin_device_temperature_celsius{node=\"n1\",device=\"1\"} 71.5\n"
            "# HELP anxin_job_step_duration_seconds Step time.\n"
            "# TYPE anxin_job_step_duration_seconds histogram\n"
            "anxin_job_step_duration_seconds_bucket{job=\"j\",le=\"0.5\"} 2\n"
            "anxin_job_step_duration_seconds_bucket{job=\"j\",le=\"1\"} 3\n"
            "anxin_job_step_duration_seconds_bucket{job=\"j\",le=\"2\"} 4\n"
            "anxin_job_step_duration_seconds_bucket{job=\"j\",le=\"+Inf\"} 5\n"
            "anxin_job_step_duration_seconds_sum{job=\"j\"} 6\n"
            "anxin_job_step_duration_seconds_count{job=\"j\"} 5\n"
            "# HELP anxin_sdk_datagrams_received_total Datagrams received.\n"
            "# TYPE anxin_sdk_datagrams_received_total counter\n"
            "anxin_sdk_datagrams_received_total{node=\"n1\"} 3\n"
            "# HELP anxin_up Always 1.\n"
            "# TYPE anxin_up gauge\n"
            "anxin_up 1\n");
}

TEST(MetricsTest, EscapingAndOddValues) {
  Registry r;
  auto g = r.AddGauge("odd", "Back\\slash and\nnewline.", {"v"});
  ASSERT_THAT(g, IsOk());
  (*g)->WithLabels({"quote\"back\\slash\nline"}).Set(std::numeric_limits<double>::infinity());
  (*g)->WithLabels({"bad\xff utf8"}).Set(std::nan(""));
  (*g)->WithLabels({"\xe6\xa0\xb8"}).Set(-std::numeric_limits<double>::infinity());
  (*g)->WithLabels({"small"}).Set(1.25e-7);
  (*g)->WithLabels({"big"}).Set(3e20);
  EXPECT_EQ(r.TextExposition(),
            "# HELP odd Back\\\\slash and\\nnewline.\n"
            "# TYPE odd gauge\n"
            "odd{v=\"bad? utf8\"} NaN\n"
            "odd{v=\"big\"} 3e+20\n"
            "odd{v=\"quote\\\"back\\\\slash\\nline\"} +Inf\n"
            "odd{v=\"small\"} 1.25e-07\n"
            "odd{v=\"\xe6\xa0\xb8\"} -Inf\n");
}

TEST(MetricsTest, EmptyRegistryAndEmptyFamiliesWriteNothing) {
  Registry r;
  ASSERT_THAT(r.AddGauge("g", "h", {"a"}), IsOk());
  EXPECT_EQ(r.TextExposition(), "");
}

TEST(MetricsTest, CardinalityCapDropsAndCounts) {
  Registry r;
  auto k = r.AddGauge("anxin_job_kernel_duration_seconds", "Kernel time.", {"kernel"},
                      {.max_series = 2});
  ASSERT_THAT(k, IsOk());
  Gauge& a = (*k)->WithLabels({"a"});
  Gauge& b = (*k)->WithLabels({"b"});
  Gauge& c1 = (*k)->WithLabels({"c"});
  Gauge& c2 = (*k)->WithLabels({"d"});
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&c1, &c2);  // the overflow series
  EXPECT_EQ(&(*k)->WithLabels({"a"}), &a);
  c1.Set(99);
  (*k)->WithLabels({"too", "many"}).Set(5);  // wrong arity: refused too
  EXPECT_EQ((*k)->size(), 2u);
  EXPECT_EQ(r.series_dropped(), 3u);
  std::string text = r.TextExposition();
  EXPECT_THAT(text, Not(HasSubstr("99")));
  EXPECT_THAT(text, HasSubstr("# TYPE anxin_metrics_series_dropped_total counter\n"
                              "anxin_metrics_series_dropped_total{family=\"anxin_job_kernel_"
                              "duration_seconds\"} 3\n"));
  // Removing a series makes room.
  (*k)->Remove({"a"});
  EXPECT_NE(&(*k)->WithLabels({"e"}), &c1);
  (*k)->RemoveIf([](const std::vector<std::string>& v) { return v[0] == "b" || v[0] == "e"; });
  EXPECT_EQ((*k)->size(), 0u);
}

TEST(MetricsTest, RegistrationRules) {
  Registry r;
  EXPECT_THAT(r.AddGauge("9lives", "", {}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddGauge("has-dash", "", {}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddCounter("requests", "", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("_total")));
  EXPECT_THAT(r.AddGauge("g", "", {"__reserved"}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddGauge("g", "", {"a", "a"}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddHistogram("h", "", {"le"}, {1}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {1, 1}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("strictly increasing")));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {1, INFINITY}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddCounter("anxin_metrics_series_dropped_total", "", {}),
              HasCode(ErrorCode::kInvalidArgument));

  auto g1 = r.AddGauge("ns:g", "help", {"a"});
  ASSERT_THAT(g1, IsOk());
  auto g2 = r.AddGauge("ns:g", "other help", {"a"});
  ASSERT_THAT(g2, IsOk());
  EXPECT_EQ(*g1, *g2);  // the same family
  EXPECT_THAT(r.AddGauge("ns:g", "", {"b"}), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.AddCounter("ns:g", "", {"a"}), HasCode(ErrorCode::kInvalidArgument));
  ASSERT_THAT(r.AddHistogram("h2", "", {}, {1, 2}), IsOk());
  EXPECT_THAT(r.AddHistogram("h2", "", {}, {1, 3}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("other buckets")));
}

TEST(MetricsTest, BucketBoundsAreInclusiveAndNaNIsIgnored) {
  Registry r;
  auto h = r.AddHistogram("h", "", {}, {1, 2});
  ASSERT_THAT(h, IsOk());
  Histogram& x = (*h)->WithLabels(std::initializer_list<std::string_view>{});
  x.Observe(1);
  x.Observe(2);
  x.Observe(2.0000001);
  x.Observe(std::nan(""));
  EXPECT_EQ(x.CumulativeCounts(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(x.count(), 3u);
  EXPECT_DOUBLE_EQ(x.sum(), 5.0000001);
}

TEST(MetricsTest, MergeAddsAnotherHistogramsObservations) {
  const std::vector<double> bounds = {1, 2};
  Histogram own(&bounds);
  own.Observe(0.5);
  own.Observe(1.5);
  own.Observe(7);
  Registry r;
  auto f = r.AddHistogram("x_seconds", "X.", {"route"}, bounds);
  ASSERT_TRUE(f.has_value());
  Histogram& h = (*f)->WithLabels({"/a"});
  h.Observe(2);
  h.Merge(own);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_DOUBLE_EQ(h.sum(), 11);
  const std::vector<double> other_bounds = {1, 3};
  Histogram other(&other_bounds);
  other.Observe(0.1);
  h.Merge(other);  // different buckets: ignored
  EXPECT_EQ(h.count(), 4u);
}

TEST(MetricsTest, CollectHooksRunBeforeEachExposition) {
  Registry r;
  auto g = r.AddGauge("age_seconds", "", {});
  ASSERT_THAT(g, IsOk());
  int runs = 0;
  r.AddCollectHook([&] {
    ++runs;
    (*g)->WithLabels(std::initializer_list<std::string_view>{}).Set(runs * 10);
  });
  EXPECT_THAT(r.TextExposition(), HasSubstr("age_seconds 10\n"));
  EXPECT_THAT(r.TextExposition(), HasSubstr("age_seconds 20\n"));
}

// Writers on their own series, writers creating and removing series, and
// readers all at once: the counts come out exact and every exposition is
// well formed (checked here by the line shapes; promtool checks one below).
TEST(MetricsTest, ConcurrentUpdatesAndExpositions) {
  Registry r;
  auto c = r.AddCounter("ops_total", "", {"thread"});
  auto h = r.AddHistogram("lat_seconds", "", {"thread"}, {0.001, 0.01, 0.1});
  auto churn = r.AddGauge("churn", "", {"i"}, {.max_series = 50});
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(h, IsOk());
  ASSERT_THAT(churn, IsOk());
  constexpr int kThreads = 3;
  constexpr int kOps = 50000;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      std::string text = r.TextExposition();
      ASSERT_TRUE(text.empty() || text.back() == '\n');
    }
  });
  std::thread churner([&] {
    for (int i = 0; !stop.load(); ++i) {
      (*churn)->WithLabels({std::to_string(i % 80)}).Set(i);
      if (i % 3 == 0) (*churn)->Remove({std::to_string((i / 3) % 80)});
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      Counter& mine = (*c)->WithLabels({std::to_string(t)});
      Histogram& lat = (*h)->WithLabels({std::to_string(t)});
      for (int i = 0; i < kOps; ++i) {
        mine.Inc();
        lat.Observe(0.005);
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  churner.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ((*c)->WithLabels({std::to_string(t)}).value(), kOps);
    EXPECT_EQ((*h)->WithLabels({std::to_string(t)}).count(), static_cast<uint64_t>(kOps));
  }
  EXPECT_LE((*churn)->size(), 50u);
}

// The real linter: promtool from Debian's prometheus package.
TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  const char* promtool = "/usr/bin/promtool";
  ASSERT_EQ(access(promtool, X_OK), 0)
      << "promtool missing: run scripts/install-deps (Debian package prometheus)";
  Registry r;
  auto c = r.AddCounter("anxin_sdk_messages_rejected_total", "SDK datagrams refused.",
                        {"node", "reason"});
  auto g = r.AddGauge("anxin_job_collective_busbw_bytes_per_second",
                      "Bus bandwidth of the latest collective.", {"node", "job", "rank", "op"});
  auto h = r.AddHistogram("anxin_job_step_duration_seconds", "Training step time.",
                          {"node", "job", "rank"}, {0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  auto k = r.AddGauge("anxin_job_kernel_jitter_ratio", "Latest over rolling median.",
                      {"node", "job", "rank", "kernel"}, {.max_series = 1});
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(g, IsOk());
  ASSERT_THAT(h, IsOk());
  ASSERT_THAT(k, IsOk());
  (*c)->WithLabels({"n1", "malformed"}).Inc(3);
  (*c)->WithLabels({"n1", "truncated"}).Inc();
  (*g)->WithLabels({"n1", "llama \"7b\"\n", "0", "all_reduce"}).Set(1.9e10);
  for (double v : {0.2, 0.3, 0.9, 12.0}) (*h)->WithLabels({"n1", "llama", "0"}).Observe(v);
  (*k)->WithLabels({"n1", "llama", "0", "gemm\\bf16"}).Set(3.1);
  (*k)->WithLabels({"n1", "llama", "0", "over the cap"}).Set(1);  // dropped, counted
  TempDir dir;
  std::string file = dir.Write("metrics.prom", r.TextExposition());
  auto out = RunCommand({promtool, "check", "metrics"},
                        {.timeout = std::chrono::seconds(60), .stdin_path = file});
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->exit_code, 0) << out->stdout_text << out->stderr_text << "\n"
                               << dir.Read("metrics.prom");
  EXPECT_EQ(out->stdout_text + out->stderr_text, "") << dir.Read("metrics.prom");
}

}  // namespace
}  // namespace anxin::monitor
