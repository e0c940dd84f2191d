#include "anxin/comm/model.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "anxin/monitor/sdk_wire.h"

namespace anxin::comm {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string WithoutUnderscores(std::string s) {
  std::erase(s, '_');
  std::erase(s, '-');
  return s;
}

}  // namespace

std::string_view OpName(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce:
      return "all_reduce";
    case CollOp::kAllGather:
      return "all_gather";
    case CollOp::kReduceScatter:
      return "reduce_scatter";
    case CollOp::kBroadcast:
      return "broadcast";
    case CollOp::kReduce:
      return "reduce";
    case CollOp::kAlltoAll:
      return "alltoall";
    case CollOp::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

Result<CollOp> ParseOp(std::string_view name) {
  std::string n = Lower(name);
  if (n.ends_with("_perf")) n.resize(n.size() - 5);
  if (n.ends_with("_test")) n.resize(n.size() - 5);
  n = WithoutUnderscores(n);
  for (CollOp op : kAllOps) {
    if (WithoutUnderscores(std::string(OpName(op))) == n) return op;
  }
  if (n == "bcast") return CollOp::kBroadcast;
  return InvalidArgument("unknown operation '" + std::string(name) +
                         "': expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                         "alltoall or sendrecv");
}

bool OpReduces(CollOp op) {
  return op == CollOp::kAllReduce || op == CollOp::kReduceScatter || op == CollOp::kReduce;
}
bool OpHasRoot(CollOp op) { return op == CollOp::kBroadcast || op == CollOp::kReduce; }

std::string_view TypeName(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return "int8";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kUint32:
      return "uint32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUint64:
      return "uint64";
    case DataType::kHalf:
      return "half";
    case DataType::kBfloat16:
      return "bfloat16";
    case DataType::kFloat:
      return "float";
    case DataType::kDouble:
      return "double";
  }
  return "?";
}

Result<DataType> ParseType(std::string_view name) {
  const std::string n = Lower(name);
  for (DataType t : {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kUint32,
                     DataType::kInt64, DataType::kUint64, DataType::kHalf, DataType::kBfloat16,
                     DataType::kFloat, DataType::kDouble}) {
    if (n == TypeName(t)) return t;
  }
  if (n == "fp32" || n == "float32") return DataType::kFloat;
  if (n == "fp64" || n == "float64") return DataType::kDouble;
  if (n == "fp16" || n == "float16") return DataType::kHalf;
  if (n == "bf16") return DataType::kBfloat16;
  if (n == "int" || n == "int32_t") return DataType::kInt32;
  if (n == "char") return DataType::kInt8;
  return InvalidArgument("unknown data type '" + std::string(name) +
                         "': expected int8, uint8, int32, uint32, int64, uint64, half, "
                         "bfloat16, float or double");
}

size_t TypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kHalf:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kDouble:
      return 8;
  }
  return 1;
}

std::string_view RedOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMin:
      return "min";
    case RedOp::kMax:
      return "max";
    case RedOp::kAvg:
      return "avg";
  }
  return "?";
}

Result<RedOp> ParseRedOp(std::string_view name) {
  const std::string n = Lower(name);
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg}) {
    if (n == RedOpName(op)) return op;
  }
  return InvalidArgument("unknown reduction '" + std::string(name) +
                         "': expected sum, prod, min, max or avg");
}

monitor::SdkCollectiveOp ToSdkOp(CollOp op) {
  using monitor::SdkCollectiveOp;
  switch (op) {
    case CollOp::kAllReduce:
      return SdkCollectiveOp::kAllReduce;
    case CollOp::kAllGather:
      return SdkCollectiveOp::kAllGather;
    case CollOp::kReduceScatter:
      return SdkCollectiveOp::kReduceScatter;
    case CollOp::kBroadcast:
      return SdkCollectiveOp::kBroadcast;
    case CollOp::kReduce:
      return SdkCollectiveOp::kReduce;
    case CollOp::kAlltoAll:
      return SdkCollectiveOp::kAllToAll;
    case CollOp::kSendRecv:
      return SdkCollectiveOp::kSendRecv;
  }
  return SdkCollectiveOp::kOther;
}

// The factors are the agent's (monitor/sdk_wire.h), so a stress test and a
// job's telemetry report the same bus bandwidth for the same collective.
double BusBandwidthFactor(CollOp op, int ranks) {
  return monitor::BusBandwidthFactor(ToSdkOp(op), ranks);
}

double AlgBandwidth(uint64_t bytes, double time_us) {
  if (time_us <= 0) return 0;
  return static_cast<double>(bytes) / 1e9 / (time_us * 1e-6);
}

int64_t TotalWrong(const CommRun& run) {
  int64_t total = 0;
  for (const Row& r : run.rows) {
    for (const auto* s : {&r.out_of_place, &r.in_place}) {
      if (*s && (*s)->wrong > 0) total += (*s)->wrong;
    }
  }
  return total;
}

