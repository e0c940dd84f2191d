// STREAM-style copy kernel: the machine's memory bandwidth, measured in the
// same run as the compare benchmark so the two can be set side by side.
//
//   compare_stream [MiB per array (default 1024)] [threads (default: all)]
//
// Prints one line of JSON: {"copy_gbs": best copy rate counting bytes read
// plus bytes written, "read_gbs": best read-only (vector sum) rate, ...}.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

template <typename F>
double BestSeconds(unsigned threads, size_t n, int reps, F kernel) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      size_t b = n * t / threads, e = n * (t + 1) / threads;
      pool.emplace_back([=] { kernel(t, b, e); });
    }
    for (auto& th : pool) th.join();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The sum of a[b, e), read with the widest vector loads the CPU has (one
// clone per instruction set, picked at load time) into sixteen independent
// sums, so that neither the adds nor narrow loads limit the rate: four
// dependent scalar chains, or SSE2 loads, read as a slower memory on a fast
// core (measured here: 19 to 23 GB/s instead of 27 to 29).
__attribute__((target_clones("avx512f", "avx2", "default"))) double SumRange(const double* a,
                                                                             size_t b, size_t e) {
  using V8 = double __attribute__((vector_size(64)));
  V8 s0{}, s1{}, s2{}, s3{};
  size_t i = b;
  for (; i + 32 <= e; i += 32) {
    V8 x0, x1, x2, x3;
    std::memcpy(&x0, &a[i], sizeof(V8));
    std::memcpy(&x1, &a[i + 8], sizeof(V8));
    std::memcpy(&x2, &a[i + 16], sizeof(V8));
    std::memcpy(&x3, &a[i + 24], sizeof(V8));
    s0 += x0, s1 += x1, s2 += x2, s3 += x3;
  }
  double tail = 0;
  for (; i < e; ++i) tail += a[i];
  const V8 s = (s0 + s1) + (s2 + s3);
  for (int k = 0; k < 8; ++k) tail += s[k];
  return tail;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  unsigned threads = argc > 2 ? static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10))
                              : std::max(1u, std::thread::hardware_concurrency());
  const size_t n = mib * (1 << 20) / sizeof(double);
  std::unique_ptr<double[]> a(new double[n]), c(new double[n]);
  std::vector<double> sums(threads);
  // First touch from the worker threads, as STREAM does.
  BestSeconds(threads, n, 1, [&](unsigned, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) a[i] = 1.0 + static_cast<double>(i & 7), c[i] = 0;
  });
  double copy = BestSeconds(threads, n, 5, [&](unsigned, size_t b, size_t e) {
    std::memcpy(&c[b], &a[b], (e - b) * sizeof(double));
  });
  double read = BestSeconds(
      threads, n, 5, [&](unsigned t, size_t b, size_t e) { sums[t] = SumRange(a.get(), b, e); });
  double bytes = static_cast<double>(n) * sizeof(double);
  double check = 0;
  for (double s : sums) check += s;
  std::printf(
      "{\"copy_gbs\": %.3f, \"read_gbs\": %.3f, \"threads\": %u, \"mib\": %zu, "
      "\"check\": %.1f}\n",
      2 * bytes / copy / 1e9, bytes / read / 1e9, threads, mib, check);
  return 0;
}
