// `anxin bench comm --sweep-algos`: one launched run per algorithm of the
// collective, then where the fastest algorithm changes with the size.
//
//   Getenv getenv = [](const char* name) { return std::getenv(name); };
//   SweepRequest req;
//   ANXIN_ASSIGN_OR_RETURN(req.launch.mpirun, FindMpirun(getenv));
//   ANXIN_ASSIGN_OR_RETURN(req.launch.worker, FindWorker("mpi", getenv));
//   req.launch.ranks = 4;                    // env and spec are set per algorithm
//   req.bench.op = CollOp::kAllReduce;
//   req.algos = "ring,recursive_doubling";   // "" = DefaultSweepAlgorithms(engine, op)
//   ANXIN_ASSIGN_OR_RETURN(SweepOutcome out,
//                          RunSweep(req, [](const std::string& l) { std::puts(l.c_str()); }));
//   std::printf("%s", FormatSweep(out.sweep).c_str());
//
// Thread safety: RunSweep may be called from any thread; on_progress is
// called on the launcher's I/O thread.
#ifndef ANXIN_COMM_SWEEP_H_
#define ANXIN_COMM_SWEEP_H_

#include <chrono>
#include <functional>
#include <string>

#include "anxin/base/error.h"
#include "anxin/comm/launcher.h"
#include "anxin/comm/model.h"
#include "anxin/comm/options.h"

namespace anxin::comm {

struct SweepRequest {
  LaunchRequest launch;  // env and spec are set for each algorithm
  BenchOptions bench;    // what each algorithm runs (its json/csv outputs are ignored)
  std::string algos;     // comma-separated; "" = DefaultSweepAlgorithms(bench.engine, bench.op)
  std::chrono::seconds timeout{600};  // for each run
};

struct SweepOutcome {
  SweepReport sweep;  // with FindCrossovers applied
  int status = 0;     // the worst worker status (1: a check failed)
};

// Runs the algorithms one after another. on_progress gets "sweep: ALGO (i of
// n)" and the workers' progress lines. Errors: no algorithm to sweep or an
// unknown one (kInvalidArgument), a run that fails (its error, "algorithm
// ALGO: ..."), unreadable worker output.
[[nodiscard]] Result<SweepOutcome> RunSweep(
    const SweepRequest& request, const std::function<void(const std::string&)>& on_progress);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_SWEEP_H_
