#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "anxin/base/half.h"
#include "anxin/base/testing.h"
#include "anxin/compare/tensor_metrics.h"
#include "anxin/kv/kv_accuracy.h"
#include "anxin/kv/kv_cache.h"
#include "anxin/kv/kv_format.h"
#include "anxin/kv/kv_kernels.h"

namespace anxin::kv {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

KvFormat F(std::string_view name) { return ParseKvFormat(name).value(); }

TEST(KvFormat, BitsPerValueOfEachFormat) {
  EXPECT_DOUBLE_EQ(F("fp16").BitsPerValue(), 16.0);
  EXPECT_DOUBLE_EQ(F("int8").BitsPerValue(), 8.5);
  EXPECT_DOUBLE_EQ(F("int8-asym").BitsPerValue(), 9.0);
  EXPECT_DOUBLE_EQ(F("int4").BitsPerValue(), 4.5);  // q4_0
  EXPECT_DOUBLE_EQ(F("int4-asym").BitsPerValue(), 5.0);
  EXPECT_DOUBLE_EQ(F("int4:g64").BitsPerValue(), 4.25);
  EXPECT_NEAR(16.0 / F("int4").BitsPerValue(), 3.56, 0.01);
}

TEST(KvFormat, NamesRoundTrip) {
  for (const char* n : {"fp16", "int8", "int8-asym", "int4", "int4-asym", "int4:kivi",
                        "int4-asym:kivi:g64", "int8:g128"}) {
    EXPECT_EQ(F(n).Name(), n);
  }
  EXPECT_EQ(F("q4_0"), F("int4"));
  EXPECT_EQ(F("int4-asym:g64:kivi").Name(), "int4-asym:kivi:g64");
}

TEST(KvFormat, RejectsBadNames) {
  EXPECT_THAT(ParseKvFormat("int3"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("int3")));
  EXPECT_THAT(ParseKvFormat("int4:g20"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("16")));
  EXPECT_THAT(ParseKvFormat("int4:zz"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseKvFormat("fp16:kivi"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(KvFormat, BytesPerTokenIsTwoTimesLayersHeadsDimBytes) {
  ModelKvShape llama3_8b{.layers = 32, .kv_heads = 8, .head_dim = 128};
  EXPECT_DOUBLE_EQ(BytesPerToken(llama3_8b, F("fp16")), 2.0 * 32 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(BytesPerToken(llama3_8b, F("int4")), 2.0 * 32 * 8 * 128 * 4.5 / 8);
}

TEST(KvFormat, LayoutChecks) {
  EXPECT_THAT(ValidateKvLayout(F("int4"), 128, 16), IsOk());
  EXPECT_THAT(ValidateKvLayout(F("int4:g64"), 80, 16), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ValidateKvLayout(F("int4:kivi"), 128, 16),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("block size")));
  EXPECT_THAT(ValidateKvLayout(F("int4:kivi"), 128, 64), IsOk());
  EXPECT_THAT(ValidateKvLayout(F("fp16"), 100, 16), HasCode(ErrorCode::kInvalidArgument));
}

// Rows of random data: plain Gaussian, or heavy-tailed with outlier channels.
std::vector<float> RandomRows(int rows, int d, bool outliers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0, 1);
  std::student_t_distribution<float> t(2.5f);
  std::vector<float> x(static_cast<size_t>(rows) * d);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) {
      float v = outliers ? t(rng) : n(rng);
      if (outliers && c % 37 == 5) v = v * 25 + 40;
      x[r * d + c] = v;
    }
  return x;
}

// The largest error each format may make on a group, from its extremes
// (kv_format.h): half a step, or for q4_0 a whole step at the clamped end.
double Bound(const KvFormat& f, float mx, float mn) {
  const double a = std::max(mx, -mn);
  const double slack = 1.0 + 1.0 / 512;
  if (f.dtype == KvDType::kFp16) return a * std::ldexp(1.0, -11) + 1e-7;
  if (f.scheme == KvScheme::kSymmetric) {
    if (f.dtype == KvDType::kInt8) return a / 127 / 2 * slack + 1e-6;
    return a / 8 * slack + 1e-6;
  }
  const double levels = f.dtype == KvDType::kInt8 ? 255 : 15;
  // The zero point rounds down by at most one fp16 step of the minimum.
  const double zstep = std::max(std::fabs(static_cast<double>(mn)) * std::ldexp(1.0, -10), 6e-8);
  return (mx - mn + zstep) / levels / 2 * slack + 1e-6;
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<std::string, KvIsa, bool>> {};

TEST_P(RoundTrip, ErrorWithinTheFormatsBound) {
  const auto& [name, isa, outliers] = GetParam();
  const KvFormat f = F(name);
  const internal::KvKernels& k = internal::KernelsFor(isa);
  const int d = 128, g = f.group_size, rows = 200;
  std::vector<float> x = RandomRows(rows, d, outliers, 11);
  std::vector<uint8_t> data(d * 2);
  std::vector<uint16_t> params(d * 2);
  std::vector<float> back(d);
  double worst_ratio = 0;
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * d;
    k.quantize_row(row, d, g, f.dtype, f.scheme, data.data(), params.data());
    k.dequant_row(data.data(), params.data(), d, g, f.dtype, f.scheme, back.data());
    for (int g0 = 0; g0 < d; g0 += g) {
      float mx = row[g0], mn = row[g0];
      for (int i = 0; i < g; ++i) mx = std::max(mx, row[g0 + i]), mn = std::min(mn, row[g0 + i]);
      const double bound = Bound(f, mx, mn);
      for (int i = 0; i < g; ++i) {
        const double err = std::fabs(static_cast<double>(back[g0 + i]) - row[g0 + i]);
        ASSERT_LE(err, bound) << name << " row " << r << " element " << g0 + i << " value "
                              << row[g0 + i];
        worst_ratio = std::max(worst_ratio, err / bound);
      }
    }
  }
  // The bound is tight: some element comes within half of it.
  EXPECT_GT(worst_ratio, 0.4) << name;
}

TEST_P(RoundTrip, PerChannelGroupsWithinTheBound) {
  const auto& [name, isa, outliers] = GetParam();
  const KvFormat f = F(name);
  if (!f.quantized()) GTEST_SKIP();
  const internal::KvKernels& k = internal::KernelsFor(isa);
  const int d = 128, rows = 32;
  std::vector<float> x = RandomRows(rows, d, outliers, 12);
  const int row_bytes = d * f.ElementBits() / 8;
  std::vector<uint8_t> data(rows * row_bytes);
  std::vector<uint16_t> params(d * 2);
  k.quantize_rows_per_channel(x.data(), rows, d, f.dtype, f.scheme, data.data(), params.data());
  const int per = f.ParamsPerGroup();
  std::vector<float> scale(d), zero(d), back(d);
  for (int c = 0; c < d; ++c) {
    scale[c] = HalfToFloat(params[c * per]);
    zero[c] = per == 2 ? HalfToFloat(params[c * per + 1]) : 0;
  }
  for (int r = 0; r < rows; ++r) {
    k.dequant_row_per_channel(data.data() + r * row_bytes, scale.data(), zero.data(), d, f.dtype,
                              f.scheme, back.data());
    for (int c = 0; c < d; ++c) {
      float mx = x[c], mn = x[c];
      for (int rr = 0; rr < rows; ++rr)
        mx = std::max(mx, x[rr * d + c]), mn = std::min(mn, x[rr * d + c]);
      ASSERT_LE(std::fabs(static_cast<double>(back[c]) - x[r * d + c]), Bound(f, mx, mn))
          << name << " row " << r << " channel " << c;
    }
  }
}

std::vector<std::tuple<std::string, KvIsa, bool>> RoundTripCases() {
  std::vector<std::tuple<std::string, KvIsa, bool>> cases;
  for (const char* f : {"fp16", "int8", "int8-asym", "int4", "int4-asym", "int4:g64", "int8:g16"})
    for (KvIsa isa : AvailableKvIsas())
      for (bool outliers : {false, true}) cases.emplace_back(f, isa, outliers);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, RoundTrip, ::testing::ValuesIn(RoundTripCases()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           std::replace_if(
                               n.begin(), n.end(), [](char c) { return !isalnum(c); }, '_');
                           return n + "_" + std::string(KvIsaName(std::get<1>(info.param))) +
                                  (std::get<2>(info.param) ? "_outliers" : "_gauss");
                         });

TEST(Packing, Int4NibblesAreExact) {
  // Values that land exactly on the grid: q4_0 with scale 1 (extreme -8).
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i % 16) - 8);
  std::vector<uint8_t> data(16);
  std::vector<uint16_t> params(1);
  const internal::KvKernels& k = internal::KernelsFor(KvIsa::kBaseline);
  k.quantize_row(x.data(), 32, 32, KvDType::kInt4, KvScheme::kSymmetric, data.data(),
                 params.data());
  EXPECT_EQ(HalfToFloat(params[0]), 1.0f);
  for (int i = 0; i < 16; ++i) {
    // Byte i: element 2i low, 2i+1 high, each stored as q + 8.
    const int lo = (2 * i) % 16, hi = (2 * i + 1) % 16;
    EXPECT_EQ(data[i], lo | (hi << 4)) << i;
  }
  std::vector<float> back(32);
  k.dequant_row(data.data(), params.data(), 32, 32, KvDType::kInt4, KvScheme::kSymmetric,
                back.data());
  EXPECT_EQ(back, x);
}

TEST(Packing, Int8SymmetricStoresSignedBytes) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = (i - 8) * 127.0f / 8;  // extreme -127
  std::vector<uint8_t> data(16);
  std::vector<uint16_t> params(1);
  internal::KernelsFor(KvIsa::kBaseline)
      .quantize_row(x.data(), 16, 16, KvDType::kInt8, KvScheme::kSymmetric, data.data(),
                    params.data());
  EXPECT_EQ(static_cast<int8_t>(data[0]), -127);
  EXPECT_EQ(data[8], 0);
}

