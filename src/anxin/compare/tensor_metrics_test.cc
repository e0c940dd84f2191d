// Every metric against NumPy float64 on random and adversarial tensors
// (tests/fixtures/compare/metric_cases.py writes the tensors and NumPy's numbers).
#include "anxin/compare/tensor_metrics.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "anxin/base/testing.h"
#include "anxin/compare/api.h"
#include "anxin/compare/dump_compare.h"
#include "anxin/compare/npy.h"
#include "anxin/compare/testing_util.h"

namespace anxin::compare {
namespace {

using ::anxin::testing::HasCode;
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

// Every metric of m against NumPy's numbers e for the same case.
void ExpectAgreesWithNumpy(const Metrics& m, const json& e) {
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

// The whole pipeline (fused decoding, chunks, threads) on the path this CPU
// picks; each path is held to NumPy on its own below (KernelPathTest).
TEST_F(MetricsVsNumpy, EveryMetricEveryCase) {
  ASSERT_GE(expected_->size(), 25u);
  for (auto it = expected_->begin(); it != expected_->end(); ++it) {
    SCOPED_TRACE(it.key());
    auto out = ReadNpyFile(*dir_ / (it.key() + ".out.npy"), {});
    auto ref = ReadNpyFile(*dir_ / (it.key() + ".ref.npy"), {});
    ASSERT_THAT(out, IsOk());
    ASSERT_THAT(ref, IsOk());
    ExpectAgreesWithNumpy(ComputePairMetrics(*out, *ref, 1), it.value());
  }
}

// Same bits in every field (NaN equal to NaN).
::testing::AssertionResult SameBits(const Metrics& a, const Metrics& b) {
  std::string diffs;
  auto same = [&](const char* what, double x, double y) {
    if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y) && !(x != x && y != y))
      diffs += fmt::format(" {}: {} vs {};", what, x, y);
  };
  auto same_u = [&](const char* what, uint64_t x, uint64_t y) {
    if (x != y) diffs += fmt::format(" {}: {} vs {};", what, x, y);
  };
  same_u("elements", a.elements, b.elements);
  same_u("finite_pairs", a.finite_pairs, b.finite_pairs);
  same_u("nan_mismatch", a.nan_mismatch, b.nan_mismatch);
  same_u("inf_mismatch", a.inf_mismatch, b.inf_mismatch);
  same_u("allclose_violations", a.allclose_violations, b.allclose_violations);
  same("cosine", a.cosine, b.cosine);
  same("max_abs_err", a.max_abs_err, b.max_abs_err);
  same("max_rel_err", a.max_rel_err, b.max_rel_err);
  same("mean_abs_err", a.mean_abs_err, b.mean_abs_err);
  same("mean_rel_err", a.mean_rel_err, b.mean_rel_err);
  same("rmse", a.rmse, b.rmse);
  same("one_thousandth_ratio", a.one_thousandth_ratio, b.one_thousandth_ratio);
  same("five_thousandth_ratio", a.five_thousandth_ratio, b.five_thousandth_ratio);
  same("max_ulp_err", a.max_ulp_err.value_or(-1), b.max_ulp_err.value_or(-1));
  same("ulp_above_one_ratio", a.ulp_above_one_ratio.value_or(-1),
       b.ulp_above_one_ratio.value_or(-1));
  same("required_atol", a.required_atol, b.required_atol);
  same("required_rtol", a.required_rtol, b.required_rtol);
  same("out_max", a.out_max, b.out_max);
  same("out_min", a.out_min, b.out_min);
  same("out_mean", a.out_mean, b.out_mean);
  same("out_norm", a.out_norm, b.out_norm);
  same("ref_max", a.ref_max, b.ref_max);
  same("ref_min", a.ref_min, b.ref_min);
  same("ref_mean", a.ref_mean, b.ref_mean);
  same("ref_norm", a.ref_norm, b.ref_norm);
  if (diffs.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diffs;
}

// One instruction-set path of the kernel, forced, on every NumPy case: it
// agrees with NumPy and gives the same bits as the whole pipeline on the
// path this CPU picks.
void NumpyCasesOnPath(KernelPath path, const testing::ScratchDir& dir, const json& expected) {
  ASSERT_GE(expected.size(), 25u);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    SCOPED_TRACE(it.key());
    auto out = ReadNpyFile(dir / (it.key() + ".out.npy"), {});
    auto ref = ReadNpyFile(dir / (it.key() + ".ref.npy"), {});
    ASSERT_THAT(out, IsOk());
    ASSERT_THAT(ref, IsOk());
    const Metrics want = ComputePairMetrics(*out, *ref, 1);
    const size_t n = out->NumElements();
    std::vector<double> a(n), b(n);
    if (n) {
      // Two column-major tensors of one shape are compared as stored.
      const bool stored = out->fortran_order && ref->fortran_order && out->shape.size() >= 2;
      for (auto [t, v] : {std::pair{&*out, &a}, std::pair{&*ref, &b}}) {
        if (stored) {
          ConvertToDouble(*t->dtype, t->data, t->swap_bytes, n, v->data());
        } else {
          t->ReadDoubles(0, n, v->data());
        }
      }
    }
    MetricParams p = MetricParams::For(*out->dtype, *ref->dtype);
    p.path = path;
    MetricAccumulator acc;
    acc.Add(p, a.data(), b.data(), n);
    const Metrics got = acc.Finish(p);
    ExpectAgreesWithNumpy(got, it.value());
    EXPECT_TRUE(SameBits(got, want));
  }
}

// Raw bit patterns of each decoded format: every half and bfloat16 value
// (NaN, Inf, subnormals included), random float32 bits and float64 values
// around the extremes. Each (out, ref) format pair, on the path, fused
// decoding gives the same bits as ConvertToDouble followed by the float64
// kernel, and both the same bits as the baseline path; odd lengths exercise
// the padded tail.
void FusedDecodingOnPath(KernelPath path) {
  constexpr size_t kN = 65536 + 5;
  std::mt19937_64 rng(7);
  auto bytes_of = [&](DType dt, int side) {
    std::vector<uint8_t> v(kN * DTypeSize(dt));
    for (size_t i = 0; i < kN; ++i) {
      switch (dt) {
        case DType::kFloat16:
        case DType::kBFloat16: {
          // Both sides see every pattern, shifted so that they pair differently.
          uint16_t h = static_cast<uint16_t>(side ? (i * 7 + 3) : i);
          if (side && i % 5 == 0) h = static_cast<uint16_t>(i);  // some equal pairs
          std::memcpy(&v[i * 2], &h, 2);
          break;
        }
        case DType::kFloat32: {
          uint32_t f = static_cast<uint32_t>(rng());
          if (i % 3 == 0) f = std::bit_cast<uint32_t>(static_cast<float>(rng() % 2001) - 1000.f);
          std::memcpy(&v[i * 4], &f, 4);
          break;
        }
        default: {
          double d;
          switch (i % 6) {
            case 0:
              d = std::ldexp(1.0 + static_cast<double>(rng() % 1000) / 1000, 1023);
              break;
            case 1:
              d = std::ldexp(static_cast<double>(rng() % 1000), -1074);
              break;
            case 2:
              d = std::bit_cast<double>(rng());
              break;
            default:
              d = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 7;
          }
          std::memcpy(&v[i * 8], &d, 8);
        }
      }
    }
    return v;
  };
  const DType kTypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (DType dto : kTypes) {
    for (DType dtr : kTypes) {
      SCOPED_TRACE(fmt::format("{} vs {}", DTypeName(dto), DTypeName(dtr)));
      const auto o = bytes_of(dto, 0), r = bytes_of(dtr, 1);
      std::vector<double> a(kN), b(kN);
      ConvertToDouble(dto, o.data(), false, kN, a.data());
      ConvertToDouble(dtr, r.data(), false, kN, b.data());
      MetricParams p = MetricParams::For(dto, dtr);
      p.path = KernelPath::kBaseline;
      MetricAccumulator ref_acc;
      ref_acc.Add(p, a.data(), b.data(), kN);
      const Metrics want = ref_acc.Finish(p);
      if (dto == dtr && DTypeSize(dto) == 2) {
        EXPECT_GT(want.nan_mismatch, 0u);
        EXPECT_GT(want.inf_mismatch, 0u);
      }
      p.path = path;
      MetricAccumulator f64, fused;
      f64.Add(p, a.data(), b.data(), kN);
      fused.Add(p, dto, o.data(), dtr, r.data(), kN);
      EXPECT_TRUE(SameBits(f64.Finish(p), want));
      EXPECT_TRUE(SameBits(fused.Finish(p), want));
    }
  }
}

// The ULP scale is built from exponent bits; check it at the edges of the
// float64 range against the definition, |N-B| / 2^eb * 2^mant.
void UlpEdgesOnPath(KernelPath path) {
  const double huge = std::ldexp(1.5, 1023), tiny = std::ldexp(3.0, -1070);
  struct Case {
    double out, ref, want;
  } cases[] = {
      {huge - std::ldexp(1.0, 971), huge,
       std::ldexp(std::ldexp(1.0, 971) / std::ldexp(1.0, 1023), 52)},
      {std::ldexp(1.0, 1023), huge, std::ldexp(std::ldexp(1.0, 1022) / std::ldexp(1.0, 1023), 52)},
      {tiny * 2, tiny, std::ldexp(tiny / std::ldexp(1.0, -1022), 52)},
      {1.0 + std::ldexp(1.0, -52), 1.0, 1.0},
      {std::ldexp(1.0, -1074), 0.0,
       std::ldexp(std::ldexp(1.0, -1074) / std::ldexp(1.0, -1022), 52)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} vs {}", c.out, c.ref));
    MetricParams p = MetricParams::For(DType::kFloat64, DType::kFloat64);
    p.path = path;
    MetricAccumulator acc;
    acc.Add(p, &c.out, &c.ref, 1);
    EXPECT_EQ(*acc.Finish(p).max_ulp_err, c.want);
  }
}

// Blocks of every kind the kernel treats differently: clean and close, across
// the thousandth thresholds, far apart (ULP errors and allclose violations),
// zero references, NaN and Inf, values of 2^600 (their squares overflow),
// subnormal references, exact ties with the thresholds, and blocks whose
// largest errors sit exactly on a threshold; in an order that
// takes the kernel through each of its modes and count deferrals. Every
// block through the general mode gives the same bits, on the path, for
// float64 data and for each fused format; the kernel's own statistics show
// that each mode ran.
void ModeChoiceOnPath(KernelPath path) {
  constexpr size_t kBlock = 2048;  // the kernel's block
  const int kKinds[] = {0, 0, 1, 0, 3, 3, 0, 4, 0, 2, 2, 0,  5,  0,  6,  7, 0,  1, 1,  3,  0, 7,
                        2, 0, 4, 4, 0, 8, 8, 0, 9, 9, 0, 10, 11, 10, 11, 8, 11, 9, 11, 12, 0};
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g;
  std::vector<double> a, b;
  auto away = [&] {  // a normal value at least 0.1 from zero
    double x = g(rng);
    return x < 0 ? x - 0.1 : x + 0.1;
  };
  auto fill = [&](int kind, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      double y = away(), x = y * (1 + 1e-5 * g(rng));
      switch (kind) {
        case 1:
          x = y * (1 + 0.003 * g(rng));
          break;
        case 2:
          x = y + g(rng);
          break;
        case 3:
          if (i % 97 == 5) y = 0, x = i % 2 ? 0.0 : 1e-3 * g(rng);
          break;
        case 4:
          if (i % 101 == 3) x = NAN;
          if (i % 103 == 7) y = HUGE_VAL;
          if (i % 107 == 9) x = y = -HUGE_VAL;
          break;
        case 5:
          y = std::ldexp(y, 600), x = y * (1 + 1e-6 * g(rng));
          break;
        case 6:
          y = std::ldexp(y, -1060), x = y + std::ldexp(g(rng), -1070);
          break;
        case 8:  // close, with the largest relative error exactly 0.001
          if (i % 64 == 1) y = 1000, x = 1001;
          break;
        case 9:  // close, with the largest relative error exactly 0.005
          if (i % 64 == 1) y = -1000, x = -1005;
          break;
        case 10:  // tiny values: the largest |N-B| exactly atol (1e-7), or
                  // 1.5 atol, past atol + rtol |B|
          y = 1e-7 * g(rng), x = y * (1 + 1e-3 * g(rng));
          if (i % 64 == 1) y = 1e-7, x = i % 128 == 1 ? 2e-7 : 2.5e-7;
          break;
        case 12:  // relative errors just over float64's rtol: violations
          y = 3 + 0.1 * std::fabs(g(rng)), x = y * (1 + 1.5e-7);
          break;
        case 11:  // identical: every count settled, so the next block defers all
          x = y;
          break;
        case 7:
          // rel exactly 0.001 and 0.005, ULP error exactly 1, and |N-B|
          // right at atol + rtol |B| for float64's defaults.
          switch (i % 4) {
            case 0:
              y = 1000, x = 1001;
              break;
            case 1:
              y = -1000, x = -1005;
              break;
            case 2:
              y = 1.5, x = std::nextafter(1.5, 2.0);
              break;
            default:
              y = 3, x = y + (1e-7 + 1e-7 * 3);
          }
          break;
        default:
          break;
      }
      a.push_back(x);
      b.push_back(y);
    }
  };
  for (int kind : kKinds) fill(kind, kBlock);
  fill(0, 1000);  // and a tail
  const size_t n = a.size();

