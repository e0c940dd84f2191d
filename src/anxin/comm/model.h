// The result model of `anxin bench comm`: what one collective sweep measured,
// in nccl-tests' terms (size, count, type, redop, root, time, algbw, busbw,
// #wrong; out-of-place then in-place), plus what anxin adds (p50/p99 time,
// per-rank arrival skew, the pairwise link matrix, soak drift). Runs of the
// engines, imports of nccl-tests and hccl_test outputs, and saved JSON files
// all land in this one model, so compare and the agent read them alike.
//
//   CommRun run;
//   run.op = CollOp::kAllReduce;
//   run.ranks = 8;
//   double algbw = AlgBandwidth(1 << 20, 125.0);            // GB/s, 1e9 bytes
//   double busbw = algbw * BusBandwidthFactor(*run.op, run.ranks);
//   nlohmann::json j = ToJson(run);
//   ANXIN_ASSIGN_OR_RETURN(CommRun back, CommRunFromJson(j, "run.json"));
//
// Formulas (nccl-tests' doc/PERFORMANCE.md and its per-operation GetBw):
// the size S of a row is the larger of the send and receive buffers of one
// rank in bytes; algbw = S / time; busbw = algbw x 2(n-1)/n for all_reduce,
// x (n-1)/n for all_gather, reduce_scatter and alltoall, x 1 for broadcast,
// reduce and sendrecv. GB/s means 1e9 bytes per second.
//
// Thread safety: plain values.
#ifndef ANXIN_COMM_MODEL_H_
#define ANXIN_COMM_MODEL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::comm {

enum class CollOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kSendRecv,
};
inline constexpr CollOp kAllOps[] = {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter,
                                     CollOp::kBroadcast, CollOp::kReduce,    CollOp::kAlltoAll,
                                     CollOp::kSendRecv};

// "all_reduce", "all_gather", ... (nccl-tests' binary names without _perf).
std::string_view OpName(CollOp op);
// Accepts the names above, without underscores ("allreduce") and with
// nccl-tests' "_perf" suffix.
[[nodiscard]] Result<CollOp> ParseOp(std::string_view name);
// True for all_reduce, reduce_scatter and reduce.
bool OpReduces(CollOp op);
// True for broadcast and reduce.
bool OpHasRoot(CollOp op);

enum class DataType {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kHalf,
  kBfloat16,
  kFloat,
  kDouble
};
// nccl-tests' spelling: int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double.
std::string_view TypeName(DataType t);
// Also fp32, fp16, bf16, fp64, int (nccl-tests' and hccl_test's aliases).
[[nodiscard]] Result<DataType> ParseType(std::string_view name);
size_t TypeSize(DataType t);

enum class RedOp { kSum, kProd, kMin, kMax, kAvg };
std::string_view RedOpName(RedOp op);
[[nodiscard]] Result<RedOp> ParseRedOp(std::string_view name);

// nccl-tests' bus bandwidth factor for n ranks (see the file comment).
double BusBandwidthFactor(CollOp op, int ranks);
// bytes / time in GB/s (1e9 bytes per second); 0 when time_us <= 0.
double AlgBandwidth(uint64_t bytes, double time_us);

// One measurement of one size: out-of-place or in-place.
struct Sample {
  double time_us = 0;  // mean over ranks and iterations (nccl-tests' "time")
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  // Elements that differed from the expected result, summed over ranks;
  // -1 when not checked (nccl-tests prints N/A).
  int64_t wrong = -1;
  // Per-iteration time percentiles; absent in imports of other tools.
  std::optional<double> p50_us{};
  std::optional<double> p99_us{};
  std::optional<double> max_us{};
};

struct Row {
  uint64_t bytes = 0;  // S: the larger of one rank's send and receive buffers
  uint64_t count = 0;  // elements per call, as the API takes them
  std::optional<Sample> out_of_place{};
  std::optional<Sample> in_place{};
};

