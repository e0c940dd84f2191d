#include "anxin/comm/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "anxin/base/config.h"

namespace anxin::comm {

Result<uint64_t> ParseSize(std::string_view text) {
  uint64_t value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && p != text.data()) {
    std::string_view suffix = text.substr(static_cast<size_t>(p - text.data()));
    uint64_t mult = 0;
    if (suffix.empty()) mult = 1;
    if (suffix == "K" || suffix == "k") mult = 1ull << 10;
    if (suffix == "M" || suffix == "m") mult = 1ull << 20;
    if (suffix == "G" || suffix == "g") mult = 1ull << 30;
    if (mult != 0) {
      if (value > UINT64_MAX / mult)
        return InvalidArgument(fmt::format("size '{}' is too large", text));
      return value * mult;
    }
  }
  auto bytes = ParseBytes(text);
  if (!bytes) {
    // ParseBytes says why ("size '1MB' is ambiguous: write 1MiB ...").
    return InvalidArgument(fmt::format(
        "expected a size like 8, 64K, 128M, 1G (K = 1024, as nccl-tests) or 64KiB, got '{}': {}",
        text, bytes.error().message()));
  }
  return *bytes;
}

Status Validate(const BenchOptions& o) {
  if (o.engine != "mpi" && o.engine != "nccl" && o.engine != "hccl") {
    return InvalidArgument("--engine " + o.engine + ": expected mpi, nccl or hccl");
  }
  if (!o.matrix) {
    if (o.min_bytes == 0) return InvalidArgument("-b/--minbytes must be at least 1 byte");
    if (o.max_bytes < o.min_bytes) {
      return InvalidArgument(
          fmt::format("-e/--maxbytes ({}) is below -b/--minbytes ({})", o.max_bytes, o.min_bytes));
    }
    if (o.step_factor <= 1 && o.step_bytes == 0) {
      return InvalidArgument("-f/--stepfactor must be at least 2, or give -i/--stepbytes");
    }
  }
  if (o.iters < 1) return InvalidArgument("-n/--iters must be at least 1");
  if (o.warmup < 0) return InvalidArgument("-w/--warmup_iters must not be negative");
  if (o.check < 0) return InvalidArgument("-c/--check must be 0 or more");
  if (o.root < 0) return InvalidArgument("-r/--root must not be negative");
  if (!o.out_of_place && !o.in_place) {
    return InvalidArgument("nothing to run: both out-of-place and in-place are off");
  }
  if (o.redop == RedOp::kAvg) {
    return Unimplemented("-o avg: no engine here verifies averages yet; use sum, prod, min or max");
  }
  if (o.type == DataType::kHalf || o.type == DataType::kBfloat16) {
    return Unimplemented(fmt::format(
        "-d {}: MPI has no 16-bit float type and the nccl/hccl engines here check results on the "
        "host in the same types; use float, double or an integer type",
        TypeName(o.type)));
  }
  if (o.duration_s < 0) return InvalidArgument("--duration must not be negative");
  if (o.op_timeout_s <= 0) return InvalidArgument("--op-timeout must be positive");
  if (o.matrix) {
    if (o.matrix_bytes == 0 || o.matrix_lat_bytes == 0)
      return InvalidArgument("--matrix-bytes and --matrix-lat-bytes must be at least 1");
    if (o.matrix_iters < 1) return InvalidArgument("--matrix-iters must be at least 1");
  }
  if (!o.algo.empty()) {
    ANXIN_TRY(AlgorithmEnvironment(o.engine, o.op, o.algo));
  }
  return Ok();
}

std::vector<uint64_t> SweepSizes(const BenchOptions& o) {
  std::vector<uint64_t> sizes;
  uint64_t size = o.min_bytes;
  while (size <= o.max_bytes && size > 0) {
    sizes.push_back(size);
    uint64_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
    if (next <= size) break;  // overflow
    size = next;
    if (sizes.size() > 4096) break;
  }
  return sizes;
}

uint64_t CallCount(CollOp op, uint64_t bytes, DataType type, int ranks) {
  const uint64_t elems = bytes / TypeSize(type);
  switch (op) {
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAlltoAll:
      return ranks > 0 ? elems / static_cast<uint64_t>(ranks) : 0;
    default:
      return elems;
  }
}

uint64_t RowBytes(CollOp op, uint64_t count, DataType type, int ranks) {
  const uint64_t one = count * TypeSize(type);
  switch (op) {
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAlltoAll:
      return one * static_cast<uint64_t>(ranks);
    default:
      return one;
  }
}