TEST(Packing, RequantisingADequantisedRowGivesTheSameBytes) {
  for (const char* name : {"int8", "int8-asym", "int4", "int4-asym"}) {
    const KvFormat f = F(name);
    const internal::KvKernels& k = internal::KernelsFor(KvIsa::kAuto);
    std::vector<float> x = RandomRows(1, 128, true, 5), back(128), again(128);
    std::vector<uint8_t> d1(256), d2(256);
    std::vector<uint16_t> p1(16), p2(16);
    k.quantize_row(x.data(), 128, 32, f.dtype, f.scheme, d1.data(), p1.data());
    k.dequant_row(d1.data(), p1.data(), 128, 32, f.dtype, f.scheme, back.data());
    k.quantize_row(back.data(), 128, 32, f.dtype, f.scheme, d2.data(), p2.data());
    k.dequant_row(d2.data(), p2.data(), 128, 32, f.dtype, f.scheme, again.data());
    // The grid may shift by a rounding of the scale, never by more.
    for (int i = 0; i < 128; ++i)
      EXPECT_NEAR(again[i], back[i], std::fabs(back[i]) * 2e-3 + 1e-3) << name;
  }
}

TEST(Kernels, EveryInstructionSetMakesTheSameBytes) {
  const auto isas = AvailableKvIsas();
  if (isas.size() < 2) GTEST_SKIP() << "only the baseline runs here";
  std::vector<float> x = RandomRows(64, 128, true, 21);
  for (const char* name : {"fp16", "int8", "int8-asym", "int4", "int4-asym"}) {
    const KvFormat f = F(name);
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::vector<uint16_t>> params;
    std::vector<std::vector<float>> back;
    std::vector<float> dots;
    for (KvIsa isa : isas) {
      const internal::KvKernels& k = internal::KernelsFor(isa);
      ASSERT_EQ(k.isa, isa);
      std::vector<uint8_t> dd(64 * 256);
      std::vector<uint16_t> pp(64 * 16);
      std::vector<float> bb(64 * 128);
      for (int r = 0; r < 64; ++r) {
        k.quantize_row(x.data() + r * 128, 128, 32, f.dtype, f.scheme, dd.data() + r * 256,
                       pp.data() + r * 16);
        k.dequant_row(dd.data() + r * 256, pp.data() + r * 16, 128, 32, f.dtype, f.scheme,
                      bb.data() + r * 128);
      }
      dots.push_back(k.dot(bb.data(), x.data(), 64 * 128));
      data.push_back(dd);
      params.push_back(pp);
      back.push_back(bb);
    }
    for (size_t i = 1; i < isas.size(); ++i) {
      EXPECT_EQ(data[i], data[0]) << name << " " << KvIsaName(isas[i]);
      EXPECT_EQ(params[i], params[0]) << name << " " << KvIsaName(isas[i]);
      EXPECT_EQ(back[i], back[0]) << name << " " << KvIsaName(isas[i]);
      EXPECT_EQ(dots[i], dots[0]) << name << " " << KvIsaName(isas[i]);
    }
  }
}

