// Fused attention against the three-pass form, side by side in one process:
// GFLOP/s and time per token at each sequence length, the two outputs
// compared, and optionally the inputs and the fused output written as .npy
// for bench/kernels/torch_sdpa.py (PyTorch's scaled_dot_product_attention on
// the same numbers).
//
//   kernels_attention_bench --lengths 1024,2048,4096 --heads 4 --head-dim 128 --threads 2
//                   [--causal] [--dtype float32] [--naive-max 8192] [--npy-dir DIR]
//
// Prints one JSON object per line and per length; exits 1 when the fused and
// three-pass outputs differ by more than the dtype's tolerance.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "anxin/kernels/attention.h"

namespace {

using anxin::kernels::AttentionArgs;
using anxin::kernels::ElementType;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds of the process (all its threads): what the work cost on a
// shared machine, whatever else ran beside it.
double Cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

long MaxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A float32 .npy of the given shape.
bool WriteNpy(const std::string& path, const std::vector<float>& data,
              const std::vector<int>& shape) {
  std::string dims;
  for (int d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  uint16_t hl = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&hl, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), 4, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

std::vector<int> ParseList(const char* s) {
  std::vector<int> v;
  std::string item;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == 0) {
      if (!item.empty()) v.push_back(std::stoi(item));
      item.clear();
      if (*p == 0) break;
    } else {
      item += *p;
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> lengths = {1024, 2048, 4096};
  int heads = 4, head_dim = 128, threads = 1, reps = 3, naive_max = 1 << 30;
  bool causal = false;
  ElementType dtype = ElementType::kFloat32;
  std::string npy_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--lengths")
      lengths = ParseList(next());
    else if (a == "--heads")
      heads = std::stoi(next());
    else if (a == "--head-dim")
      head_dim = std::stoi(next());
    else if (a == "--threads")
      threads = std::stoi(next());
    else if (a == "--reps")
      reps = std::stoi(next());
    else if (a == "--naive-max")
      naive_max = std::stoi(next());
    else if (a == "--causal")
      causal = true;
    else if (a == "--npy-dir")
      npy_dir = next();
    else if (a == "--dtype") {
      std::string t = next();
      dtype = t == "bfloat16"  ? ElementType::kBFloat16
              : t == "float16" ? ElementType::kFloat16
                               : ElementType::kFloat32;
    } else {
      std::fprintf(stderr, "error: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  int status = 0;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int len : lengths) {
    AttentionArgs a;
    a.shape = {.batch = 1,
               .heads = heads,
               .kv_heads = heads,
               .q_len = len,
               .kv_len = len,
               .head_dim = head_dim};
    a.dtype = dtype;
    a.causal = causal;
    a.threads = threads;
    const size_t n = a.shape.QElements(), es = anxin::kernels::ElementSize(dtype);
    std::vector<float> qf(n), kf(n), vf(n);
    for (auto* v : {&qf, &kf, &vf})
      for (float& x : *v) x = nd(rng);
    std::vector<uint8_t> q(n * es), k(n * es), v(n * es), out(n * es), naive(n * es);
    anxin::kernels::FromFloat(dtype, qf.data(), n, q.data());
    anxin::kernels::FromFloat(dtype, kf.data(), n, k.data());
    anxin::kernels::FromFloat(dtype, vf.data(), n, v.data());
    // Causal attention does about half the work; GFLOP/s counts what is done.
    const double flops = a.shape.Flops() * (causal ? 0.5 : 1.0);
    double fused = 1e30, fused_cpu = 1e30;
    for (int r = 0; r < reps; ++r) {
      double t0 = Seconds(), c0 = Cpu();
      if (auto s = AttentionForward(a, q.data(), k.data(), v.data(), out.data(), nullptr); !s) {
        std::fprintf(stderr, "error: %s\n", s.error().ToString().c_str());
        return 3;
      }
      fused = std::min(fused, Seconds() - t0);
      fused_cpu = std::min(fused_cpu, Cpu() - c0);
    }
    const long rss_fused = MaxRssKiB();
    double three = -1, three_cpu = -1, max_diff = -1;
    if (len <= naive_max) {
      three = three_cpu = 1e30;
      for (int r = 0; r < std::max(1, reps / 2); ++r) {
        double t0 = Seconds(), c0 = Cpu();
        if (auto s = NaiveAttentionForward(a, q.data(), k.data(), v.data(), naive.data()); !s) {
          std::fprintf(stderr, "error: %s\n", s.error().ToString().c_str());
          return 3;
        }
        three = std::min(three, Seconds() - t0);
        three_cpu = std::min(three_cpu, Cpu() - c0);
      }
      std::vector<float> x(n), y(n);
      anxin::kernels::ToFloat(dtype, out.data(), n, x.data());
      anxin::kernels::ToFloat(dtype, naive.data(), n, y.data());
      max_diff = 0;
      for (size_t i = 0; i < n; ++i) max_diff = std::max<double>(max_diff, std::fabs(x[i] - y[i]));
      const double tol = dtype == ElementType::kFloat32 ? 1e-4 : 2e-2;
      if (!(max_diff <= tol)) {
        std::fprintf(stderr, "error: length %d: fused and three-pass differ by %g (> %g)\n", len,
                     max_diff, tol);
        status = 1;
      }
    }
    if (!npy_dir.empty()) {
      std::vector<float> of(n);
      anxin::kernels::ToFloat(dtype, out.data(), n, of.data());
      anxin::kernels::ToFloat(dtype, q.data(), n, qf.data());
      anxin::kernels::ToFloat(dtype, k.data(), n, kf.data());
      anxin::kernels::ToFloat(dtype, v.data(), n, vf.data());
      std::vector<int> shape = {1, heads, len, head_dim};
      std::string p = npy_dir + "/L" + std::to_string(len) + "_";
      if (!WriteNpy(p + "q.npy", qf, shape) || !WriteNpy(p + "k.npy", kf, shape) ||
          !WriteNpy(p + "v.npy", vf, shape) || !WriteNpy(p + "out.npy", of, shape)) {
        std::fprintf(stderr, "error: cannot write %s*.npy\n", p.c_str());
        return 3;
      }
    }
    const double tokens = static_cast<double>(len);
    std::printf(
        "{\"length\": %d, \"heads\": %d, \"head_dim\": %d, \"dtype\": \"%s\", \"causal\": %s, "
        "\"threads\": %d, \"isa\": \"%s\", \"fused_s\": %.6f, \"fused_cpu_s\": %.6f, "
        "\"three_pass_cpu_s\": %.6f, \"fused_gflops\": %.2f, "
        "\"fused_us_per_token\": %.3f, \"three_pass_s\": %.6f, \"three_pass_gflops\": %.2f, "
        "\"three_pass_us_per_token\": %.3f, \"max_diff\": %.3g, \"scores_bytes_three_pass\": %.0f, "
        "\"max_rss_kib_after_fused\": %ld, \"max_rss_kib_after_three_pass\": %ld}\n",
        len, heads, head_dim, std::string(anxin::kernels::ElementTypeName(dtype)).c_str(),
        causal ? "true" : "false", threads,
        std::string(anxin::kernels::IsaName(anxin::kernels::AvailableIsas().back())).c_str(), fused,
        fused_cpu, three_cpu, flops / fused / 1e9, fused / tokens * 1e6, three,
        three > 0 ? flops / three / 1e9 : -1, three > 0 ? three / tokens * 1e6 : -1, max_diff,
        4.0 * len * len * threads, rss_fused, MaxRssKiB());
    std::fflush(stdout);
  }
  return status;
}