nlohmann::json ToJson(const BenchOptions& o) {
  return {{"engine", o.engine},
          {"op", OpName(o.op)},
          {"min_bytes", o.min_bytes},
          {"max_bytes", o.max_bytes},
          {"step_factor", o.step_factor},
          {"step_bytes", o.step_bytes},
          {"iters", o.iters},
          {"warmup", o.warmup},
          {"check", o.check},
          {"type", TypeName(o.type)},
          {"redop", RedOpName(o.redop)},
          {"root", o.root},
          {"out_of_place", o.out_of_place},
          {"in_place", o.in_place},
          {"algo", o.algo},
          {"matrix", o.matrix},
          {"matrix_bytes", o.matrix_bytes},
          {"matrix_lat_bytes", o.matrix_lat_bytes},
          {"matrix_iters", o.matrix_iters},
          {"matrix_bw_fraction", o.matrix_options.bw_fraction},
          {"matrix_lat_multiple", o.matrix_options.lat_multiple},
          {"duration_s", o.duration_s},
          {"slow_min_late_us", o.skew_options.min_late_us},
          {"slow_ratio", o.skew_options.ratio},
          {"slow_min_last_share", o.skew_options.min_last_share},
          {"op_timeout_s", o.op_timeout_s},
          {"json", o.json},
          {"json_file", o.json_file},
          {"csv_file", o.csv_file},
          {"launched", o.launched},
          {"progress", o.progress},
          {"command", o.command}};
}

Result<BenchOptions> BenchOptionsFromJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("--spec: not a JSON object");
  BenchOptions o;
  try {
    o.engine = j.value("engine", o.engine);
    ANXIN_ASSIGN_OR_RETURN(o.op, ParseOp(j.value("op", std::string("all_reduce"))));
    o.min_bytes = j.value("min_bytes", o.min_bytes);
    o.max_bytes = j.value("max_bytes", o.max_bytes);
    o.step_factor = j.value("step_factor", o.step_factor);
    o.step_bytes = j.value("step_bytes", o.step_bytes);
    o.iters = j.value("iters", o.iters);
    o.warmup = j.value("warmup", o.warmup);
    o.check = j.value("check", o.check);
    ANXIN_ASSIGN_OR_RETURN(o.type, ParseType(j.value("type", std::string("float"))));
    ANXIN_ASSIGN_OR_RETURN(o.redop, ParseRedOp(j.value("redop", std::string("sum"))));
    o.root = j.value("root", o.root);
    o.out_of_place = j.value("out_of_place", o.out_of_place);
    o.in_place = j.value("in_place", o.in_place);
    o.algo = j.value("algo", o.algo);
    o.matrix = j.value("matrix", o.matrix);
    o.matrix_bytes = j.value("matrix_bytes", o.matrix_bytes);
    o.matrix_lat_bytes = j.value("matrix_lat_bytes", o.matrix_lat_bytes);
    o.matrix_iters = j.value("matrix_iters", o.matrix_iters);
    o.matrix_options.bw_fraction = j.value("matrix_bw_fraction", o.matrix_options.bw_fraction);
    o.matrix_options.lat_multiple = j.value("matrix_lat_multiple", o.matrix_options.lat_multiple);
    o.duration_s = j.value("duration_s", o.duration_s);
    o.skew_options.min_late_us = j.value("slow_min_late_us", o.skew_options.min_late_us);
    o.skew_options.ratio = j.value("slow_ratio", o.skew_options.ratio);
    o.skew_options.min_last_share = j.value("slow_min_last_share", o.skew_options.min_last_share);
    o.op_timeout_s = j.value("op_timeout_s", o.op_timeout_s);
    o.json = j.value("json", o.json);
    o.json_file = j.value("json_file", o.json_file);
    o.csv_file = j.value("csv_file", o.csv_file);
    o.launched = j.value("launched", o.launched);
    o.progress = j.value("progress", o.progress);
    o.command = j.value("command", o.command);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("--spec: ") + e.what());
  }
  ANXIN_TRY(Validate(o));
  return o;
}

namespace {

std::string MpiTunedName(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce:
      return "allreduce";
    case CollOp::kAllGather:
      return "allgather";
    case CollOp::kReduceScatter:
      return "reduce_scatter_block";
    case CollOp::kBroadcast:
      return "bcast";
    case CollOp::kReduce:
      return "reduce";
    case CollOp::kAlltoAll:
      return "alltoall";
    case CollOp::kSendRecv:
      return "";
  }
  return "";
}

}  // namespace

