// Single-thread throughput of the metric kernel on in-memory data, per
// instruction-set path and dtype, and of the older two-pass way (decode to
// float64 with ConvertToDouble, then the float64 kernel). No files, no
// threads: this isolates the compute from mmap and scheduling. Times are
// CPU time of the thread, best of five.
//
//   build/bench/bench/compare/compare_kernel_bench [elements]
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "anxin/compare/dtype.h"
#include "anxin/compare/tensor_metrics.h"

namespace cmp = anxin::compare;

namespace {

uint16_t ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

uint16_t ToHalf(float f) {
  // Round to nearest even through float arithmetic is not needed for a
  // benchmark: truncation gives valid halves of the right magnitude.
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000;
  int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (b >> 13) & 0x3ff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

std::vector<uint8_t> Encode(cmp::DType dt, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * cmp::DTypeSize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case cmp::DType::kFloat64: {
        double d = v[i];
        std::memcpy(&b[i * 8], &d, 8);
        break;
      }
      case cmp::DType::kFloat32:
        std::memcpy(&b[i * 4], &v[i], 4);
        break;
      case cmp::DType::kFloat16: {
        uint16_t h = ToHalf(v[i]);
        std::memcpy(&b[i * 2], &h, 2);
        break;
      }
      default: {
        uint16_t h = ToBf16(v[i]);
        std::memcpy(&b[i * 2], &h, 2);
        break;
      }
    }
  }
  return b;
}

// Best of five, in CPU time of this thread: other processes sharing the
// CPUs then cost little (wall time would count their slices).
template <typename F>
double BestSeconds(F&& f) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{1} << 22);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> ref(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    ref[i] = g(rng);
    out[i] = ref[i] * (1 + 1e-4f * g(rng));
  }
  std::printf("%-10s %-9s %10s %9s %12s\n", "dtype", "path", "ns/pair", "GB/s", "cosine");
  for (cmp::DType dt :
       {cmp::DType::kFloat32, cmp::DType::kFloat16, cmp::DType::kBFloat16, cmp::DType::kFloat64}) {
    const auto a = Encode(dt, out), b = Encode(dt, ref);
    const double bytes = 2.0 * static_cast<double>(n * cmp::DTypeSize(dt));
    cmp::MetricParams params = cmp::MetricParams::For(dt, dt);
    for (cmp::KernelPath path : cmp::AvailableKernelPaths()) {
      params.path = path;
      cmp::Metrics m;
      double s = BestSeconds([&] {
        cmp::MetricAccumulator acc;
        acc.Add(params, dt, a.data(), dt, b.data(), n);
        m = acc.Finish(params);
      });
      std::printf("%-10s %-9s %10.3f %9.2f %12.9f\n", std::string(cmp::DTypeName(dt)).c_str(),
                  std::string(cmp::KernelPathName(path)).c_str(), s * 1e9 / n, bytes / s / 1e9,
                  m.cosine);
    }
    // Two passes: ConvertToDouble into 2048-element blocks, then the kernel.
    params.path = cmp::KernelPath::kAuto;
    std::vector<double> da(2048), db(2048);
    double s = BestSeconds([&] {
      cmp::MetricAccumulator acc;
      for (size_t i = 0; i < n; i += 2048) {
        size_t m = std::min<size_t>(2048, n - i);
        cmp::ConvertToDouble(dt, a.data() + i * cmp::DTypeSize(dt), false, m, da.data());
        cmp::ConvertToDouble(dt, b.data() + i * cmp::DTypeSize(dt), false, m, db.data());
        acc.Add(params, da.data(), db.data(), m);
      }
    });
    std::printf("%-10s %-9s %10.3f %9.2f\n", std::string(cmp::DTypeName(dt)).c_str(), "2-pass",
                s * 1e9 / n, bytes / s / 1e9);
  }
  return 0;
}
