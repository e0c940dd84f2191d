// The bucket planner on 10 million sequence lengths, end to end (parse the
// file, histogram, plan) and the plan alone, next to the O(K n^2) dynamic
// programme on the same histogram (the ablation for SMAWK); both must find
// the same padding.
//
//   kernels_buckets_bench [--sequences 10000000] [--max-buckets 8] [--dir /tmp]
//
// Lengths follow a log-normal distribution (median 1,500 tokens, capped at
// 32,768), like the long tail of a pre-training corpus; fixed seed.
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/kernels/buckets.h"

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds of this process: on a shared machine, what the work cost
// whatever else ran beside it (the planner is single-threaded).
double Cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  long sequences = 10'000'000;
  int k = 8;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--sequences")
      sequences = std::stol(argv[i + 1]);
    else if (a == "--max-buckets")
      k = std::stoi(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
  }
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(std::log(1500.0), 0.9);
  std::string text;
  text.reserve(static_cast<size_t>(sequences) * 6);
  for (long i = 0; i < sequences; ++i) {
    long len = std::min<long>(32768, std::max<long>(1, std::lround(d(rng))));
    text += std::to_string(len);
    text += '\n';
  }
  const std::string path = dir + "/kernels_buckets_bench_lengths.txt";
  if (auto s = anxin::WriteFileAtomic(path, text); !s) {
    std::fprintf(stderr, "error: %s\n", s.error().ToString().c_str());
    return 3;
  }
  anxin::kernels::BucketPlanOptions opts;
  opts.max_buckets = k;
  double t0 = Now(), c0 = Cpu();
  auto plan = anxin::kernels::PlanBucketsForFile(path, opts);
  double end_to_end = Now() - t0, end_to_end_cpu = Cpu() - c0;
  std::remove(path.c_str());
  if (!plan) {
    std::fprintf(stderr, "error: %s\n", plan.error().ToString().c_str());
    return 3;
  }
  auto h = anxin::kernels::ParseLengths(text, "lengths");
  if (!h) return 3;
  int status = 0;
  for (int64_t align : {128, 16, 1}) {
    opts.align = align;
    t0 = Now();
    c0 = Cpu();
    auto p = anxin::kernels::PlanBuckets(*h, opts);
    double plan_s = Now() - t0, plan_cpu = Cpu() - c0;
    if (!p) return 3;
    // The same groups the planner cuts, for the O(K n^2) programme.
    std::vector<int64_t> aligned;
    std::vector<uint64_t> counts, real;
    for (size_t i = 0; i < h->lengths.size(); ++i) {
      int64_t a = (std::max<int64_t>(h->lengths[i], 1) + align - 1) / align * align;
      if (!aligned.empty() && aligned.back() == a) {
        counts.back() += h->counts[i];
        real.back() += h->counts[i] * static_cast<uint64_t>(h->lengths[i]);
      } else {
        aligned.push_back(a);
        counts.push_back(h->counts[i]);
        real.push_back(h->counts[i] * static_cast<uint64_t>(h->lengths[i]));
      }
    }
    double brute_s = -1;
    if (aligned.size() <= 4096) {
      c0 = Cpu();
      uint64_t b = anxin::kernels::internal::BruteForcePadding(aligned, counts, real, k);
      brute_s = Cpu() - c0;
      if (b != p->padding_by_k.back()) {
        std::fprintf(stderr, "error: align %ld: SMAWK %lu, brute force %lu padded tokens\n",
                     static_cast<long>(align), static_cast<unsigned long>(p->padding_by_k.back()),
                     static_cast<unsigned long>(b));
        status = 1;
      }
    }
    std::printf(
        "{\"sequences\": %ld, \"max_buckets\": %d, \"align\": %ld, \"distinct\": %zu, "
        "\"end_to_end_s\": %.3f, \"end_to_end_cpu_s\": %.3f, \"plan_s\": %.6f, "
        "\"plan_cpu_s\": %.6f, \"brute_force_cpu_s\": %.6f, \"padded_tokens\": %lu, "
        "\"waste\": %.4f}\n",
        sequences, k, static_cast<long>(align), aligned.size(), end_to_end, end_to_end_cpu, plan_s,
        plan_cpu, brute_s, static_cast<unsigned long>(p->padding_by_k.back()),
        p->schemes.back().waste);
  }
  return status;
}