  auto bytes = [&](DType dt, const std::vector<double>& v) {
    std::vector<uint8_t> out(v.size() * DTypeSize(dt));
    for (size_t i = 0; i < v.size(); ++i) {
      if (dt == DType::kFloat64) {
        std::memcpy(&out[i * 8], &v[i], 8);
      } else if (dt == DType::kFloat32) {
        float f = static_cast<float>(v[i]);
        std::memcpy(&out[i * 4], &f, 4);
      } else if (dt == DType::kFloat16) {
        _Float16 h = static_cast<_Float16>(v[i]);
        std::memcpy(&out[i * 2], &h, 2);
      } else {
        uint32_t f = std::bit_cast<uint32_t>(static_cast<float>(v[i]));
        uint16_t h = static_cast<uint16_t>(f >> 16);
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
    return out;
  };
  const DType kTypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (DType dto : kTypes) {
    for (DType dtr : kTypes) {
      const auto o = bytes(dto, a), r = bytes(dtr, b);
      for (bool wide_ulp : {false, true}) {
        SCOPED_TRACE(fmt::format("{} vs {}{}", DTypeName(dto), DTypeName(dtr),
                                 wide_ulp ? ", float64 ULP" : ""));
        MetricParams p = MetricParams::For(dto, dtr);
        if (wide_ulp) p.ulp_mantissa_bits = 52, p.ulp_min_exponent = -1022;
        p.path = path;
        MetricAccumulator adaptive, general;
        adaptive.Add(p, dto, o.data(), dtr, r.data(), n);
        p.general_mode_only = true;
        general.Add(p, dto, o.data(), dtr, r.data(), n);
        EXPECT_TRUE(SameBits(adaptive.Finish(p), general.Finish(p)));
        const KernelStats st = adaptive.Stats();
        EXPECT_GT(st.fast_blocks, 0u);
        EXPECT_GT(st.zeros_blocks, 0u);
        EXPECT_GT(st.general_blocks, 0u);
        EXPECT_GT(st.retries, 0u);
        EXPECT_GT(st.recounted_blocks, 0u);
        EXPECT_EQ(general.Stats().fast_blocks + general.Stats().zeros_blocks, 0u);
      }
    }
  }
}

// One case per instruction-set path of the kernel. Each is its own ctest
// entry (compare_metrics_test.baseline, .avx2, .avx512; CMakeLists.txt), in
// the sanitized and in the optimised build, and one this CPU cannot run is
// skipped and reported so, by name: forcing it would silently run another.
class KernelPathTest : public MetricsVsNumpy, public ::testing::WithParamInterface<KernelPath> {};

TEST_P(KernelPathTest, AgreesWithNumpyAndEveryOtherPath) {
  const KernelPath path = GetParam();
  const std::vector<KernelPath> have = AvailableKernelPaths();
  ASSERT_EQ(have.front(), KernelPath::kBaseline);
  if (std::find(have.begin(), have.end(), path) == have.end())
    GTEST_SKIP() << "this CPU cannot run the " << KernelPathName(path) << " kernel";
  {
    SCOPED_TRACE("NumPy cases");
    NumpyCasesOnPath(path, *dir_, *expected_);
  }
  {
    SCOPED_TRACE("fused decoding");
    FusedDecodingOnPath(path);
  }
  {
    SCOPED_TRACE("ULP at the edges of float64");
    UlpEdgesOnPath(path);
  }
  {
    SCOPED_TRACE("mode choice");
    ModeChoiceOnPath(path);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelPathTest,
                         ::testing::Values(KernelPath::kBaseline, KernelPath::kAvx2,
                                           KernelPath::kAvx512),
                         [](const ::testing::TestParamInfo<KernelPath>& info) {
                           return std::string(KernelPathName(info.param));
                         });

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
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->verdict, Verdict::kPass) << ok->Summary();
  auto fail = CompareSpans<float>(bad, ref);
  ASSERT_THAT(fail, IsOk());
  EXPECT_EQ(fail->verdict, Verdict::kFail) << fail->Summary();
  EXPECT_THAT(fail->Summary(), ::testing::HasSubstr("MaxAbsErr 2 >= 1"));
  // bfloat16 bits against float32: 1.0 is 0x3f80.
  std::vector<uint16_t> bf(4, 0x3f80);
  std::vector<float> one(4, 1.0f);
  auto r = CompareBuffers(DType::kBFloat16, bf.data(), DType::kFloat32, one.data(), 4);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(*r.metrics.max_ulp_err, 0.0);
}

// A kernel that wrote too few (or too many) elements must not pass on the
// prefix that happens to match: spans of different lengths are an error.
TEST(CompareBuffers, SpansOfDifferentLengthsAreAnError) {
  std::vector<float> ref(4096, 1.0f);
  std::vector<float> shorter(ref.begin(), ref.begin() + 4000);
  std::vector<float> longer(4097, 1.0f);
  EXPECT_THAT(CompareSpans<float>(shorter, ref),
              HasCode(ErrorCode::kInvalidArgument,
                      ::testing::HasSubstr("the output has 4000 elements and the reference 4096")));
  EXPECT_THAT(CompareSpans<float>(longer, ref),
              HasCode(ErrorCode::kInvalidArgument,
                      ::testing::HasSubstr("the output has 4097 elements and the reference 4096")));
  std::vector<double> empty;
  auto none = CompareSpans<double>(empty, empty);
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(none->metrics.elements, 0u);
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
