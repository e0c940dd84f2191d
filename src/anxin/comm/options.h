// What one `anxin bench comm` run is asked to do, shared by the `anxin`
// program (which parses flags) and the worker executable that runs in every
// MPI rank (which receives them as JSON in --spec): one definition, so the two
// cannot disagree.
//
//   BenchOptions o;
//   ANXIN_ASSIGN_OR_RETURN(o.min_bytes, ParseSize("8K"));     // nccl-tests' K = 1024
//   ANXIN_TRY(Validate(o));
//   std::string spec = ToJson(o).dump();                        // -> worker --spec
//   ANXIN_ASSIGN_OR_RETURN(BenchOptions back, BenchOptionsFromJson(spec));
//   for (uint64_t bytes : SweepSizes(o)) {
//     // one row of the sweep: CallCount(o.op, bytes, o.type, ranks) elements
//   }
//
// Thread safety: plain values and pure functions.
#ifndef ANXIN_COMM_OPTIONS_H_
#define ANXIN_COMM_OPTIONS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/comm/model.h"
#include "anxin/comm/stats.h"

namespace anxin::comm {

struct BenchOptions {
  std::string engine = "mpi";  // mpi, nccl or hccl
  CollOp op = CollOp::kAllReduce;
  uint64_t min_bytes = 8;            // -b
  uint64_t max_bytes = 32ull << 20;  // -e
  uint64_t step_factor = 2;          // -f (0 or 1: use step_bytes)
  uint64_t step_bytes = 0;           // -i
  int iters = 20;                    // -n
  int warmup = 5;                    // -w
  int check = 1;                     // -c: verify every result this many times per size
  DataType type = DataType::kFloat;  // -d
  RedOp redop = RedOp::kSum;         // -o
  int root = 0;                      // -r
  bool out_of_place = true, in_place = true;
  std::string algo{};  // --algo (recorded; the launcher sets the env)
  // --matrix: pairwise point-to-point instead of the collective sweep.
  bool matrix = false;
  uint64_t matrix_bytes = 4ull << 20;
  uint64_t matrix_lat_bytes = 8;
  int matrix_iters = 20;
  MatrixOptions matrix_options{};
  // --duration: repeat the sweep for this long (seconds); 0 = one pass.
  double duration_s = 0;
  SkewOptions skew_options{};
  // A collective that has not returned after this long ends the run (s).
  double op_timeout_s = 120;
  // Rank 0's outputs.
  bool json = false;        // JSON on stdout instead of the table
  std::string json_file{};  // also write the JSON here
  std::string csv_file{};   // also write CSV here
  bool launched = false;    // started by anxin: end with the status marker (launcher.h)
  bool progress = false;    // soak progress on stderr
  std::string command{};    // the user's command line, for the report
};

// A size as nccl-tests takes it ("8", "8K", "128M", "1G": K = 1024), or
// anything base's ParseBytes takes ("64KiB", "1MiB"; "1MB" is refused as
// ambiguous).
[[nodiscard]] Result<uint64_t> ParseSize(std::string_view text);

// Every check that needs no MPI: sizes ordered, counts positive, the engine
// known, avg and 16-bit types refused (no engine here verifies them).
[[nodiscard]] Status Validate(const BenchOptions& o);

// The sizes of the sweep, nccl-tests' way: from min, times factor (or plus
// step) while <= max.
std::vector<uint64_t> SweepSizes(const BenchOptions& o);

// Elements per call (the API's count) for a sweep size S on n ranks: S /
// type size for all_reduce, broadcast, reduce and sendrecv; S / type size / n
// for all_gather, reduce_scatter and alltoall (one rank's block). 0: too small.
uint64_t CallCount(CollOp op, uint64_t bytes, DataType type, int ranks);
// The row's size for a call count: the larger of one rank's buffers.
uint64_t RowBytes(CollOp op, uint64_t count, DataType type, int ranks);

nlohmann::json ToJson(const BenchOptions& o);
[[nodiscard]] Result<BenchOptions> BenchOptionsFromJson(std::string_view text);

// Algorithms that --algo and --sweep-algos accept per engine and operation,
// and the environment that selects one for the library:
// mpi (Open MPI's tuned collectives): OMPI_MCA_coll_tuned_use_dynamic_rules=1
//   and OMPI_MCA_coll_tuned_<op>_algorithm=NAME;
// nccl: NCCL_ALGO=NAME; hccl: HCCL_ALGO=NAME (e.g. "level0:NA;level1:ring").
std::vector<std::string> KnownAlgorithms(std::string_view engine, CollOp op);
// The default list that --sweep-algos runs.
std::vector<std::string> DefaultSweepAlgorithms(std::string_view engine, CollOp op);
[[nodiscard]] Result<std::vector<std::string>> AlgorithmEnvironment(std::string_view engine,
                                                                    CollOp op,
                                                                    const std::string& algo);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_OPTIONS_H_
