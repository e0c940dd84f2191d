// KV-cache benchmark (docs/serve.md, "KV benchmarks"): bits per value each
// format really stores, quantisation throughput, and decode-attention
// throughput in GB/s of cache read, every format against fp16 attention in
// the same run. Every timed result is checked first: quantised bytes must be
// the same on every instruction set, and each format's attention output must
// match float64 attention (cosine above the format's bar) before a figure is
// printed. Exit 1 when a check fails.
//
//   serve_kv_bench [--tokens 4096] [--seconds 0.5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "anxin/kv/kv_accuracy.h"
#include "anxin/kv/kv_cache.h"
#include "anxin/kv/kv_kernels.h"

namespace kv = anxin::kv;

namespace {

// This thread's CPU time: the figures stay meaningful on a machine other
// processes share (wall time there counts their work too).
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Median CPU seconds per call of fn over 5 batches of at least `seconds` / 5.
template <typename Fn>
double TimeIt(Fn fn, double seconds) {
  std::vector<double> per_call;
  for (int rep = 0; rep < 5; ++rep) {
    int calls = 0;
    const double start = CpuSeconds();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = CpuSeconds() - start;
    } while (elapsed < seconds / 5);
    per_call.push_back(elapsed / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[2];
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 4096;
  double seconds = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
  }
  const int kv_heads = 8, q_heads = 32, d = 128, block = 16;
  int failures = 0;
  struct Fmt {
    const char* name;
    double min_cosine;
  };
  const std::vector<Fmt> formats = {{"fp16", 0.99999},    {"int8", 0.995},
                                    {"int8-asym", 0.995}, {"int4", 0.97},
                                    {"int4-asym", 0.97},  {"int4-asym:kivi", 0.97}};
  kv::KvTensors tensors = kv::SyntheticActivations(
      {.tokens = tokens, .kv_heads = kv_heads, .head_dim = d, .q_heads = q_heads, .queries = 1});

  std::printf(
      "== storage: llama-3-8b (32 layers, 8 KV heads, head dim 128), measured from the "
      "cache's own buffers\n");
  std::printf("%-16s %10s %10s %14s %10s\n", "format", "bits/value", "expected", "bytes/token",
              "vs fp16");
  const kv::ModelKvShape llama{32, 8, 128};
  for (const Fmt& f : formats) {
    const kv::KvFormat fmt = kv::ParseKvFormat(f.name).value();
    auto cache = kv::KvCache::Create(
        {.kv_heads = kv_heads, .head_dim = d, .block_tokens = 64, .num_blocks = 16, .format = fmt});
    const double values = 2.0 * 16 * 64 * kv_heads * d;
    const double bits = cache->bytes() * 8.0 / values;
    const bool ok = bits == fmt.BitsPerValue() && (std::string(f.name) != "int4" || bits == 4.5);
    failures += !ok;
    std::printf("%-16s %10.3f %10.3f %14.0f %9.2fx%s\n", f.name, bits, fmt.BitsPerValue(),
                kv::BytesPerToken(llama, fmt), 16.0 / bits, ok ? "" : "  MISMATCH");
  }

  std::printf(
      "\n== quantise: %d tokens x %d heads x %d, GB/s of float32 read per CPU-second (median of "
      "5)\n",
      tokens, kv_heads, d);
  const auto isas = kv::AvailableKvIsas();
  std::printf("%-16s", "format");
  for (auto isa : isas) std::printf(" %10s", std::string(kv::KvIsaName(isa)).c_str());
  std::printf("\n");
  const int rows = tokens * kv_heads;
  for (const Fmt& f : formats) {
    const kv::KvFormat fmt = kv::ParseKvFormat(f.name).value();
    if (fmt.key_axis == kv::KeyAxis::kPerChannel) continue;
    const int row_bytes = d * fmt.ElementBits() / 8,
              row_params = fmt.quantized() ? d / 32 * fmt.ParamsPerGroup() : 0;
    std::vector<uint8_t> ref_data;
    std::printf("%-16s", f.name);
    for (auto isa : isas) {
      const auto& k = kv::internal::KernelsFor(isa);
      std::vector<uint8_t> data(static_cast<size_t>(rows) * row_bytes);
      std::vector<uint16_t> params(static_cast<size_t>(rows) * row_params + 1);
      auto run = [&] {
        for (int r = 0; r < rows; ++r) {
          k.quantize_row(tensors.keys.data() + static_cast<size_t>(r) * d, d, 32, fmt.dtype,
                         fmt.scheme, data.data() + static_cast<size_t>(r) * row_bytes,
                         params.data() + static_cast<size_t>(r) * row_params);
        }
      };
      run();
      if (ref_data.empty()) ref_data = data;
      if (data != ref_data) {
        std::printf(" %10s", "DIFFERS");
        ++failures;
        continue;
      }
      const double t = TimeIt(run, seconds);
      std::printf(" %10.2f", rows * d * 4.0 / t / 1e9);
    }
    std::printf("\n");
  }

  std::printf(
      "\n== decode attention: 1 query x %d heads (GQA %d:%d) over %d tokens, one layer; "
      "GB/s of K/V read per CPU-second, median of 5\n",
      q_heads, q_heads, kv_heads, tokens);
  std::printf("%-16s %-9s %10s %10s %12s %10s %12s\n", "format", "isa", "cache MiB", "CPU us/q",
              "GB/s read", "vs fp16", "cosine");
  const int nb = (tokens + block - 1) / block;
  std::vector<float> ref(q_heads * d);
  kv::ReferenceAttention(tensors.queries.data(), q_heads, tensors.keys.data(),
                         tensors.values.data(), tokens, kv_heads, d, ref.data());
  for (auto isa : {isas.front(), isas.back()}) {
    double fp16_time = 0;
    for (const Fmt& f : formats) {
      const kv::KvFormat fmt = kv::ParseKvFormat(f.name).value();
      const int blk = fmt.key_axis == kv::KeyAxis::kPerChannel ? 32 : block;
      auto cache = kv::KvCache::Create({.kv_heads = kv_heads,
                                        .head_dim = d,
                                        .block_tokens = blk,
                                        .num_blocks = (tokens + blk - 1) / blk,
                                        .format = fmt,
                                        .isa = isa});
      kv::KvSequenceState seq;
      seq.blocks.resize((tokens + blk - 1) / blk);
      std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
      std::shuffle(seq.blocks.begin(), seq.blocks.end(), std::mt19937(5));
      for (int t = 0; t < tokens; ++t) {
        cache->AppendToken(seq, tensors.keys.data() + static_cast<size_t>(t) * kv_heads * d,
                           tensors.values.data() + static_cast<size_t>(t) * kv_heads * d);
      }
      std::vector<float> out(q_heads * d);
      cache->Attend(tensors.queries.data(), q_heads, seq, out.data());
      const double cos = Cosine(out, ref);
      if (!(cos >= f.min_cosine)) {
        std::printf("%-16s %-9s attention cosine %.6f below %.5f: not timed\n", f.name,
                    std::string(kv::KvIsaName(isa)).c_str(), cos, f.min_cosine);
        ++failures;
        continue;
      }
      const double t =
          TimeIt([&] { cache->Attend(tensors.queries.data(), q_heads, seq, out.data()); }, seconds);
      if (std::string(f.name) == "fp16") fp16_time = t;
      const double read = static_cast<double>(cache->BytesReadFor(tokens));
      std::printf("%-16s %-9s %10.2f %10.1f %12.2f %9.2fx %12.6f\n", f.name,
                  std::string(kv::KvIsaName(isa)).c_str(), read / (1 << 20), t * 1e6,
                  read / t / 1e9, fp16_time > 0 ? fp16_time / t : 0.0, cos);
    }
  }
  (void)nb;
  std::printf("\n%s\n", failures ? "FAILED: see the lines marked above" : "all checks passed");
  return failures ? 1 : 0;
}
