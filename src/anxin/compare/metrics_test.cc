// Every metric against NumPy float64 on random and adversarial tensors
// (tests/fixtures/compare/metric_cases.py writes the tensors and NumPy's numbers).
#include "anxin/compare/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "anxin/base/testing.h"
#include "anxin/compare/api.h"
#include "anxin/compare/compare.h"
#include "anxin/compare/npy.h"
#include "anxin/compare/testing_util.h"

namespace anxin::compare {
namespace {

using ::anxin::testing::IsOk;
using nlohmann::json;

double Value(const json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "nan") return NAN;
    return s == "inf" ? HUGE_VAL : -HUGE_VAL;
  }
  return v.get<double>();
}

// Agreement to 1e-12 relative. `scale` widens the bound for sums whose terms
// cancel (a cosine near 0, a mean near 0): there the error of any summation
// order is relative to the sum of |terms|, not to the result.
::testing::AssertionResult Near(const char* what, double got, double want, double scale = 0) {
  if (std::isnan(got) && std::isnan(want)) return ::testing::AssertionSuccess();
  if (got == want) return ::testing::AssertionSuccess();
  double bound = 1e-12 * std::max(std::fabs(want), scale);
  if (std::fabs(got - want) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": anxin " << got << " numpy " << want << " (diff " << std::fabs(got - want)
         << ", bound " << bound << ")";
}

class MetricsVsNumpy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    ASSERT_EQ(testing::RunPython({testing::FixturePath("metric_cases.py"), dir_->path()}), 0);
    expected_ = new json(json::parse(testing::ReadAll(*dir_ / "expected.json")));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete dir_;
  }
  static testing::ScratchDir* dir_;
  static json* expected_;
};
testing::ScratchDir* MetricsVsNumpy::dir_ = nullptr;
json* MetricsVsNumpy::expected_ = nullptr;

TEST_F(MetricsVsNumpy, EveryMetricEveryCase) {
  ASSERT_GE(expected_->size(), 25u);
  for (auto it = expected_->begin(); it != expected_->end(); ++it) {
    SCOPED_TRACE(it.key());
    const json& e = it.value();
    auto out = ReadNpyFile(*dir_ / (it.key() + ".out.npy"), {});
    auto ref = ReadNpyFile(*dir_ / (it.key() + ".ref.npy"), {});
    ASSERT_THAT(out, IsOk());
    ASSERT_THAT(ref, IsOk());
    Metrics m = ComputePairMetrics(*out, *ref, 1);
    EXPECT_EQ(m.elements, e["elements"].get<uint64_t>());
    EXPECT_EQ(m.finite_pairs, e["finite_pairs"].get<uint64_t>());
    EXPECT_EQ(m.nan_mismatch, e["nan_mismatch"].get<uint64_t>());
    EXPECT_EQ(m.inf_mismatch, e["inf_mismatch"].get<uint64_t>());
    EXPECT_EQ(m.allclose_violations, e["allclose_violations"].get<uint64_t>());
    EXPECT_TRUE(Near("cosine", m.cosine, Value(e["cosine"]), Value(e["cosine_scale"])));
    EXPECT_TRUE(Near("max_abs_err", m.max_abs_err, Value(e["max_abs_err"])));
    EXPECT_TRUE(Near("max_rel_err", m.max_rel_err, Value(e["max_rel_err"])));
    EXPECT_TRUE(Near("mean_abs_err", m.mean_abs_err, Value(e["mean_abs_err"])));
    EXPECT_TRUE(Near("mean_rel_err", m.mean_rel_err, Value(e["mean_rel_err"])));
    EXPECT_TRUE(Near("rmse", m.rmse, Value(e["rmse"])));
    EXPECT_TRUE(Near("euclidean_distance", m.euclidean_distance, Value(e["euclidean_distance"])));
    EXPECT_TRUE(
        Near("one_thousandth_ratio", m.one_thousandth_ratio, Value(e["one_thousandth_ratio"])));
    EXPECT_TRUE(
        Near("five_thousandth_ratio", m.five_thousandth_ratio, Value(e["five_thousandth_ratio"])));
    if (e["max_ulp_err"].is_null()) {
      EXPECT_FALSE(m.max_ulp_err.has_value());
    } else {
      ASSERT_TRUE(m.max_ulp_err.has_value());
      EXPECT_TRUE(Near("max_ulp_err", *m.max_ulp_err, Value(e["max_ulp_err"])));
      EXPECT_TRUE(
          Near("ulp_above_one_ratio", *m.ulp_above_one_ratio, Value(e["ulp_above_one_ratio"])));
    }
    EXPECT_TRUE(Near("required_atol", m.required_atol, Value(e["required_atol"])));
    EXPECT_TRUE(Near("required_rtol", m.required_rtol, Value(e["required_rtol"])));
    EXPECT_TRUE(Near("out_max", m.out_max, Value(e["out_max"])));
    EXPECT_TRUE(Near("out_min", m.out_min, Value(e["out_min"])));
    EXPECT_TRUE(Near("out_mean", m.out_mean, Value(e["out_mean"]), Value(e["out_mean_scale"])));
    EXPECT_TRUE(Near("out_norm", m.out_norm, Value(e["out_norm"])));
    EXPECT_TRUE(Near("ref_max", m.ref_max, Value(e["ref_max"])));
    EXPECT_TRUE(Near("ref_min", m.ref_min, Value(e["ref_min"])));
    EXPECT_TRUE(Near("ref_mean", m.ref_mean, Value(e["ref_mean"]), Value(e["ref_mean_scale"])));
    EXPECT_TRUE(Near("ref_norm", m.ref_norm, Value(e["ref_norm"])));
  }
}

