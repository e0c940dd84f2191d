// The benchmark runner inside every rank of the comm worker: clock alignment
// to rank 0, the sweep (warm-up, timed iterations, verification), the link
// matrix, the soak, the watchdog that ends a stuck run, and rank 0's report.
// MPI is the control plane (a communicator of its own); the engine moves the
// measured data.
//
//   // after MPI_Init_thread, with the options from --spec:
//   BenchOptions options;
//   Fault fault;   // none; tests set one with ParseFault($ANXIN_COMM_TEST_FAULT)
//   std::unique_ptr<Engine> engine = MakeEngine(options.engine);
//   Runner runner(options, *engine, fault);
//   int status = runner.Main();   // rank 0 printed the report
//
// Timing: each timed iteration reads a monotonic clock before and after one
// blocking call on each rank. A row's time is the mean over ranks and
// iterations (nccl-tests' "time"); p50/p99/max are over the iterations of
// the per-iteration mean across ranks. The instant a rank starts an iteration
// is its arrival, and the spread of arrivals is the slow-rank finding.
//
// Thread safety: one Runner per process, used by its main thread; the
// watchdog thread only reads atomics.
#ifndef ANXIN_COMM_WORKER_RUNNER_H_
#define ANXIN_COMM_WORKER_RUNNER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "anxin/comm/model.h"
#include "anxin/comm/options.h"
#include "anxin/comm/worker/collective_engine.h"

namespace anxin::comm {

// Test-only faults from ANXIN_COMM_TEST_FAULT, so that tests can slow, kill
// or stop one rank on purpose:
//   delay:RANK:US   RANK sleeps US microseconds before each timed call and
//                   before each point-to-point payload send (not before the
//                   one-byte acknowledgements of the bandwidth matrix)
//   exit:RANK:N     RANK kills itself (SIGKILL) at its N-th timed call
//   hang:RANK:N     RANK stops forever at its N-th timed call
//   corrupt:RANK:N  RANK damages N elements of every result it verifies (so
//                   that tests see the check fail)
struct Fault {
  enum class Kind { kNone, kDelay, kExit, kHang, kCorrupt };
  Kind kind = Kind::kNone;
  int rank = -1;
  int64_t value = 0;
};
[[nodiscard]] Result<Fault> ParseFault(const char* text);

// Ends the process with a message when an armed phase runs past its deadline:
// a rank blocked in a collective whose peer died or hangs would otherwise
// wait forever. Arm/Disarm are two relaxed atomic stores.
class Watchdog {
 public:
  Watchdog(int rank, double timeout_s);
  ~Watchdog();
  // `what` must outlive the armed phase (a string owned by the caller).
  void Arm(const std::string* what) {
    what_.store(what, std::memory_order_relaxed);
    since_ns_.store(NowNs(), std::memory_order_relaxed);
  }
  // The same, with a clock reading the caller already has.
  void ArmAt(const std::string* what, int64_t now_ns) {
    what_.store(what, std::memory_order_relaxed);
    since_ns_.store(now_ns, std::memory_order_relaxed);
  }
  void Disarm() { since_ns_.store(0, std::memory_order_relaxed); }
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  void Loop();
  int rank_;
  int64_t timeout_ns_;
  std::atomic<int64_t> since_ns_{0};
  std::atomic<const std::string*> what_{nullptr};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Per-iteration times of one rank: start (arrival) and duration, us.
struct IterationTimes {
  std::vector<double> start_us;
  std::vector<double> duration_us;
};

// The timed loop itself: `iters` blocking calls, each bracketed by clock
// reads; the fault (if it is this rank's) applies before each call. Shared by
// the runner and bench/comm's overhead benchmark.
[[nodiscard]] Status TimedIterations(Engine& engine, const Call& call, int iters, int rank,
                                     const Fault& fault, Watchdog& watchdog,
                                     const std::string* what, IterationTimes& out);

// One timed collective, as the agent's SDK will receive it (the seam for
// job telemetry: Runner::on_collective).
struct CollectiveRecord {
  CollOp op;
  uint64_t bytes;  // the row's size (nccl-tests' "size")
  bool in_place;
  double duration_us;
  int ranks;
};

class Runner {
 public:
  Runner(BenchOptions options, Engine& engine, Fault fault);
  // Runs what the options ask; returns the exit status (0 ok, 1 a check
  // failed or a slow rank was named, 2 bad input, 3 environment). Rank 0
  // prints the report; every rank returns the same status.
  int Main();

  // Called on every rank for every timed collective, when set.
  std::function<void(const CollectiveRecord&)> on_collective;

 private:
  struct Impl;
  BenchOptions options_;
  Engine& engine_;
  Fault fault_;
};

}  // namespace anxin::comm

#endif  // ANXIN_COMM_WORKER_RUNNER_H_