void UpdateAverageBusBandwidth(CommRun& run) {
  double sum = 0;
  int n = 0;
  for (const Row& r : run.rows) {
    for (const auto* s : {&r.out_of_place, &r.in_place}) {
      if (*s) {
        sum += (*s)->busbw;
        ++n;
      }
    }
  }
  if (n > 0 && run.op) {
    run.avg_busbw = sum / n;
  } else {
    run.avg_busbw.reset();
  }
}

namespace {

nlohmann::json SampleJson(const Sample& s) {
  nlohmann::json j = {{"time_us", s.time_us}, {"algbw", s.algbw}, {"busbw", s.busbw}};
  j["wrong"] = s.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.wrong);
  if (s.p50_us) j["p50_us"] = *s.p50_us;
  if (s.p99_us) j["p99_us"] = *s.p99_us;
  if (s.max_us) j["max_us"] = *s.max_us;
  return j;
}

nlohmann::json BoolVector(const std::vector<bool>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (bool b : v) j.push_back(b);
  return j;
}

// Reading: every access is checked, so a hand-edited or truncated file is an
// error naming the field, never an exception escaping to the caller.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  Status Fail(const std::string& field, const std::string& what) const {
    return InvalidArgument(where_ + ": field '" + field + "': " + what);
  }

  template <typename T>
  Status Get(const nlohmann::json& j, const char* key, T& out, bool required = true) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required) return Fail(key, "missing");
      return Ok();
    }
    try {
      out = it->get<T>();
    } catch (const nlohmann::json::exception&) {
      return Fail(key, "has the wrong type (" + std::string(it->type_name()) + ")");
    }
    return Ok();
  }

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

Result<Sample> SampleFromJson(const nlohmann::json& j, const Reader& r) {
  if (!j.is_object()) return std::unexpected(r.Fail("sample", "expected an object").error());
  Sample s;
  ANXIN_TRY(r.Get(j, "time_us", s.time_us));
  ANXIN_TRY(r.Get(j, "algbw", s.algbw));
  ANXIN_TRY(r.Get(j, "busbw", s.busbw));
  s.wrong = -1;
  ANXIN_TRY(r.Get(j, "wrong", s.wrong, false));
  double v = 0;
  if (j.contains("p50_us")) {
    ANXIN_TRY(r.Get(j, "p50_us", v));
    s.p50_us = v;
  }
  if (j.contains("p99_us")) {
    ANXIN_TRY(r.Get(j, "p99_us", v));
    s.p99_us = v;
  }
  if (j.contains("max_us")) {
    ANXIN_TRY(r.Get(j, "max_us", v));
    s.max_us = v;
  }
  return s;
}

}  // namespace

nlohmann::json ToJson(const CommRun& run) {
  nlohmann::json j;
  j["schema"] = "anxin.comm.v1";
  j["source"] = run.source;
  j["engine"] = run.engine;
  j["op"] = run.op ? nlohmann::json(OpName(*run.op)) : nlohmann::json(nullptr);
  j["type"] = TypeName(run.type);
  j["redop"] = run.redop ? nlohmann::json(RedOpName(*run.redop)) : nlohmann::json(nullptr);
  j["root"] = run.root;
  j["ranks"] = run.ranks;
  j["hosts"] = run.hosts;
  j["algo"] = run.algo;
  j["algo_effective"] = run.algo_effective;
  j["engine_version"] = run.engine_version;
  j["iters"] = run.iters;
  j["warmup"] = run.warmup;
  j["checked"] = run.checked;
  j["bw_unit_bytes"] = run.bw_unit_bytes;
  if (!run.command.empty()) j["command"] = run.command;
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : run.rows) {
    nlohmann::json row = {{"size", r.bytes}, {"count", r.count}};
    row["out_of_place"] = r.out_of_place ? SampleJson(*r.out_of_place) : nlohmann::json(nullptr);
    row["in_place"] = r.in_place ? SampleJson(*r.in_place) : nlohmann::json(nullptr);
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);
  j["avg_busbw"] = run.avg_busbw ? nlohmann::json(*run.avg_busbw) : nlohmann::json(nullptr);
  j["wrong_total"] = TotalWrong(run);
  if (run.skew) {
    nlohmann::json s = {{"collectives", run.skew->collectives}, {"why", run.skew->why}};
    s["slow_rank"] =
        run.skew->slow_rank ? nlohmann::json(*run.skew->slow_rank) : nlohmann::json(nullptr);
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankSkew& k : run.skew->ranks) {
      ranks.push_back({{"rank", k.rank},
                       {"host", k.host},
                       {"median_late_us", k.median_late_us},
                       {"p99_late_us", k.p99_late_us},
                       {"last_share", k.last_share}});
    }
    s["ranks"] = std::move(ranks);
    j["skew"] = std::move(s);
  }
  if (run.matrix) {
    const MatrixReport& m = *run.matrix;
    j["matrix"] = {{"ranks", m.ranks},
                   {"bytes", m.bytes},
                   {"lat_bytes", m.lat_bytes},
                   {"rounds", m.rounds},
                   {"bw_gbs", m.bw_gbs},
                   {"lat_us", m.lat_us},
                   {"bw_outlier", BoolVector(m.bw_outlier)},
                   {"lat_outlier", BoolVector(m.lat_outlier)},
                   {"slow_ranks", m.slow_ranks},
                   {"why", m.why}};
  }
  if (run.soak) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const SoakSize& s : run.soak->sizes) {
      sizes.push_back({{"size", s.bytes},
                       {"first_us", s.first_us},
                       {"last_us", s.last_us},
                       {"drift_pct", s.drift_pct},
                       {"p50_us", s.p50_us},
                       {"p99_us", s.p99_us},
                       {"max_us", s.max_us},
                       {"pass_us", s.pass_us}});
    }
    j["soak"] = {
        {"seconds", run.soak->seconds}, {"passes", run.soak->passes}, {"sizes", std::move(sizes)}};
  }
  return j;
}

