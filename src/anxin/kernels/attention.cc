#include "anxin/kernels/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "anxin/kernels/attention_kernel.h"
#include "anxin/kernels/rounding.h"

namespace anxin::kernels {
namespace {

bool CpuHas(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    default:
      return true;
  }
}

// Chosen once: the best path this CPU has.
Isa AutoIsa() {
  static const Isa best = AvailableIsas().back();
  return best;
}

internal::KernelEntry EntryFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::Avx512Kernel();
    case Isa::kAvx2:
      return internal::Avx2Kernel();
    default:
      return internal::BaselineKernel();
  }
}

Result<internal::KernelEntry> Pick(const AttentionArgs& a) {
  Isa isa = a.isa == Isa::kAuto ? AutoIsa() : a.isa;
  if (!CpuHas(isa))
    return Unavailable(
        fmt::format("this CPU cannot run the {} attention kernel; use auto", IsaName(isa)));
  return EntryFor(isa);
}

// Runs fn(worker, workers) on `threads` threads (the caller's being one).
template <typename F>
void Parallel(int threads, const F& fn) {
  if (threads <= 1) {
    fn(0, 1);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int w = 1; w < threads; ++w) pool.emplace_back([&fn, w, threads] { fn(w, threads); });
  fn(0, threads);
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::string_view ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kBFloat16:
      return "bfloat16";
    case ElementType::kFloat16:
      return "float16";
  }
  return "?";
}

size_t ElementSize(ElementType t) { return t == ElementType::kFloat32 ? 4 : 2; }

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> isas{Isa::kBaseline};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (CpuHas(isa)) isas.push_back(isa);
  return isas;
}

size_t AttentionShape::QElements() const {
  return static_cast<size_t>(batch) * heads * q_len * head_dim;
}
size_t AttentionShape::KvElements() const {
  return static_cast<size_t>(batch) * kv_heads * kv_len * head_dim;
}
size_t AttentionShape::RowCount() const { return static_cast<size_t>(batch) * heads * q_len; }
double AttentionShape::Flops() const {
  return 4.0 * batch * heads * static_cast<double>(q_len) * kv_len * head_dim;
}

Status ValidateAttention(const AttentionArgs& a) {
  const AttentionShape& s = a.shape;
  if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.q_len < 1 || s.kv_len < 1)
    return InvalidArgument(fmt::format(
        "attention shape batch {} heads {} kv_heads {} q_len {} kv_len {}: each must be 1 or more",
        s.batch, s.heads, s.kv_heads, s.q_len, s.kv_len));
  if (s.heads % s.kv_heads != 0)
    return InvalidArgument(
        fmt::format("{} heads do not share {} kv heads evenly: give heads a "
                    "multiple of kv_heads",
                    s.heads, s.kv_heads));
  if (s.head_dim < 16 || s.head_dim > 256 || s.head_dim % 16 != 0)
    return InvalidArgument(fmt::format(
        "head_dim {}: the kernel takes multiples of 16 from 16 to 256 (pad the head)", s.head_dim));
  if (!a.kv_valid.empty()) {
    if (a.kv_valid.size() != static_cast<size_t>(s.batch))
      return InvalidArgument(fmt::format("kv_valid has {} entries for a batch of {}: give one each",
                                         a.kv_valid.size(), s.batch));
    for (size_t b = 0; b < a.kv_valid.size(); ++b)
      if (a.kv_valid[b] < 0 || a.kv_valid[b] > s.kv_len)
        return InvalidArgument(
            fmt::format("kv_valid[{}] = {}: give 0..{} (kv_len)", b, a.kv_valid[b], s.kv_len));
  }
  if (a.threads < 1 || a.threads > 1024)
    return InvalidArgument(fmt::format("threads {}: give 1..1024", a.threads));
  if (!std::isfinite(a.scale) || a.scale < 0)
    return InvalidArgument("scale must be finite and >= 0 (0: 1/sqrt(head_dim))");
  return Ok();
}

Status AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) {
  ANXIN_TRY(ValidateAttention(a));
  ANXIN_ASSIGN_OR_RETURN(internal::KernelEntry e, Pick(a));
  Parallel(a.threads, [&](int w, int n) { e.forward(a, q, k, v, out, lse, w, n); });
  return Ok();
}

Status AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse, float* dq, float* dk,
                         float* dv) {
  ANXIN_TRY(ValidateAttention(a));
  ANXIN_ASSIGN_OR_RETURN(internal::KernelEntry e, Pick(a));
  Parallel(a.threads,
           [&](int w, int n) { e.backward(a, q, k, v, out, dout, lse, dq, dk, dv, w, n); });
  return Ok();
}