struct AttentionCase {
  int tokens = 300, kv_heads = 2, q_heads = 8, head_dim = 128, block = 16;
};

// Attention of the quantised paged cache against the float64 reference,
// measured through compare's metric kernel.
compare::Metrics AttentionError(const KvFormat& f, KvIsa isa, const KvTensors& kv, int block) {
  const int nb = (kv.tokens + block - 1) / block + 3;
  auto cache = KvCache::Create({.kv_heads = kv.kv_heads,
                                .head_dim = kv.head_dim,
                                .block_tokens = block,
                                .num_blocks = nb,
                                .format = f,
                                .isa = isa});
  EXPECT_THAT(cache, IsOk());
  KvSequenceState seq;
  std::vector<int> perm(nb);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(9));
  seq.blocks.assign(perm.begin(), perm.begin() + (kv.tokens + block - 1) / block);
  const size_t row = static_cast<size_t>(kv.kv_heads) * kv.head_dim;
  for (int t = 0; t < kv.tokens; ++t) {
    cache->AppendToken(seq, kv.keys.data() + t * row, kv.values.data() + t * row);
  }
  EXPECT_EQ(seq.length, kv.tokens);
  const size_t qrow = static_cast<size_t>(kv.q_heads) * kv.head_dim;
  std::vector<float> out(qrow), ref(qrow);
  compare::MetricParams p =
      compare::MetricParams::For(compare::DType::kFloat32, compare::DType::kFloat32);
  compare::MetricAccumulator acc;
  for (int i = 0; i < kv.query_count; ++i) {
    cache->Attend(kv.queries.data() + i * qrow, kv.q_heads, seq, out.data());
    ReferenceAttention(kv.queries.data() + i * qrow, kv.q_heads, kv.keys.data(), kv.values.data(),
                       kv.tokens, kv.kv_heads, kv.head_dim, ref.data());
    acc.Add(p, compare::DType::kFloat32, out.data(), compare::DType::kFloat32, ref.data(), qrow);
  }
  return acc.Finish(p);
}