// Per-rank arrival lateness at the timed collectives: how long after the
// first rank each rank entered, clocks aligned to rank 0.
struct RankSkew {
  int rank = 0;
  std::string host{};
  double median_late_us = 0;
  double p99_late_us = 0;
  double last_share = 0;  // fraction of collectives this rank entered last
};
struct SkewReport {
  uint64_t collectives = 0;  // how many timed collectives were observed
  std::vector<RankSkew> ranks{};
  // The rank that is late at most collectives, when it stands out (stats.h).
  std::optional<int> slow_rank{};
  std::string why{};  // one sentence: why that rank, or why none
};

// Pairwise point-to-point results; entry [src * ranks + dst].
struct MatrixReport {
  int ranks = 0;
  uint64_t bytes = 0;            // message size of the bandwidth test
  uint64_t lat_bytes = 0;        // message size of the latency test
  int rounds = 0;                // rounds of disjoint pairs
  std::vector<double> bw_gbs{};  // src -> dst streaming bandwidth, GB/s
  std::vector<double> lat_us{};  // half round trip between src and dst, us
  std::vector<bool> bw_outlier{};
  std::vector<bool> lat_outlier{};
  std::vector<int> slow_ranks{};  // ranks whose links are outliers with every peer
  std::string why{};
};

// A soak: the sweep repeated for a duration.
struct SoakSize {
  uint64_t bytes = 0;
  double first_us = 0;   // mean time of the first pass
  double last_us = 0;    // mean time of the last pass
  double drift_pct = 0;  // mean of the last quarter of passes vs the first quarter
  double p50_us = 0, p99_us = 0, max_us = 0;  // over every iteration of every pass
  std::vector<double> pass_us{};              // mean time per pass
};
struct SoakReport {
  double seconds = 0;
  int passes = 0;
  std::vector<SoakSize> sizes{};
};

struct CommRun {
  std::string source = "anxin";  // "anxin", "nccl-tests" or "hccl_test"
  std::string engine{};          // mpi, nccl, hccl; empty for imports
  std::optional<CollOp> op{};    // absent when an import cannot tell
  DataType type = DataType::kFloat;
  std::optional<RedOp> redop{};  // absent for operations that do not reduce
  int root = -1;
  int ranks = 0;                     // 0 when unknown
  std::vector<std::string> hosts{};  // one per rank, when known
  std::string algo{};                // the algorithm asked for (--algo), empty = library default
  // What the library reports it uses (Open MPI's MCA variable read back
  // through MPI_T; NCCL_ALGO/HCCL_ALGO as the ranks saw them); empty = unknown.
  std::string algo_effective{};
  std::string engine_version{};  // "Open MPI v4.1.4", "NCCL 2.27.3"
  int iters = 0, warmup = 0;
  bool checked = false;
  // The unit of algbw/busbw as the source printed them: 1e9 (GB/s, anxin and
  // nccl-tests) or 2^30 (hccl_test's "GB/s", which is GiB/s).
  double bw_unit_bytes = 1e9;
  std::vector<Row> rows{};
  // nccl-tests' footer: mean busbw over every out-of-place and in-place
  // sample; absent when nothing has a busbw.
  std::optional<double> avg_busbw{};
  std::optional<SkewReport> skew{};
  std::optional<MatrixReport> matrix{};
  std::optional<SoakReport> soak{};
  std::string command{};  // the command line that produced it, when known
};

// Sum of #wrong over every checked sample (0 when nothing was checked).
int64_t TotalWrong(const CommRun& run);
// Recomputes avg_busbw from the rows.
void UpdateAverageBusBandwidth(CommRun& run);

// An algorithm sweep: one run per algorithm, and where the fastest changes.
struct Crossover {
  uint64_t bytes = 0;  // the first size at which `to` is fastest
  std::string from{}, to{};
};
struct SweepReport {
  std::vector<std::string> algos{};
  std::vector<CommRun> runs{};  // same order as algos
  // Per size (rows of runs[0]): the fastest algorithm by out-of-place time.
  std::vector<std::string> best{};
  std::vector<Crossover> crossovers{};
};

nlohmann::json ToJson(const CommRun& run);
nlohmann::json ToJson(const SweepReport& sweep);
// Reads what ToJson wrote; `where` names the file in errors.
[[nodiscard]] Result<CommRun> CommRunFromJson(const nlohmann::json& j, const std::string& where);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_MODEL_H_