void ToFloat(ElementType t, const void* src, size_t n, float* dst) {
  switch (t) {
    case ElementType::kFloat32:
      std::memcpy(dst, src, n * 4);
      return;
    case ElementType::kBFloat16:
      for (size_t i = 0; i < n; ++i)
        dst[i] = BFloat16BitsToFloat(static_cast<const uint16_t*>(src)[i]);
      return;
    case ElementType::kFloat16:
      for (size_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(static_cast<const uint16_t*>(src)[i]);
      return;
  }
}

void FromFloat(ElementType t, const float* src, size_t n, void* dst) {
  switch (t) {
    case ElementType::kFloat32:
      std::memcpy(dst, src, n * 4);
      return;
    case ElementType::kBFloat16:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = FloatToBFloat16Bits(src[i]);
      return;
    case ElementType::kFloat16:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = FloatToHalfBits(src[i]);
      return;
  }
}

Status NaiveAttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                             void* out) {
  ANXIN_TRY(ValidateAttention(a));
  const AttentionShape& sh = a.shape;
  const int d = sh.head_dim, lq = sh.q_len, lk = sh.kv_len;
  const int group = sh.heads / sh.kv_heads;
  const float scale = a.scale != 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const size_t es = ElementSize(a.dtype);
  const long heads = static_cast<long>(sh.batch) * sh.heads;
  Parallel(a.threads, [&](int w, int n) {
    std::vector<float> qf(static_cast<size_t>(lq) * d), kf(static_cast<size_t>(lk) * d),
        vf(static_cast<size_t>(lk) * d), of(static_cast<size_t>(lq) * d);
    std::vector<float> s(static_cast<size_t>(lq) * lk);  // the whole score matrix
    for (long bh = heads * w / n; bh < heads * (w + 1) / n; ++bh) {
      const int b = static_cast<int>(bh / sh.heads), h = static_cast<int>(bh % sh.heads);
      const size_t qoff = static_cast<size_t>(bh) * lq * d;
      const size_t kvoff = (static_cast<size_t>(b) * sh.kv_heads + h / group) * lk * d;
      ToFloat(a.dtype, static_cast<const char*>(q) + qoff * es, qf.size(), qf.data());
      ToFloat(a.dtype, static_cast<const char*>(k) + kvoff * es, kf.size(), kf.data());
      ToFloat(a.dtype, static_cast<const char*>(v) + kvoff * es, vf.size(), vf.data());
      const int valid = a.kv_valid.empty() ? lk : a.kv_valid[static_cast<size_t>(b)];
      // Pass 1: scores.
      for (int i = 0; i < lq; ++i) {
        float* si = s.data() + static_cast<size_t>(i) * lk;
        for (int j = 0; j < lk; ++j) {
          float acc = 0;
          for (int x = 0; x < d; ++x)
            acc += qf[static_cast<size_t>(i) * d + x] * kf[static_cast<size_t>(j) * d + x];
          si[j] = acc * scale;
        }
      }
      // Pass 2: masked softmax, row by row.
      for (int i = 0; i < lq; ++i) {
        float* si = s.data() + static_cast<size_t>(i) * lk;
        int lim = std::min(valid, lk);
        if (a.causal) lim = std::min(lim, i + lk - lq + 1);
        lim = std::max(lim, 0);
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < lim; ++j) mx = std::max(mx, si[j]);
        float sum = 0;
        for (int j = 0; j < lk; ++j) {
          si[j] = j < lim ? std::exp(si[j] - mx) : 0.0f;
          sum += si[j];
        }
        const float inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int j = 0; j < lk; ++j) si[j] *= inv;
      }
      // Pass 3: probabilities times V.
      std::fill(of.begin(), of.end(), 0.0f);
      for (int i = 0; i < lq; ++i) {
        float* oi = of.data() + static_cast<size_t>(i) * d;
        const float* si = s.data() + static_cast<size_t>(i) * lk;
        for (int j = 0; j < lk; ++j) {
          const float p = si[j];
          if (p == 0) continue;
          const float* vj = vf.data() + static_cast<size_t>(j) * d;
          for (int x = 0; x < d; ++x) oi[x] += p * vj[x];
        }
      }
      FromFloat(a.dtype, of.data(), of.size(), static_cast<char*>(out) + qoff * es);
    }
  });
  return Ok();
}

}  // namespace anxin::kernels