nlohmann::json ToJson(const SweepReport& sweep) {
  nlohmann::json j;
  j["schema"] = "anxin.comm.sweep.v1";
  j["algos"] = sweep.algos;
  nlohmann::json runs = nlohmann::json::array();
  for (const CommRun& r : sweep.runs) runs.push_back(ToJson(r));
  j["runs"] = std::move(runs);
  j["best"] = sweep.best;
  nlohmann::json cross = nlohmann::json::array();
  for (const Crossover& c : sweep.crossovers) {
    cross.push_back({{"size", c.bytes}, {"from", c.from}, {"to", c.to}});
  }
  j["crossovers"] = std::move(cross);
  return j;
}

Result<CommRun> CommRunFromJson(const nlohmann::json& j, const std::string& where) {
  Reader r(where);
  if (!j.is_object()) return InvalidArgument(where + ": expected a JSON object");
  std::string schema;
  ANXIN_TRY(r.Get(j, "schema", schema));
  if (schema != "anxin.comm.v1") {
    return InvalidArgument(where + ": schema '" + schema +
                           "' is not anxin.comm.v1 (write it with `anxin --json bench comm`)");
  }
  CommRun run;
  ANXIN_TRY(r.Get(j, "source", run.source, false));
  ANXIN_TRY(r.Get(j, "engine", run.engine, false));
  std::string s;
  if (j.contains("op") && !j["op"].is_null()) {
    ANXIN_TRY(r.Get(j, "op", s));
    ANXIN_ASSIGN_OR_RETURN(run.op, ParseOp(s));
  }
  s.clear();
  ANXIN_TRY(r.Get(j, "type", s));
  ANXIN_ASSIGN_OR_RETURN(run.type, ParseType(s));
  if (j.contains("redop") && !j["redop"].is_null()) {
    ANXIN_TRY(r.Get(j, "redop", s));
    ANXIN_ASSIGN_OR_RETURN(run.redop, ParseRedOp(s));
  }
  ANXIN_TRY(r.Get(j, "root", run.root, false));
  ANXIN_TRY(r.Get(j, "ranks", run.ranks, false));
  ANXIN_TRY(r.Get(j, "hosts", run.hosts, false));
  ANXIN_TRY(r.Get(j, "algo", run.algo, false));
  ANXIN_TRY(r.Get(j, "algo_effective", run.algo_effective, false));
  ANXIN_TRY(r.Get(j, "engine_version", run.engine_version, false));
  ANXIN_TRY(r.Get(j, "iters", run.iters, false));
  ANXIN_TRY(r.Get(j, "warmup", run.warmup, false));
  ANXIN_TRY(r.Get(j, "checked", run.checked, false));
  ANXIN_TRY(r.Get(j, "bw_unit_bytes", run.bw_unit_bytes, false));
  ANXIN_TRY(r.Get(j, "command", run.command, false));
  auto rows = j.find("rows");
  if (rows == j.end() || !rows->is_array())
    return std::unexpected(r.Fail("rows", "missing").error());
  for (const auto& row_j : *rows) {
    if (!row_j.is_object()) return std::unexpected(r.Fail("rows", "expected objects").error());
    Row row;
    ANXIN_TRY(r.Get(row_j, "size", row.bytes));
    ANXIN_TRY(r.Get(row_j, "count", row.count, false));
    for (auto [key, slot] :
         {std::pair{"out_of_place", &row.out_of_place}, std::pair{"in_place", &row.in_place}}) {
      auto it = row_j.find(key);
      if (it != row_j.end() && !it->is_null()) {
        ANXIN_ASSIGN_OR_RETURN(*slot, SampleFromJson(*it, r));
      }
    }
    run.rows.push_back(std::move(row));
  }
  double avg = 0;
  if (j.contains("avg_busbw") && !j["avg_busbw"].is_null()) {
    ANXIN_TRY(r.Get(j, "avg_busbw", avg));
    run.avg_busbw = avg;
  }
  return run;
}

}  // namespace anxin::comm