std::vector<std::string> KnownAlgorithms(std::string_view engine, CollOp op) {
  if (engine == "mpi") {
    // Open MPI 4.1's coll/tuned choices (ompi_info --param coll tuned --level 9).
    switch (op) {
      case CollOp::kAllReduce:
        return {"basic_linear", "nonoverlapping", "recursive_doubling",
                "ring",         "segmented_ring", "rabenseifner"};
      case CollOp::kAllGather:
        return {"linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc"};
      case CollOp::kReduceScatter:
        return {"basic_linear", "recursive_doubling", "recursive_halving", "butterfly"};
      case CollOp::kBroadcast:
        return {"basic_linear",          "chain",    "pipeline", "split_binary_tree",
                "binary_tree",           "binomial", "knomial",  "scatter_allgather",
                "scatter_allgather_ring"};
      case CollOp::kReduce:
        return {"linear",   "chain",           "pipeline",    "binary",
                "binomial", "in-order_binary", "rabenseifner"};
      case CollOp::kAlltoAll:
        return {"linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"};
      case CollOp::kSendRecv:
        return {};
    }
  }
  if (engine == "nccl")
    return {"Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};
  if (engine == "hccl")
    return {"ring", "H-D_R", "NHR", "NHR_V1", "NB", "pipeline", "pairwise", "AHC", "AHC_BROKE"};
  return {};
}

std::vector<std::string> DefaultSweepAlgorithms(std::string_view engine, CollOp op) {
  if (engine == "mpi") {
    switch (op) {
      case CollOp::kAllReduce:
        return {"recursive_doubling", "ring", "rabenseifner"};
      case CollOp::kAllGather:
        return {"bruck", "recursive_doubling", "ring"};
      case CollOp::kReduceScatter:
        return {"basic_linear", "recursive_doubling", "butterfly"};
      case CollOp::kBroadcast:
        return {"binomial", "pipeline", "scatter_allgather"};
      case CollOp::kReduce:
        return {"binomial", "pipeline", "rabenseifner"};
      case CollOp::kAlltoAll:
        return {"linear", "pairwise", "modified_bruck"};
      case CollOp::kSendRecv:
        return {};
    }
  }
  if (engine == "nccl") return {"Ring", "Tree"};
  if (engine == "hccl") return {"ring", "H-D_R", "NHR", "NB"};
  return {};
}

Result<std::vector<std::string>> AlgorithmEnvironment(std::string_view engine, CollOp op,
                                                      const std::string& algo) {
  const auto known = KnownAlgorithms(engine, op);
  auto join = [&] {
    std::string s;
    for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
    return s;
  };
  if (engine == "mpi") {
    if (known.empty()) {
      return InvalidArgument(
          fmt::format("--algo: the mpi engine has no algorithm choice for {}", OpName(op)));
    }
    if (std::find(known.begin(), known.end(), algo) == known.end()) {
      return InvalidArgument(
          fmt::format("--algo {}: Open MPI's {} algorithms are {}", algo, OpName(op), join()));
    }
    return std::vector<std::string>{
        "OMPI_MCA_coll_tuned_use_dynamic_rules=1",
        fmt::format("OMPI_MCA_coll_tuned_{}_algorithm={}", MpiTunedName(op), algo)};
  }
  if (engine == "nccl") {
    // NCCL_ALGO also takes lists and per-operation forms ("allreduce:tree");
    // only plain names are checked here.
    if (algo.find_first_of(",;:^") == std::string::npos &&
        std::none_of(known.begin(), known.end(), [&](const std::string& k) {
          return std::equal(k.begin(), k.end(), algo.begin(), algo.end(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          });
        })) {
      return InvalidArgument(fmt::format("--algo {}: NCCL's algorithms are {}", algo, join()));
    }
    return std::vector<std::string>{"NCCL_ALGO=" + algo};
  }
  if (engine == "hccl") {
    // A full HCCL_ALGO value ("level0:NA;level1:ring") passes as it is; a bare
    // name selects the inter-server (level1) algorithm.
    if (algo.find(':') != std::string::npos) return std::vector<std::string>{"HCCL_ALGO=" + algo};
    if (std::find(known.begin(), known.end(), algo) == known.end()) {
      return InvalidArgument(fmt::format(
          "--algo {}: HCCL's level-1 algorithms are {} (or give a full HCCL_ALGO value such as "
          "'level0:NA;level1:ring')",
          algo, join()));
    }
    return std::vector<std::string>{"HCCL_ALGO=level0:NA;level1:" + algo};
  }
  return InvalidArgument("--engine " + std::string(engine) + ": unknown");
}

}  // namespace anxin::comm