TEST_F(MetricsVsNumpy, ThreadCountDoesNotChangeTheNumbers) {
  auto out = ReadNpyFile(*dir_ / "f32_noise.out.npy", {});
  auto ref = ReadNpyFile(*dir_ / "f32_noise.ref.npy", {});
  ASSERT_THAT(out, IsOk());
  ASSERT_THAT(ref, IsOk());
  Metrics a = ComputePairMetrics(*out, *ref, 1);
  Metrics b = ComputePairMetrics(*out, *ref, 4);
  EXPECT_EQ(a.cosine, b.cosine);
  EXPECT_EQ(a.rmse, b.rmse);
  EXPECT_EQ(a.mean_rel_err, b.mean_rel_err);
}

TEST(Metrics, BlocksInAnyOrderMergeToTheSameCounts) {
  std::vector<double> o(1000), r(1000);
  for (int i = 0; i < 1000; ++i) {
    r[i] = i - 500.0;
    o[i] = r[i] + (i % 7 == 0 ? 0.5 : 0.0);
  }
  MetricParams p = MetricParams::For(DType::kFloat32, DType::kFloat32);
  MetricAccumulator whole, a, b;
  whole.Add(p, o.data(), r.data(), 1000);
  b.Add(p, o.data() + 300, r.data() + 300, 700);
  a.Add(p, o.data(), r.data(), 300);
  b.Merge(a);
  Metrics mw = whole.Finish(p), mb = b.Finish(p);
  EXPECT_EQ(mw.allclose_violations, mb.allclose_violations);
  EXPECT_EQ(mw.max_abs_err, 0.5);
  EXPECT_EQ(mb.max_abs_err, 0.5);
  EXPECT_DOUBLE_EQ(mw.cosine, mb.cosine);
  // r == 0 at i == 500, o == 0.5 there? 500 % 7 != 0, so equal: finite rtol.
  EXPECT_TRUE(std::isfinite(mw.required_rtol));
}

TEST(CompareBuffers, KernelAuthorApiGivesVerdicts) {
  std::vector<float> ref(4096), good(4096), bad(4096);
  for (size_t i = 0; i < ref.size(); ++i) {
    ref[i] = std::sin(0.01f * static_cast<float>(i));
    good[i] = ref[i] + 1e-5f;
    bad[i] = ref[i] + (i == 100 ? 2.0f : 0.0f);
  }
  auto ok = CompareSpans<float>(good, ref);
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.Summary();
  auto fail = CompareSpans<float>(bad, ref);
  EXPECT_EQ(fail.verdict, Verdict::kFail) << fail.Summary();
  EXPECT_THAT(fail.Summary(), ::testing::HasSubstr("MaxAbsErr 2 >= 1"));
  // bfloat16 bits against float32: 1.0 is 0x3f80.
  std::vector<uint16_t> bf(4, 0x3f80);
  std::vector<float> one(4, 1.0f);
  auto r = CompareBuffers(DType::kBFloat16, bf.data(), DType::kFloat32, one.data(), 4);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(*r.metrics.max_ulp_err, 0.0);
}

TEST(DType, DecodesKnownValues) {
  EXPECT_EQ(HalfToDouble(0x3c00), 1.0);
  EXPECT_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(HalfToDouble(0x7bff), 65504.0);
  EXPECT_TRUE(std::isinf(HalfToDouble(0xfc00)));
  EXPECT_EQ(BFloat16ToDouble(0xc000), -2.0);
  EXPECT_EQ(Float8E4M3ToDouble(0x7e), 448.0);
  EXPECT_TRUE(std::isnan(Float8E4M3ToDouble(0x7f)));
  EXPECT_EQ(Float8E4M3ToDouble(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(Float8E5M2ToDouble(0x7b), 57344.0);
  EXPECT_TRUE(std::isinf(Float8E5M2ToDouble(0x7c)));
  EXPECT_EQ(ParseDTypeName("torch.bfloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDTypeName("F8_E4M3"), DType::kFloat8E4M3);
  EXPECT_FALSE(ParseDTypeName("complex64").has_value());
}

}  // namespace
}  // namespace anxin::compare
