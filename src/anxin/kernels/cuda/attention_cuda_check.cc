// Runs the CUDA attention kernel on an NVIDIA GPU against the CPU kernel
// (bench/kernels/gpu-check): every dtype and mask must agree within the
// dtype's tolerance; then GFLOP/s and time per token at 1K-16K tokens.
// Exit 0 all agree, 1 a case disagreed, 3 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "anxin/kernels/attention.h"
#include "anxin/kernels/cuda/attention_cuda.h"

using namespace anxin::kernels;

int main() {
  auto name = cuda::DeviceName();
  if (!name) {
    std::fprintf(stderr, "error: %s\n", name.error().ToString().c_str());
    return 3;
  }
  std::printf("device: %s\n", name->c_str());
  int status = 0;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::printf("%-9s %-15s %12s %8s\n", "dtype", "mask", "max |diff|", "verdict");
  for (ElementType t : {ElementType::kFloat32, ElementType::kBFloat16, ElementType::kFloat16}) {
    for (int mask = 0; mask < 4; ++mask) {
      AttentionArgs a;
      a.shape = {
          .batch = 2, .heads = 4, .kv_heads = 2, .q_len = 300, .kv_len = 300, .head_dim = 128};
      a.dtype = t;
      a.causal = mask & 1;
      const std::vector<int> valid = {137, 300};
      if (mask & 2) a.kv_valid = valid;
      a.threads = 4;
      const size_t es = ElementSize(t);
      std::vector<float> f(a.shape.QElements());
      std::vector<uint8_t> q(f.size() * es), k(a.shape.KvElements() * es), v(k.size());
      for (auto* buf : {&q, &k, &v}) {
        std::vector<float> x(buf->size() / es);
        for (float& y : x) y = nd(rng);
        FromFloat(t, x.data(), x.size(), buf->data());
      }
      std::vector<uint8_t> cpu(q.size()), gpu(q.size());
      if (auto s = AttentionForward(a, q.data(), k.data(), v.data(), cpu.data(), nullptr); !s) {
        std::fprintf(stderr, "error: %s\n", s.error().ToString().c_str());
        return 3;
      }
      auto ms = cuda::AttentionForward(a, q.data(), k.data(), v.data(), gpu.data(), 1);
      if (!ms) {
        std::fprintf(stderr, "error: %s\n", ms.error().ToString().c_str());
        return 3;
      }
      std::vector<float> x(f.size()), y(f.size());
      ToFloat(t, cpu.data(), x.size(), x.data());
      ToFloat(t, gpu.data(), y.size(), y.data());
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max<double>(worst, std::fabs(x[i] - y[i]));
      const double tol = t == ElementType::kFloat32   ? 1e-4
                         : t == ElementType::kFloat16 ? 4e-3
                                                      : 3e-2;
      const bool ok = worst <= tol;
      status |= ok ? 0 : 1;
      const char* names[] = {"none", "causal", "padding", "causal+padding"};
      std::printf("%-9s %-15s %12.3g %8s\n", std::string(ElementTypeName(t)).c_str(), names[mask],
                  worst, ok ? "ok" : "FAIL");
    }
  }
  std::printf("\n%7s %10s %12s %10s\n", "length", "GPU ms", "GFLOP/s", "us/token");
  for (int len : {1024, 2048, 4096, 8192, 16384}) {
    AttentionArgs a;
    a.shape = {
        .batch = 1, .heads = 16, .kv_heads = 16, .q_len = len, .kv_len = len, .head_dim = 128};
    a.dtype = ElementType::kBFloat16;
    std::vector<uint16_t> q(a.shape.QElements(), 0x3c00), out(q.size());
    auto ms = cuda::AttentionForward(a, q.data(), q.data(), q.data(), out.data(), 3);
    if (!ms) {
      std::fprintf(stderr, "error: %s\n", ms.error().ToString().c_str());
      return 3;
    }
    std::printf("%7d %10.3f %12.1f %10.3f\n", len, *ms, a.shape.Flops() / (*ms * 1e-3) / 1e9,
                *ms * 1e3 / len);
  }
  return status;
}
