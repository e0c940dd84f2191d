#include "anxin/kernels/attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "anxin/base/testing.h"
#include "anxin/kernels/variant_cache.h"

namespace anxin::kernels {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

// Inputs in their storage type, and the same values as float64.
struct Inputs {
  std::vector<uint8_t> q, k, v;
  std::vector<double> qd, kd, vd;
};

void Fill(ElementType t, size_t n, std::mt19937_64& rng, std::vector<uint8_t>& raw,
          std::vector<double>& exact, float amplitude) {
  std::normal_distribution<float> d(0.0f, amplitude);
  std::vector<float> f(n);
  for (float& x : f) x = d(rng);
  raw.resize(n * ElementSize(t));
  FromFloat(t, f.data(), n, raw.data());
  ToFloat(t, raw.data(), n, f.data());  // what the storage type holds
  exact.assign(f.begin(), f.end());
}

Inputs MakeInputs(const AttentionArgs& a, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  Fill(a.dtype, a.shape.QElements(), rng, in.q, in.qd, 1.0f);
  Fill(a.dtype, a.shape.KvElements(), rng, in.k, in.kd, 1.0f);
  Fill(a.dtype, a.shape.KvElements(), rng, in.v, in.vd, 1.0f);
  return in;
}

// Float64 reference of forward (out, lse) and backward (dq, dk, dv).
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

Reference Reference64(const AttentionArgs& a, const Inputs& in, const std::vector<double>* dout) {
  const AttentionShape& s = a.shape;
  const int d = s.head_dim, lq = s.q_len, lk = s.kv_len, group = s.heads / s.kv_heads;
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(d));
  Reference r;
  r.out.assign(s.QElements(), 0);
  r.lse.assign(s.RowCount(), -std::numeric_limits<double>::infinity());
  r.dq.assign(s.QElements(), 0);
  r.dk.assign(s.KvElements(), 0);
  r.dv.assign(s.KvElements(), 0);
  for (int b = 0; b < s.batch; ++b) {
    const int valid = a.kv_valid.empty() ? lk : a.kv_valid[b];
    for (int h = 0; h < s.heads; ++h) {
      const size_t qb = (static_cast<size_t>(b) * s.heads + h) * lq * d;
      const size_t kb = (static_cast<size_t>(b) * s.kv_heads + h / group) * lk * d;
      for (int i = 0; i < lq; ++i) {
        int lim = std::min(valid, lk);
        if (a.causal) lim = std::min(lim, i + lk - lq + 1);
        if (lim <= 0) continue;
        std::vector<double> p(static_cast<size_t>(lim));
        double mx = -INFINITY;
        for (int j = 0; j < lim; ++j) {
          double acc = 0;
          for (int x = 0; x < d; ++x) acc += in.qd[qb + i * d + x] * in.kd[kb + j * d + x];
          p[j] = acc * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (double& x : p) x /= sum;
        r.lse[(static_cast<size_t>(b) * s.heads + h) * lq + i] = mx + std::log(sum);
        for (int j = 0; j < lim; ++j)
          for (int x = 0; x < d; ++x) r.out[qb + i * d + x] += p[j] * in.vd[kb + j * d + x];
        if (!dout) continue;
        const double* g = dout->data() + qb + static_cast<size_t>(i) * d;
        double di = 0;
        for (int x = 0; x < d; ++x) di += g[x] * r.out[qb + i * d + x];
        for (int j = 0; j < lim; ++j) {
          double dp = 0;
          for (int x = 0; x < d; ++x) dp += g[x] * in.vd[kb + j * d + x];
          const double ds = p[j] * (dp - di) * scale;
          for (int x = 0; x < d; ++x) {
            r.dv[kb + j * d + x] += p[j] * g[x];
            r.dq[qb + i * d + x] += ds * in.kd[kb + j * d + x];
            r.dk[kb + j * d + x] += ds * in.qd[qb + i * d + x];
          }
        }
      }
    }
  }
  return r;
}

struct Agreement {
  double cosine = 1, max_abs = 0;
};
Agreement Agree(const std::vector<float>& got, const std::vector<double>& want) {
  double dot = 0, g2 = 0, w2 = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    dot += got[i] * want[i];
    g2 += static_cast<double>(got[i]) * got[i];
    w2 += want[i] * want[i];
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    if (!std::isfinite(got[i])) worst = INFINITY;
  }
  Agreement a;
  a.cosine = (g2 == 0 && w2 == 0) ? 1 : dot / std::sqrt(g2 * w2);
  a.max_abs = worst;
  return a;
}

