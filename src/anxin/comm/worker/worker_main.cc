// anxin-comm-worker: one MPI rank of `anxin bench comm`. Started by mpirun,
// either through `anxin bench comm --np N` or by `mpirun ... anxin bench comm`
// (which replaces itself with this program). Takes one argument pair,
// --spec JSON (comm/options.h), and prints rank 0's report on stdout.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "anxin/comm/launcher.h"
#include "anxin/comm/options.h"
#include "anxin/comm/worker/engine.h"
#include "anxin/comm/worker/runner.h"

// MPI libraries keep their allocations until the process ends; in sanitizer
// builds (the test preset) the leak report would turn every rank's exit into
// a failure that mpirun reports as the job's. Unused in other builds.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace {

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
  const int status = runner.Main();
  std::fflush(stdout);
  return Finish(status, options->launched, rank);
}