TEST(Attention, MatchesTheReferenceOnGaussianData) {
  KvTensors kv = SyntheticActivations({.tokens = 300,
                                       .kv_heads = 2,
                                       .head_dim = 128,
                                       .q_heads = 8,
                                       .queries = 4,
                                       .outlier_channels = 0,
                                       .tail_dof = 200});
  struct Want {
    const char* format;
    double min_cosine;
  };
  for (KvIsa isa : AvailableKvIsas()) {
    for (Want w : {Want{"fp16", 0.999999}, Want{"int8", 0.9999}, Want{"int8-asym", 0.9999},
                   Want{"int4", 0.99}, Want{"int4-asym", 0.99}, Want{"int4:kivi", 0.99},
                   Want{"int8-asym:kivi", 0.9999}}) {
      const KvFormat f = F(w.format);
      const int block = f.key_axis == KeyAxis::kPerChannel ? 64 : 16;
      compare::Metrics m = AttentionError(f, isa, kv, block);
      EXPECT_GT(m.cosine, w.min_cosine) << w.format << " " << KvIsaName(isa);
      EXPECT_LT(m.max_abs_err, 1.0 - w.min_cosine + 0.05) << w.format;
    }
  }
}

TEST(Attention, FewerBitsCostAccuracyInOrder) {
  KvTensors kv = SyntheticActivations({.tokens = 256, .queries = 8});
  const double fp16 = AttentionError(F("fp16"), KvIsa::kAuto, kv, 16).mean_abs_err;
  const double int8 = AttentionError(F("int8"), KvIsa::kAuto, kv, 16).mean_abs_err;
  const double int4 = AttentionError(F("int4"), KvIsa::kAuto, kv, 16).mean_abs_err;
  EXPECT_LT(fp16, int8);
  EXPECT_LT(int8, int4);
}