double Tolerance(ElementType t) {
  return t == ElementType::kFloat32 ? 2e-5 : t == ElementType::kFloat16 ? 2e-3 : 1.6e-2;
}

struct Case {
  const char* name;
  bool causal;
  bool padded;
};
constexpr Case kCases[] = {{"none", false, false},
                           {"causal", true, false},
                           {"padding", false, true},
                           {"both", true, true}};

// valid must outlive the arguments (they hold a span of it).
AttentionArgs Args(ElementType t, const Case& c, int lq, int lk, const std::vector<int>& valid) {
  AttentionArgs a;
  a.shape = {.batch = 2, .heads = 4, .kv_heads = 2, .q_len = lq, .kv_len = lk, .head_dim = 32};
  a.dtype = t;
  a.causal = c.causal;
  if (c.padded) a.kv_valid = valid;
  return a;
}

TEST(AttentionForward, MatchesFloat64OnEveryPathDtypeAndMask) {
  const std::vector<int> valid = {70, 130};
  for (Isa isa : AvailableIsas()) {
    for (ElementType t : {ElementType::kFloat32, ElementType::kBFloat16, ElementType::kFloat16}) {
      for (const Case& c : kCases) {
        for (auto [lq, lk] : {std::pair{130, 130}, std::pair{67, 130}}) {
          // Fewer queries than keys (a decode-like block) on the path auto picks.
          if (lq != lk && isa != AvailableIsas().back()) continue;
          SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << ElementTypeName(t) << " "
                                            << c.name << " q_len " << lq << " kv_len " << lk);
          AttentionArgs a = Args(t, c, lq, lk, valid);
          a.isa = isa;
          a.threads = 3;
          Inputs in = MakeInputs(a, 11);
          std::vector<uint8_t> out(a.shape.QElements() * ElementSize(t));
          std::vector<float> lse(a.shape.RowCount());
          ASSERT_THAT(
              AttentionForward(a, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data()),
              IsOk());
          Reference ref = Reference64(a, in, nullptr);
          std::vector<float> got(a.shape.QElements());
          ToFloat(t, out.data(), got.size(), got.data());
          Agreement ag = Agree(got, ref.out);
          EXPECT_GT(ag.cosine, 0.9999);
          EXPECT_LT(ag.max_abs, Tolerance(t));
          for (size_t i = 0; i < lse.size(); ++i) {
            if (std::isinf(ref.lse[i])) {
              ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "row " << i;
            } else {
              ASSERT_NEAR(lse[i], ref.lse[i], 1e-4) << "row " << i;
            }
          }
          // The three-pass form computes the same thing.
          std::vector<uint8_t> naive(out.size());
          ASSERT_THAT(NaiveAttentionForward(a, in.q.data(), in.k.data(), in.v.data(), naive.data()),
                      IsOk());
          std::vector<float> nf(got.size());
          ToFloat(t, naive.data(), nf.size(), nf.data());
          EXPECT_LT(Agree(nf, ref.out).max_abs, Tolerance(t));
        }
      }
    }
  }
}

TEST(AttentionForward, FullyMaskedRowsAreZero) {
  const std::vector<int> valid = {0, 40};  // batch 0: every key is padding
  AttentionArgs a = Args(ElementType::kFloat32, kCases[3], 40, 40, valid);
  Inputs in = MakeInputs(a, 3);
  std::vector<float> out(a.shape.QElements(), 99.0f), lse(a.shape.RowCount());
  ASSERT_THAT(AttentionForward(a, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data()),
              IsOk());
  const size_t batch0 = a.shape.QElements() / 2;
  for (size_t i = 0; i < batch0; ++i) ASSERT_EQ(out[i], 0.0f);
  EXPECT_TRUE(std::isinf(lse[0]));
}

