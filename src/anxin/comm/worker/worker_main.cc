// anxin-comm-worker: one MPI rank of `anxin bench comm`. Started by mpirun,
// either through `anxin bench comm --np N` or by `mpirun ... anxin bench comm`
// (which replaces itself with this program). Takes one argument pair,
// --spec JSON (comm/options.h), and prints rank 0's report on stdout.
#include <anxin/sdk.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "anxin/comm/launcher.h"
#include "anxin/comm/options.h"
#include "anxin/comm/worker/collective_engine.h"
#include "anxin/comm/worker/runner.h"

// MPI libraries keep their allocations until the process ends; in sanitizer
// builds (the test preset) the leak report would turn every rank's exit into
// a failure that mpirun reports as the job's. Unused in other builds.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace {

anxin_collective_op SdkOp(anxin::comm::CollOp op) {
  using anxin::comm::CollOp;
  switch (op) {
    case CollOp::kAllReduce:
      return ANXIN_OP_ALL_REDUCE;
    case CollOp::kAllGather:
      return ANXIN_OP_ALL_GATHER;
    case CollOp::kReduceScatter:
      return ANXIN_OP_REDUCE_SCATTER;
    case CollOp::kBroadcast:
      return ANXIN_OP_BROADCAST;
    case CollOp::kReduce:
      return ANXIN_OP_REDUCE;
    case CollOp::kAlltoAll:
      return ANXIN_OP_ALL_TO_ALL;
    case CollOp::kSendRecv:
      return ANXIN_OP_SEND_RECV;
  }
  return ANXIN_OP_OTHER;
}

// Every timed collective goes to the node's agent through the job telemetry
// SDK (a no-op costing one atomic load when ANXIN_AGENT_SOCKET is unset), so
// the agent's AllReduce bandwidth metrics and alerts see a stress test as
// they see a training job.
void ReportToAgent(anxin::comm::Runner& runner, const anxin::comm::BenchOptions& o, int rank,
                   int ranks) {
  const char* job = std::getenv("ANXIN_JOB_ID");
  anxin_sdk_set_identity(job && *job ? job : "anxin-bench-comm", rank, ranks);
  const std::string algo = o.algo;
  runner.on_collective = [algo](const anxin::comm::CollectiveRecord& r) {
    anxin_collective(SdkOp(r.op), r.bytes, static_cast<uint64_t>(r.duration_us * 1e3), algo.c_str(),
                     r.ranks);
  };
}

// Rank 0 says what reached the agent (on stderr: the report stays clean).
void FlushTelemetry(int rank) {
  anxin_sdk_stats before{};
  anxin_sdk_get_stats(&before);
  if (!before.enabled) return;
  const int flushed = anxin_sdk_flush(2000);
  anxin_sdk_stats stats{};
  anxin_sdk_get_stats(&stats);
  if (rank == 0) {
    std::fprintf(stderr,
                 "telemetry: rank 0 sent %llu of %llu collective records to the agent at "
                 "ANXIN_AGENT_SOCKET=%s%s\n",
                 static_cast<unsigned long long>(stats.sent),
                 static_cast<unsigned long long>(stats.events), std::getenv("ANXIN_AGENT_SOCKET"),
                 flushed == 0 ? "" : " (not all were delivered: is the agent running?)");
    std::fflush(stderr);
  }
}

int Finish(int status, bool launched, int rank) {
  if (launched) {
    if (rank == 0) {
      std::printf("%s%d\n", std::string(anxin::comm::kStatusMarker).c_str(), status);
      std::fflush(stdout);
    }
    status = 0;  // the marker carries it; a non-zero exit would make mpirun abort the job
  }
  MPI_Finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace anxin::comm;
  std::string spec;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--spec") == 0 && i + 1 < argc) {
      spec = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: mpirun -np N anxin-comm-worker --spec JSON\n"
          "One rank of `anxin bench comm`; run `anxin bench comm --help` for the options.\n");
      return 0;
    } else {
      std::fprintf(stderr, "error: anxin-comm-worker: unknown argument '%s' (see --help)\n",
                   argv[i]);
      return 2;
    }
  }
  int provided = 0;
  // The watchdog thread makes no MPI calls: funneled is enough.
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "error: anxin-comm-worker: MPI_Init failed\n");
    return 3;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto options = BenchOptionsFromJson(spec);
  if (!options) {
    if (rank == 0) std::fprintf(stderr, "error: %s\n", options.error().Describe().c_str());
    return Finish(2, spec.find("\"launched\":true") != std::string::npos, rank);
  }
  auto fault = ParseFault(std::getenv("ANXIN_COMM_TEST_FAULT"));
  if (!fault) {
    if (rank == 0) std::fprintf(stderr, "error: %s\n", fault.error().Describe().c_str());
    return Finish(2, options->launched, rank);
  }
  auto engine = MakeEngine(options->engine);
  if (!engine) {
    if (rank == 0) {
      std::string built;
      for (const auto& n : EngineNames()) built += (built.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "error: engine '%s' is not built into %s (it has: %s)\n",
                   options->engine.c_str(), argv[0], built.c_str());
    }
    return Finish(3, options->launched, rank);
  }
  Runner runner(*options, *engine, *fault);
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  ReportToAgent(runner, *options, rank, ranks);
  const int status = runner.Main();
  std::fflush(stdout);
  FlushTelemetry(rank);
  return Finish(status, options->launched, rank);
}