TEST(Attention, PerChannelKeysWinOnOutlierChannels) {
  // KIVI's observation: outlier channels make per-token key groups coarse;
  // grouping keys per channel keeps them exact.
  KvTensors kv = SyntheticActivations(
      {.tokens = 512, .queries = 8, .outlier_channels = 4, .outlier_scale = 30});
  compare::Metrics per_token = AttentionError(F("int4-asym"), KvIsa::kAuto, kv, 32);
  compare::Metrics per_channel = AttentionError(F("int4-asym:kivi"), KvIsa::kAuto, kv, 32);
  EXPECT_GT(per_channel.cosine, per_token.cosine);
  EXPECT_LT(per_channel.mean_abs_err, per_token.mean_abs_err);
}

TEST(Attention, ResidualTokensOfAnIncompleteGroupCount) {
  // 100 tokens with key groups of 32: the last 4 wait in the fp16 residual.
  KvTensors kv = SyntheticActivations({.tokens = 100, .queries = 3});
  compare::Metrics m = AttentionError(F("int8:kivi"), KvIsa::kAuto, kv, 32);
  EXPECT_GT(m.cosine, 0.999);
  // A query equal to the last token's key attends mostly to it: dropping the
  // residual would lose that.
  auto cache = KvCache::Create({.kv_heads = 1,
                                .head_dim = 16,
                                .block_tokens = 32,
                                .num_blocks = 1,
                                .format = F("int8:kivi:g16")});
  ASSERT_THAT(cache, IsOk());
  KvSequenceState seq{.blocks = {0}};
  std::vector<float> k(16, 0.0f), v(16, 0.0f);
  for (int t = 0; t < 5; ++t) {
    std::fill(k.begin(), k.end(), 0.0f);
    k[t] = 40.0f;
    std::fill(v.begin(), v.end(), static_cast<float>(t));
    cache->AppendToken(seq, k.data(), v.data());
  }
  std::vector<float> q(16, 0.0f), out(16);
  q[4] = 40.0f;
  cache->Attend(q.data(), 1, seq, out.data());
  EXPECT_NEAR(out[0], 4.0f, 0.01f);
}

TEST(KvCache, CopyBlockCopiesEveryToken) {
  auto cache = KvCache::Create({.kv_heads = 2,
                                .head_dim = 64,
                                .block_tokens = 16,
                                .num_blocks = 4,
                                .format = F("int4-asym")});
  ASSERT_THAT(cache, IsOk());
  KvSequenceState a{.blocks = {1}};
  std::vector<float> x = RandomRows(10, 128, false, 2);
  for (int t = 0; t < 10; ++t) cache->AppendToken(a, x.data() + t * 128, x.data() + t * 128);
  cache->CopyBlock(1, 3);
  KvSequenceState b = a;
  b.blocks = {3};
  for (int t = 0; t < 10; ++t)
    for (int h = 0; h < 2; ++h) {
      std::vector<float> ka(64), va(64), kb(64), vb(64);
      cache->ReadToken(a, t, h, ka.data(), va.data());
      cache->ReadToken(b, t, h, kb.data(), vb.data());
      EXPECT_EQ(ka, kb);
      EXPECT_EQ(va, vb);
    }
}

TEST(KvCache, StorageIsWhatTheFormatSays) {
  for (const char* name : {"fp16", "int8", "int4", "int4-asym", "int4-asym:kivi"}) {
    const KvFormat f = F(name);
    auto cache = KvCache::Create(
        {.kv_heads = 8, .head_dim = 128, .block_tokens = 32, .num_blocks = 10, .format = f});
    ASSERT_THAT(cache, IsOk());
    const double values = 2.0 * 10 * 32 * 8 * 128;
    EXPECT_DOUBLE_EQ(cache->bytes() * 8 / values, f.BitsPerValue()) << name;
    EXPECT_EQ(cache->BytesReadFor(64), cache->block_bytes() * 2) << name;
  }
}

TEST(KvCache, RejectsShapesTheFormatCannotHold) {
  EXPECT_THAT(KvCache::Create({.kv_heads = 1, .head_dim = 72, .num_blocks = 1}),
              HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(KvCache::Create({.kv_heads = 0, .head_dim = 64, .num_blocks = 1}),
              HasCode(ErrorCode::kInvalidArgument));
}

}  // namespace
}  // namespace anxin::kv