TEST(AttentionBackward, MatchesFloat64Gradients) {
  const std::vector<int> valid = {50, 97};
  for (Isa isa : AvailableIsas()) {
    for (ElementType t : {ElementType::kFloat32, ElementType::kBFloat16}) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(::testing::Message()
                     << IsaName(isa) << " " << ElementTypeName(t) << " " << c.name);
        AttentionArgs a = Args(t, c, 97, 97, valid);
        a.isa = isa;
        a.threads = 2;
        Inputs in = MakeInputs(a, 5);
        std::vector<uint8_t> out(a.shape.QElements() * ElementSize(t));
        std::vector<float> lse(a.shape.RowCount());
        ASSERT_THAT(
            AttentionForward(a, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data()),
            IsOk());
        std::vector<uint8_t> dout;
        std::vector<double> doutd;
        std::mt19937_64 rng(9);
        Fill(t, a.shape.QElements(), rng, dout, doutd, 1.0f);
        std::vector<float> dq(a.shape.QElements()), dk(a.shape.KvElements()),
            dv(a.shape.KvElements());
        ASSERT_THAT(AttentionBackward(a, in.q.data(), in.k.data(), in.v.data(), out.data(),
                                      dout.data(), lse.data(), dq.data(), dk.data(), dv.data()),
                    IsOk());
        Reference ref = Reference64(a, in, &doutd);
        // The kernel's D_i uses the stored (rounded) output, the reference the
        // exact one: half-precision outputs widen the tolerance.
        const double cos_min = t == ElementType::kFloat32 ? 0.99999 : 0.999;
        EXPECT_GT(Agree(dq, ref.dq).cosine, cos_min);
        EXPECT_GT(Agree(dk, ref.dk).cosine, cos_min);
        EXPECT_GT(Agree(dv, ref.dv).cosine, cos_min);
        if (t == ElementType::kFloat32) {
          EXPECT_LT(Agree(dq, ref.dq).max_abs, 1e-4);
          EXPECT_LT(Agree(dk, ref.dk).max_abs, 1e-4);
          EXPECT_LT(Agree(dv, ref.dv).max_abs, 1e-4);
        }
      }
    }
  }
}

TEST(AttentionForward, RejectsShapesItCannotRun) {
  AttentionArgs a;
  a.shape = {.batch = 1, .heads = 2, .kv_heads = 2, .q_len = 8, .kv_len = 8, .head_dim = 24};
  std::vector<float> buf(1024);
  EXPECT_THAT(AttentionForward(a, buf.data(), buf.data(), buf.data(), buf.data(), nullptr),
              HasCode(ErrorCode::kInvalidArgument, ::testing::HasSubstr("head_dim 24")));
  a.shape.head_dim = 16;
  a.shape.kv_heads = 3;
  EXPECT_THAT(ValidateAttention(a), HasCode(ErrorCode::kInvalidArgument));
  a.shape.kv_heads = 1;
  std::vector<int> valid = {9};
  a.kv_valid = valid;
  EXPECT_THAT(ValidateAttention(a),
              HasCode(ErrorCode::kInvalidArgument, ::testing::HasSubstr("kv_valid[0] = 9")));
}

TEST(VariantCache, BucketedRunsCompileOncePerBucketAndMatchUnpadded) {
  const std::vector<int64_t> buckets = {64, 128, 256};
  VariantCache cache;
  AttentionArgs a;
  a.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = 0, .kv_len = 0, .head_dim = 32};
  a.dtype = ElementType::kBFloat16;
  a.causal = true;
  const std::vector<int> lengths = {10, 50, 64, 65, 100, 127, 200, 30};
  for (int len : lengths) {
    AttentionArgs u = a;
    u.shape.q_len = u.shape.kv_len = len;
    Inputs in = MakeInputs(u, static_cast<uint64_t>(len));
    std::vector<uint8_t> want(u.shape.QElements() * 2), got(want.size());
    ASSERT_THAT(AttentionForward(u, in.q.data(), in.k.data(), in.v.data(), want.data(), nullptr),
                IsOk());
    ASSERT_THAT(BucketedAttentionForward(cache, buckets, a, len, in.q.data(), in.k.data(),
                                         in.v.data(), got.data()),
                IsOk());
    // Same blocks, same order of accumulation: bit-identical rows.
    EXPECT_EQ(got, want) << "length " << len;
  }
  EXPECT_EQ(cache.compilations(), 3u);  // 64, 128, 256
  EXPECT_EQ(cache.hits(), lengths.size() - 3);

  std::vector<int64_t> stream;
  for (int i = 0; i < 1000; ++i) stream.push_back(1 + (i * 7919) % 250);
  auto count = CountCompilations(stream, buckets, 128, ElementType::kBFloat16, true);
  ASSERT_THAT(count, IsOk());
  EXPECT_EQ(count->bucketed, 3u);
  EXPECT_EQ(count->per_length, 250u);
  EXPECT_EQ(count->avoided(), 247u);
}

}  // namespace
}  // namespace anxin::kernels
