// Harness overhead of `anxin bench comm`'s timed loop against a raw
// MPI_Allreduce loop written here, same sizes, same buffers' sizes, same run,
// in alternating rounds. Both sides' wall time per call is measured the same
// way (barrier, N calls, slowest rank's elapsed / N), every call's return
// code is checked, and both results are compared element by element with the
// expected sums before any ratio is printed.
//
//   mpirun -np 2 comm_overhead_bench [ROUNDS]
//
// Targets (docs/comm.md): overhead < 3% at >= 1 MiB, < 1 us at 8 bytes.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "anxin/comm/worker/collective_engine.h"
#include "anxin/comm/worker/runner.h"

namespace {

using namespace anxin::comm;

double Now() { return MPI_Wtime(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "comm_overhead_bench: %s\n", what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

float Input(int rank, size_t i) { return static_cast<float>((rank * 7 + i * 3) % 8); }

// Every element must be the sum over ranks of Input().
void CheckSums(const std::vector<float>& out, int ranks, const char* side, uint64_t bytes) {
  for (size_t i = 0; i < out.size(); ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += Input(r, i);
    if (out[i] != want) {
      Die(std::string(side) + ": wrong sum at element " + std::to_string(i) + " of a " +
          std::to_string(bytes) + "-byte all_reduce");
    }
  }
}

// An engine whose calls do nothing: timing the harness's loop over it
// measures the harness's own cost per call, free of the network's noise.
class NullEngine : public Engine {
 public:
  anxin::Status Init(int, int, int) override { return anxin::Ok(); }
  anxin::Status Supports(const Call&) const override { return anxin::Ok(); }
  anxin::Status Reserve(uint64_t, uint64_t) override { return anxin::Ok(); }
  anxin::Status Upload(const Call&, const void*, uint64_t) override { return anxin::Ok(); }
  anxin::Status Run(const Call&) override {
    ++calls;
    return anxin::Ok();
  }
  anxin::Status Download(const Call&, void*, uint64_t) override { return anxin::Ok(); }
  anxin::Status Send(int, uint64_t) override { return anxin::Ok(); }
  anxin::Status Recv(int, uint64_t) override { return anxin::Ok(); }
  std::string Describe() const override { return "null"; }
  uint64_t calls = 0;
};

// ns per call of the harness's bookkeeping: TimedIterations over NullEngine
// against the same virtual calls in a bare loop; median of rounds.
void Ablation(Watchdog& watchdog, const std::string* what) {
  NullEngine engine;
  Call call{CollOp::kAllReduce, DataType::kFloat, RedOp::kSum, 0, false, 2};
  constexpr int kCalls = 1000000;
  IterationTimes times;
  Fault none;
  std::vector<double> bare_ns, harness_ns;
  for (int round = 0; round < 9; ++round) {
    double t0 = Now();
    for (int i = 0; i < kCalls; ++i) {
      if (!engine.Run(call)) Die("null engine");
    }
    bare_ns.push_back((Now() - t0) / kCalls * 1e9);
    t0 = Now();
    if (!TimedIterations(engine, call, kCalls, 0, none, watchdog, what, times)) Die("harness");
    harness_ns.push_back((Now() - t0) / kCalls * 1e9);
  }
  if (engine.calls != 2ull * 9 * kCalls) Die("the null engine missed calls");
  std::printf(
      "# ablation, rank 0 alone: a call through the harness's timed loop costs %.1f ns "
      "more than the bare call (%.1f vs %.1f ns, no-op engine, %d calls x 9 rounds, "
      "median)\n",
      Median(harness_ns) - Median(bare_ns), Median(harness_ns), Median(bare_ns), kCalls);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 21;
  MPI_Comm raw_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
  MPI_Comm_set_errhandler(raw_comm, MPI_ERRORS_RETURN);

  std::unique_ptr<Engine> engine = MakeEngine("mpi");
  if (!engine || !engine->Init(rank, ranks, 0)) Die("cannot start the mpi engine");
  Watchdog watchdog(rank, 600);
  const std::string what = "benchmark";
  Fault none;

  const std::vector<uint64_t> sizes = {8, 1024, 65536, 1u << 20, 4u << 20, 16u << 20};
  if (!engine->Reserve(sizes.back(), sizes.back())) Die("cannot allocate");
  if (rank == 0) {
    std::printf(
        "# anxin bench comm harness vs raw MPI_Allreduce loop: %d ranks, float sum, "
        "out-of-place, %d alternating rounds; times: median per side; overhead: median of the "
        "per-round differences and ratios\n",
        ranks, rounds);
    std::printf("# %10s  %8s  %12s  %12s  %12s  %10s  %s\n", "size", "calls", "raw (us)",
                "anxin (us)", "overhead(us)", "overhead", "target");
  }
  bool all_met = true;
  for (uint64_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = Input(rank, i);
    Call call{CollOp::kAllReduce, DataType::kFloat, RedOp::kSum, 0, false, count};
    if (!engine->Upload(call, send.data(), bytes)) Die("upload");
    // Calls per block: about 0.1 s of work, from a probe after a warm-up.
    for (int i = 0; i < 5; ++i) {
      if (MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                        raw_comm) != MPI_SUCCESS)
        Die("MPI_Allreduce failed");
    }
    double t0 = Now();
    for (int i = 0; i < 5; ++i) {
      if (MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                        raw_comm) != MPI_SUCCESS)
        Die("MPI_Allreduce failed");
    }
    double probe = (Now() - t0) / 5;
    MPI_Bcast(&probe, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const int calls = std::clamp(static_cast<int>(0.1 / std::max(probe, 1e-7)), 20, 200000);
    std::vector<double> raw_us, anxin_us, diff_us, ratio;
    IterationTimes times;
    for (int round = 0; round < rounds; ++round) {
      // Raw loop.
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = Now();
      for (int i = 0; i < calls; ++i) {
        if (MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                          raw_comm) != MPI_SUCCESS)
          Die("MPI_Allreduce failed");
      }
      double raw = Now() - t0;
      // The harness's timed loop, exactly as the worker runs it.
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = Now();
      if (!TimedIterations(*engine, call, calls, rank, none, watchdog, &what, times))
        Die("the harness loop failed");
      double harness = Now() - t0;
      double both[2] = {raw, harness}, slowest[2];
      MPI_Allreduce(both, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      raw_us.push_back(slowest[0] / calls * 1e6);
      anxin_us.push_back(slowest[1] / calls * 1e6);
      // Paired per round, so that the machine's drift between rounds cancels.
      diff_us.push_back(anxin_us.back() - raw_us.back());
      ratio.push_back(anxin_us.back() / raw_us.back());
    }
    // Both sides computed the same thing.
    CheckSums(recv, ranks, "raw loop", bytes);
    std::vector<float> harness_out(count);
    if (!engine->Download(call, harness_out.data(), bytes)) Die("download");
    CheckSums(harness_out, ranks, "anxin harness", bytes);
    const double raw = Median(raw_us), ours = Median(anxin_us);
    const double over = Median(diff_us), pct = (Median(ratio) - 1) * 100;
    std::string target = "-";
    if (bytes == 8) {
      const bool met = over < 1.0;
      all_met &= met;
      target = met ? "< 1 us: met" : "< 1 us: MISSED";
    } else if (bytes >= (1u << 20)) {
      const bool met = pct < 3.0;
      all_met &= met;
      target = met ? "< 3%: met" : "< 3%: MISSED";
    }
    if (rank == 0) {
      std::printf("  %10llu  %8d  %12.3f  %12.3f  %12.3f  %9.2f%%  %s\n",
                  static_cast<unsigned long long>(bytes), calls, raw, ours, over, pct,
                  target.c_str());
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    std::printf("# results checked on both sides; targets %s\n", all_met ? "met" : "missed");
    Ablation(watchdog, &what);
  }
  engine->Finalize();
  MPI_Comm_free(&raw_comm);
  MPI_Finalize();
  return 0;
}
