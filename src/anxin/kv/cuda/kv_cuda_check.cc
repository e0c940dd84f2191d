// Runs the CUDA KV kernels on a GPU against the CPU cache (bench/serve/cuda-check):
// quantised bytes must equal the CPU kernels' bytes exactly, and attention
// over a paged cache must agree with the CPU attention within 1e-4 (relative
// to the outputs' scale). Exit 0 when everything agrees, 1 when something
// differs, 3 when there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "anxin/kv/cuda/kv_cuda.h"
#include "anxin/kv/kv_accuracy.h"
#include "anxin/kv/kv_cache.h"
#include "anxin/kv/kv_kernels.h"

namespace kv = anxin::kv;

int main() {
  auto name = kv::cuda::DeviceName();
  if (!name) {
    std::fprintf(stderr, "error: %s\n", name.error().Describe().c_str());
    return 3;
  }
  std::printf("device: %s\n", name->c_str());
  int failures = 0;
  const int d = 128, kv_heads = 2, q_heads = 8, tokens = 1000, block = 16;
  kv::KvTensors tensors = kv::SyntheticActivations(
      {.tokens = tokens, .kv_heads = kv_heads, .head_dim = d, .q_heads = q_heads, .queries = 4});
  for (const char* fname : {"int8", "int8-asym", "int4", "int4-asym"}) {
    const kv::KvFormat f = kv::ParseKvFormat(fname).value();
    // 1. Quantisation: bytes identical to the CPU kernels.
    std::vector<uint8_t> gpu_data;
    std::vector<uint16_t> gpu_params;
    const int rows = tokens * kv_heads;
    if (auto s = kv::cuda::QuantizeRows(tensors.keys.data(), rows, d, f, &gpu_data, &gpu_params);
        !s) {
      std::fprintf(stderr, "error: %s\n", s.error().Describe().c_str());
      return 3;
    }
    const auto& cpu = kv::internal::KernelsFor(kv::KvIsa::kAuto);
    const int row_bytes = d * f.ElementBits() / 8, row_params = d / 32 * f.ParamsPerGroup();
    std::vector<uint8_t> cpu_data(static_cast<size_t>(rows) * row_bytes);
    std::vector<uint16_t> cpu_params(static_cast<size_t>(rows) * row_params);
    for (int r = 0; r < rows; ++r) {
      cpu.quantize_row(tensors.keys.data() + static_cast<size_t>(r) * d, d, 32, f.dtype, f.scheme,
                       cpu_data.data() + static_cast<size_t>(r) * row_bytes,
                       cpu_params.data() + static_cast<size_t>(r) * row_params);
    }
    size_t diff = 0;
    for (size_t i = 0; i < cpu_data.size(); ++i) diff += cpu_data[i] != gpu_data[i];
    for (size_t i = 0; i < cpu_params.size(); ++i) diff += cpu_params[i] != gpu_params[i];
    std::printf("%-10s quantise %d rows: %zu bytes differ from the CPU\n", fname, rows, diff);
    failures += diff != 0;
    // 2. Attention over a paged cache written by the CPU.
    const int nb = (tokens + block - 1) / block;
    auto cache = kv::KvCache::Create({.kv_heads = kv_heads,
                                      .head_dim = d,
                                      .block_tokens = block,
                                      .num_blocks = nb,
                                      .format = f});
    kv::KvSequenceState seq;
    seq.blocks.resize(nb);
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), std::mt19937(3));
    for (int t = 0; t < tokens; ++t) {
      cache->AppendToken(seq, tensors.keys.data() + static_cast<size_t>(t) * kv_heads * d,
                         tensors.values.data() + static_cast<size_t>(t) * kv_heads * d);
    }
    // Re-quantise into the cache's layout for the GPU: rows [block][head][slot].
    std::vector<uint8_t> kd(static_cast<size_t>(nb) * kv_heads * block * row_bytes), vd(kd.size());
    std::vector<uint16_t> kp(static_cast<size_t>(nb) * kv_heads * block * row_params),
        vp(kp.size());
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < kv_heads; ++h) {
        const size_t row =
            (static_cast<size_t>(seq.blocks[t / block]) * kv_heads + h) * block + t % block;
        const size_t src = (static_cast<size_t>(t) * kv_heads + h) * d;
        cpu.quantize_row(tensors.keys.data() + src, d, 32, f.dtype, f.scheme,
                         kd.data() + row * row_bytes, kp.data() + row * row_params);
        cpu.quantize_row(tensors.values.data() + src, d, 32, f.dtype, f.scheme,
                         vd.data() + row * row_bytes, vp.data() + row * row_params);
      }
    double worst = 0, scale = 0;
    for (int i = 0; i < tensors.query_count; ++i) {
      const float* q = tensors.queries.data() + static_cast<size_t>(i) * q_heads * d;
      std::vector<float> a(q_heads * d), b(q_heads * d);
      cache->Attend(q, q_heads, seq, a.data());
      if (auto s = kv::cuda::Attend(q, q_heads, kv_heads, d, block, f, kd, kp, vd, vp, seq.blocks,
                                    tokens, b.data());
          !s) {
        std::fprintf(stderr, "error: %s\n", s.error().Describe().c_str());
        return 3;
      }
      for (size_t j = 0; j < a.size(); ++j) {
        worst = std::max(worst, std::fabs(static_cast<double>(a[j]) - b[j]));
        scale = std::max(scale, std::fabs(static_cast<double>(a[j])));
      }
    }
    const bool ok = worst <= 1e-4 * std::max(1.0, scale);
    std::printf("%-10s attention over %d tokens: max |gpu - cpu| = %.3g (%s)\n", fname, tokens,
                worst, ok ? "ok" : "DIFFERS");
    failures += !ok;
  }
  std::printf("%s\n", failures ? "FAIL" : "all kernels agree with the CPU");
  return failures ? 1 : 0;
}
