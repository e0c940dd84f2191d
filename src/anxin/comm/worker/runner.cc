#include "anxin/comm/worker/runner.h"

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"
#include "anxin/comm/format.h"
#include "anxin/comm/launcher.h"
#include "anxin/comm/stats.h"

namespace anxin::comm {

// --- engine registry --------------------------------------------------------

namespace {
std::map<std::string, EngineFactory>& Engines() {
  static std::map<std::string, EngineFactory> engines;
  return engines;
}
}  // namespace

bool RegisterEngine(std::string name, EngineFactory factory) {
  Engines()[std::move(name)] = std::move(factory);
  return true;
}

std::unique_ptr<Engine> MakeEngine(std::string_view name) {
  auto it = Engines().find(std::string(name));
  return it == Engines().end() ? nullptr : it->second();
}

std::vector<std::string> EngineNames() {
  std::vector<std::string> names;
  for (const auto& [name, f] : Engines()) names.push_back(name);
  return names;
}

uint64_t InputElements(const Call& call, int ranks) {
  if (call.op == CollOp::kReduceScatter || call.op == CollOp::kAlltoAll)
    return call.count * static_cast<uint64_t>(ranks);
  return call.count;
}

uint64_t OutputElements(const Call& call, int ranks) {
  if (call.op == CollOp::kAllGather || call.op == CollOp::kAlltoAll)
    return call.count * static_cast<uint64_t>(ranks);
  return call.count;
}

// --- faults -----------------------------------------------------------------

Result<Fault> ParseFault(const char* text) {
  Fault f;
  if (text == nullptr || *text == '\0') return f;
  std::string s(text);
  auto c1 = s.find(':');
  auto c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
  if (c2 == std::string::npos) {
    return InvalidArgument("ANXIN_COMM_TEST_FAULT=" + s +
                           ": expected delay:RANK:US, exit:RANK:N, hang:RANK:N or corrupt:RANK:N");
  }
  const std::string kind = s.substr(0, c1);
  if (kind == "delay")
    f.kind = Fault::Kind::kDelay;
  else if (kind == "exit")
    f.kind = Fault::Kind::kExit;
  else if (kind == "hang")
    f.kind = Fault::Kind::kHang;
  else if (kind == "corrupt")
    f.kind = Fault::Kind::kCorrupt;
  else
    return InvalidArgument("ANXIN_COMM_TEST_FAULT=" + s + ": unknown kind '" + kind + "'");
  try {
    f.rank = std::stoi(s.substr(c1 + 1, c2 - c1 - 1));
    f.value = std::stoll(s.substr(c2 + 1));
  } catch (const std::exception&) {
    return InvalidArgument("ANXIN_COMM_TEST_FAULT=" + s + ": RANK and the number must be integers");
  }
  return f;
}

// --- watchdog ---------------------------------------------------------------

Watchdog::Watchdog(int rank, double timeout_s)
    : rank_(rank), timeout_ns_(static_cast<int64_t>(timeout_s * 1e9)) {
  thread_ = std::thread([this] { Loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    if (since == 0 || NowNs() - since < timeout_ns_) continue;
    const std::string* what = what_.load(std::memory_order_relaxed);
    std::fprintf(stderr,
                 "error: rank %d: %s has not completed after %.0f s: a peer rank is dead or "
                 "stuck (the watchdog ended the run; raise --op-timeout for slower links)\n",
                 rank_, what ? what->c_str() : "a collective",
                 static_cast<double>(timeout_ns_) / 1e9);
    std::fflush(stderr);
    // No MPI call from this thread: ending the process makes mpirun stop the job.
    ::_exit(3);
  }
}

// --- timed loop -------------------------------------------------------------

namespace {

double NowUs() { return static_cast<double>(Watchdog::NowNs()) / 1e3; }

void ApplyFault(const Fault& fault, int rank, int64_t& calls) {
  if (fault.rank != rank) return;
  switch (fault.kind) {
    case Fault::Kind::kNone:
    case Fault::Kind::kCorrupt:
      return;
    case Fault::Kind::kDelay:
      std::this_thread::sleep_for(std::chrono::microseconds(fault.value));
      return;
    case Fault::Kind::kExit:
      if (++calls >= fault.value) ::raise(SIGKILL);
      return;
    case Fault::Kind::kHang:
      if (++calls >= fault.value) {
        for (;;) ::pause();
      }
      return;
  }
}

int64_t g_fault_calls = 0;

}  // namespace

Status TimedIterations(Engine& engine, const Call& call, int iters, int rank, const Fault& fault,
                       Watchdog& watchdog, const std::string* what, IterationTimes& out) {
  out.start_us.resize(static_cast<size_t>(iters));
  out.duration_us.resize(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    if (fault.kind != Fault::Kind::kNone) ApplyFault(fault, rank, g_fault_calls);
    const int64_t t0_ns = Watchdog::NowNs();
    watchdog.ArmAt(what, t0_ns);
    Status st = engine.Run(call);
    const double t1 = NowUs();
    const double t0 = static_cast<double>(t0_ns) / 1e3;
    if (!st) {
      watchdog.Disarm();
      return st;
    }
    out.start_us[static_cast<size_t>(i)] = t0;
    out.duration_us[static_cast<size_t>(i)] = t1 - t0;
  }
  watchdog.Disarm();
  return Ok();
}

// --- data patterns ----------------------------------------------------------

namespace {

// Small integers, so that sums and products are exact in every type and in
// any order of reduction; non-reducing operations use a wider range so that
// a block delivered to the wrong place differs.
template <typename T>
T Value(const Call& call, int rank, uint64_t i, int rep) {
  if (!OpReduces(call.op)) {
    return static_cast<T>(
        (static_cast<uint64_t>(rank) * 131 + i * 7 + static_cast<uint64_t>(rep) * 3) % 127);
  }
  if (call.redop == RedOp::kProd) {
    return static_cast<T>(
        1 + ((static_cast<uint64_t>(rank) + i + static_cast<uint64_t>(rep)) % 3 == 0 ? 1 : 0));
  }
  return static_cast<T>((static_cast<uint64_t>(rank) * 7 + i * 3 + static_cast<uint64_t>(rep) * 5) %
                        8);
}

template <typename T>
T Combine(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum:
      return static_cast<T>(a + b);
    case RedOp::kProd:
      return static_cast<T>(a * b);
    case RedOp::kMin:
      return std::min(a, b);
    case RedOp::kMax:
      return std::max(a, b);
    case RedOp::kAvg:
      break;
  }
  return a;
}

template <typename T>
T Reduced(const Call& call, int ranks, uint64_t i, int rep) {
  T acc = Value<T>(call, 0, i, rep);
  for (int r = 1; r < ranks; ++r) acc = Combine(call.redop, acc, Value<T>(call, r, i, rep));
  return acc;
}

template <typename T>
void FillInput(const Call& call, int rank, int ranks, int rep, std::vector<char>& buf) {
  const uint64_t n = InputElements(call, ranks);
  buf.resize(n * sizeof(T));
  T* p = reinterpret_cast<T*>(buf.data());
  for (uint64_t i = 0; i < n; ++i) p[i] = Value<T>(call, rank, i, rep);
}

template <typename T>
T Expected(const Call& call, int rank, int ranks, uint64_t i, int rep) {
  const uint64_t c = call.count;
  switch (call.op) {
    case CollOp::kAllReduce:
    case CollOp::kReduce:
      return Reduced<T>(call, ranks, i, rep);
    case CollOp::kReduceScatter:
      return Reduced<T>(call, ranks, static_cast<uint64_t>(rank) * c + i, rep);
    case CollOp::kAllGather:
      return Value<T>(call, static_cast<int>(i / c), i % c, rep);
    case CollOp::kBroadcast:
      return Value<T>(call, call.root, i, rep);
    case CollOp::kAlltoAll:
      return Value<T>(call, static_cast<int>(i / c), static_cast<uint64_t>(rank) * c + i % c, rep);
    case CollOp::kSendRecv:
      return Value<T>(call, (rank - 1 + ranks) % ranks, i, rep);
  }
  return T{};
}

template <typename T>
int64_t CountWrong(const Call& call, int rank, int ranks, int rep, const std::vector<char>& out) {
  // Only the root holds reduce's result.
  if (call.op == CollOp::kReduce && rank != call.root) return 0;
  const uint64_t n = OutputElements(call, ranks);
  const T* p = reinterpret_cast<const T*>(out.data());
  int64_t wrong = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const T want = Expected<T>(call, rank, ranks, i, rep);
    if (std::memcmp(&p[i], &want, sizeof(T)) != 0) ++wrong;
  }
  return wrong;
}

template <typename F>
auto DispatchType(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kUint8:
      return f(uint8_t{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kUint32:
      return f(uint32_t{});
    case DataType::kInt64:
      return f(int64_t{});
    case DataType::kUint64:
      return f(uint64_t{});
    case DataType::kDouble:
      return f(double{});
    default:
      return f(float{});
  }
}

}  // namespace

// --- the runner -------------------------------------------------------------

struct Runner::Impl {
  Runner& self;
  const BenchOptions& o;
  Engine& engine;
  const Fault& fault;
  MPI_Comm ctl = MPI_COMM_NULL;
  int rank = 0, ranks = 1;
  std::vector<std::string> hosts;
  double clock_offset_us = 0;  // this rank's clock minus rank 0's
  std::unique_ptr<Watchdog> watchdog;
  std::string phase;  // what the watchdog names
  // Rank 0: arrivals [collective][rank], aligned to rank 0's clock.
  std::vector<double> arrivals;
  static constexpr size_t kMaxArrivals = size_t{1} << 22;
  std::vector<char> input, output;

  Impl(Runner& r) : self(r), o(r.options_), engine(r.engine_), fault(r.fault_) {}

  void Arm(std::string what) {
    phase = std::move(what);
    watchdog->Arm(&phase);
  }
  void Disarm() { watchdog->Disarm(); }

  // Every rank learns whether any rank failed; rank 0 says which.
  Status Agree(Status local, const std::string& what) {
    int bad = local ? 0 : 1, any = 0;
    if (!local) {
      std::fprintf(stderr, "error: rank %d: %s: %s\n", rank, what.c_str(),
                   local.error().Describe().c_str());
      std::fflush(stderr);
    }
    Arm("agreeing on " + what);
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ctl);
    Disarm();
    if (!any) return Ok();
    if (!local) return local;
    return Aborted(what + " failed on another rank");
  }

  void Barrier(const std::string& what) {
    Arm(what);
    MPI_Barrier(ctl);
    Disarm();
  }

  void GatherHosts() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    std::vector<char> all(static_cast<size_t>(ranks) * MPI_MAX_PROCESSOR_NAME);
    Arm("gathering host names");
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
               0, ctl);
    Disarm();
    if (rank == 0) {
      for (int r = 0; r < ranks; ++r)
        hosts.emplace_back(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    }
  }

  // Cristian's method against rank 0, keeping the fastest round trip.
  void AlignClocks() {
    constexpr int kRounds = 16;
    std::vector<double> offsets(static_cast<size_t>(ranks), 0.0);
    Arm("aligning clocks");
    for (int r = 1; r < ranks; ++r) {
      if (rank == 0) {
        double best_rtt = 1e300, best = 0;
        for (int k = 0; k < kRounds; ++k) {
          double t1 = NowUs(), tr = 0;
          MPI_Send(&t1, 1, MPI_DOUBLE, r, 7, ctl);
          MPI_Recv(&tr, 1, MPI_DOUBLE, r, 7, ctl, MPI_STATUS_IGNORE);
          const double t2 = NowUs();
          if (t2 - t1 < best_rtt) {
            best_rtt = t2 - t1;
            best = tr - (t1 + t2) / 2;
          }
        }
        offsets[static_cast<size_t>(r)] = best;
      } else if (rank == r) {
        for (int k = 0; k < kRounds; ++k) {
          double t1 = 0;
          MPI_Recv(&t1, 1, MPI_DOUBLE, 0, 7, ctl, MPI_STATUS_IGNORE);
          const double tr = NowUs();
          MPI_Send(&tr, 1, MPI_DOUBLE, 0, 7, ctl);
        }
      }
    }
    MPI_Scatter(offsets.data(), 1, MPI_DOUBLE, &clock_offset_us, 1, MPI_DOUBLE, 0, ctl);
    Disarm();
  }

  std::string Describe(const Call& call, uint64_t bytes) const {
    return fmt::format("{} of {} bytes ({})", OpName(call.op), bytes,
                       call.in_place ? "in-place" : "out-of-place");
  }

  Status Upload(const Call& call, int rep) {
    DispatchType(call.type, [&](auto t) {
      FillInput<decltype(t)>(call, rank, ranks, rep, input);
      return 0;
    });
    return engine.Upload(call, input.data(), input.size());
  }

  Result<int64_t> Verify(const Call& call, int rep, uint64_t bytes) {
    ANXIN_TRY(Upload(call, rep));
    Arm("verifying " + Describe(call, bytes));
    Status st = engine.Run(call);
    Disarm();
    ANXIN_TRY(st);
    output.resize(OutputElements(call, ranks) * TypeSize(call.type));
    ANXIN_TRY(engine.Download(call, output.data(), output.size()));
    if (fault.kind == Fault::Kind::kCorrupt && fault.rank == rank) {
      const size_t elt = TypeSize(call.type);
      for (size_t i = 0; i < static_cast<size_t>(fault.value) && (i + 1) * elt <= output.size();
           ++i)
        output[i * elt] = static_cast<char>(output[i * elt] ^ 0x5A);
    }
    return DispatchType(
        call.type, [&](auto t) { return CountWrong<decltype(t)>(call, rank, ranks, rep, output); });
  }

  // One size, one mode: warm-up, timed loop, verification; rank 0 gets the
  // sample and (for soak) the per-iteration means.
  struct Measured {
    Sample sample;
    std::vector<double> iteration_us;  // rank 0: mean across ranks per iteration
  };
  Result<Measured> Measure(const Call& call, uint64_t bytes) {
    ANXIN_TRY(Upload(call, 0));
    const std::string what = Describe(call, bytes);
    Barrier("waiting for the ranks before " + what);
    Arm("warming up " + what);
    for (int w = 0; w < o.warmup; ++w) {
      Status st = engine.Run(call);
      if (!st) {
        Disarm();
        return std::unexpected(st.error());
      }
    }
    Disarm();
    Barrier("waiting for the ranks before timing " + what);
    IterationTimes times;
    phase = what;
    ANXIN_TRY(TimedIterations(engine, call, o.iters, rank, fault, *watchdog, &phase, times));
    if (self.on_collective) {
      for (double d : times.duration_us)
        self.on_collective({call.op, bytes, call.in_place, d, ranks});
    }
    int64_t wrong = 0;
    for (int c = 0; c < o.check; ++c) {
      ANXIN_ASSIGN_OR_RETURN(int64_t w, Verify(call, c + 1, bytes));
      wrong += w;
    }
    // Gather to rank 0.
    const size_t n = static_cast<size_t>(o.iters);
    std::vector<double> starts_all, durs_all;
    if (rank == 0) {
      starts_all.resize(n * static_cast<size_t>(ranks));
      durs_all.resize(n * static_cast<size_t>(ranks));
    }
    for (double& s : times.start_us) s -= clock_offset_us;
    int64_t wrong_total = 0;
    Arm("collecting the results of " + what);
    MPI_Gather(times.start_us.data(), o.iters, MPI_DOUBLE, starts_all.data(), o.iters, MPI_DOUBLE,
               0, ctl);
    MPI_Gather(times.duration_us.data(), o.iters, MPI_DOUBLE, durs_all.data(), o.iters, MPI_DOUBLE,
               0, ctl);
    MPI_Reduce(&wrong, &wrong_total, 1, MPI_INT64_T, MPI_SUM, 0, ctl);
    Disarm();
    Measured m;
    if (rank != 0) return m;
    m.iteration_us.resize(n);
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int r = 0; r < ranks; ++r) sum += durs_all[static_cast<size_t>(r) * n + i];
      m.iteration_us[i] = sum / ranks;
    }
    for (size_t i = 0; i < n && arrivals.size() + static_cast<size_t>(ranks) <= kMaxArrivals; ++i) {
      for (int r = 0; r < ranks; ++r)
        arrivals.push_back(starts_all[static_cast<size_t>(r) * n + i]);
    }
    Sample& s = m.sample;
    s.time_us = Mean(m.iteration_us);
    s.algbw = AlgBandwidth(bytes, s.time_us);
    s.busbw = s.algbw * BusBandwidthFactor(call.op, ranks);
    s.wrong = o.check > 0 ? wrong_total : -1;
    s.p50_us = Percentile(m.iteration_us, 50);
    s.p99_us = Percentile(m.iteration_us, 99);
    s.max_us = Percentile(m.iteration_us, 100);
    return m;
  }

  CommRun NewRun() const {
    CommRun run;
    run.source = "anxin";
    run.engine = o.engine;
    run.op = o.op;
    run.type = o.type;
    if (OpReduces(o.op)) run.redop = o.redop;
    run.root = OpHasRoot(o.op) ? o.root : -1;
    run.ranks = ranks;
    run.hosts = hosts;
    run.algo = o.algo;
    run.algo_effective = engine.AlgorithmInEffect(o.op);
    run.engine_version = engine.Describe();
    run.iters = o.iters;
    run.warmup = o.warmup;
    run.checked = o.check > 0;
    run.command = o.command;
    return run;
  }

  struct Plan {
    uint64_t bytes;
    Call call;  // in_place false; flipped per mode
  };
  std::vector<Plan> PlanSizes() const {
    std::vector<Plan> plans;
    for (uint64_t size : SweepSizes(o)) {
      Call call{o.op, o.type, o.redop, o.root, false, CallCount(o.op, size, o.type, ranks)};
      if (call.count == 0) continue;
      plans.push_back({RowBytes(o.op, call.count, o.type, ranks), call});
    }
    return plans;
  }

  Status ReserveFor(const std::vector<Plan>& plans) {
    uint64_t in = 0, out = 0;
    for (const Plan& p : plans) {
      in = std::max(in, InputElements(p.call, ranks) * TypeSize(p.call.type));
      out = std::max(out, OutputElements(p.call, ranks) * TypeSize(p.call.type));
    }
    return engine.Reserve(in, out);
  }

  // Which modes run: a mode the engine cannot do in place is left out.
  std::vector<bool> Modes(const Call& call) const {
    std::vector<bool> modes;
    if (o.out_of_place) modes.push_back(false);
    if (o.in_place) {
      Call c = call;
      c.in_place = true;
      if (engine.Supports(c)) modes.push_back(true);
    }
    return modes;
  }

  // One pass over the sizes; rank 0 fills rows and per-size iteration means.
  Status Sweep(std::vector<Row>& rows, std::vector<std::vector<double>>* pass_iterations) {
    const auto plans = PlanSizes();
    if (rows.empty()) {
      for (const Plan& p : plans) rows.push_back(Row{p.bytes, p.call.count, {}, {}});
    }
    for (size_t i = 0; i < plans.size(); ++i) {
      for (bool in_place : Modes(plans[i].call)) {
        Call call = plans[i].call;
        call.in_place = in_place;
        ANXIN_ASSIGN_OR_RETURN(Measured m, Measure(call, plans[i].bytes));
        if (rank != 0) continue;
        auto& slot = in_place ? rows[i].in_place : rows[i].out_of_place;
        slot = m.sample;
        if (pass_iterations) {
          auto& pool = (*pass_iterations)[i * 2 + (in_place ? 1 : 0)];
          pool.insert(pool.end(), m.iteration_us.begin(), m.iteration_us.end());
        }
      }
    }
    return Ok();
  }

  Result<CommRun> RunSweep() {
    CommRun run = NewRun();
    const auto plans = PlanSizes();
    if (plans.empty()) {
      return InvalidArgument(fmt::format(
          "no size from -b {} to -e {} holds one {} element per rank for {} on {} ranks",
          o.min_bytes, o.max_bytes, TypeName(o.type), OpName(o.op), ranks));
    }
    ANXIN_TRY(Agree(ReserveFor(plans), "allocating buffers"));
    if (o.duration_s <= 0) {
      ANXIN_TRY(Sweep(run.rows, nullptr));
    } else {
      ANXIN_TRY(Soak(run, plans));
    }
    if (rank == 0) {
      UpdateAverageBusBandwidth(run);
      run.skew = AnalyzeSkew(arrivals, ranks, hosts, o.skew_options);
    }
    return run;
  }

  // Repeats the sweep until the duration has passed; rank 0 decides when to
  // stop so every rank runs the same number of passes.
  Status Soak(CommRun& run, const std::vector<Plan>& plans) {
    const double start = NowUs();
    SoakReport soak;
    soak.sizes.resize(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) soak.sizes[i].bytes = plans[i].bytes;
    // All iteration means per size and mode, sampled down past a cap.
    constexpr size_t kCap = 200000;
    std::vector<std::vector<double>> pools(plans.size() * 2);
    std::vector<uint64_t> seen(plans.size() * 2, 0);
    std::mt19937_64 rng(12345);
    std::vector<Sample> sum_oop(plans.size()), sum_ip(plans.size());
    double last_progress = 0;
    int go = 1;
    while (go) {
      std::vector<Row> rows;
      std::vector<std::vector<double>> pass(plans.size() * 2);
      ANXIN_TRY(Sweep(rows, &pass));
      ++soak.passes;
      if (rank == 0) {
        for (size_t k = 0; k < pass.size(); ++k) {
          for (double v : pass[k]) {
            ++seen[k];
            if (pools[k].size() < kCap) {
              pools[k].push_back(v);
            } else if (uint64_t j = rng() % seen[k]; j < kCap) {
              pools[k][j] = v;
            }
          }
        }
        for (size_t i = 0; i < plans.size(); ++i) {
          const auto& primary = rows[i].out_of_place ? rows[i].out_of_place : rows[i].in_place;
          if (primary) soak.sizes[i].pass_us.push_back(primary->time_us);
          for (auto [slot, acc] : {std::pair{&rows[i].out_of_place, &sum_oop[i]},
                                   std::pair{&rows[i].in_place, &sum_ip[i]}}) {
            if (!*slot) continue;
            acc->time_us += (*slot)->time_us;
            acc->wrong = std::max<int64_t>(acc->wrong, 0) + std::max<int64_t>((*slot)->wrong, 0);
            if ((*slot)->wrong < 0) acc->wrong = -1;
          }
        }
        const double elapsed = (NowUs() - start) / 1e6;
        go = elapsed < o.duration_s ? 1 : 0;
        if (o.progress && (elapsed - last_progress >= 1.0 || !go)) {
          last_progress = elapsed;
          const SoakSize& big = soak.sizes.back();
          const double first = big.pass_us.front(), now = big.pass_us.back();
          std::fprintf(stderr,
                       "soak: %.1f of %.1f s, pass %d: %s %s %.1f us (first pass %.1f us, "
                       "%+.1f%%), p99 so far %.1f us\n",
                       elapsed, o.duration_s, soak.passes,
                       FormatBytes(big.bytes, ByteUnits::kExact).c_str(),
                       std::string(OpName(o.op)).c_str(), now, first,
                       first > 0 ? (now - first) / first * 100 : 0.0,
                       Percentile(pools[(plans.size() - 1) * 2], 99));
          std::fflush(stderr);
        }
      }
      Arm("agreeing whether the soak goes on");
      MPI_Bcast(&go, 1, MPI_INT, 0, ctl);
      Disarm();
    }
    if (rank != 0) return Ok();
    soak.seconds = (NowUs() - start) / 1e6;
    for (size_t i = 0; i < plans.size(); ++i) {
      Row row{plans[i].bytes, plans[i].call.count, {}, {}};
      for (int mode = 0; mode < 2; ++mode) {
        const auto& pool = pools[i * 2 + static_cast<size_t>(mode)];
        if (pool.empty()) continue;
        Sample s;
        s.time_us = (mode == 0 ? sum_oop[i] : sum_ip[i]).time_us / soak.passes;
        s.algbw = AlgBandwidth(row.bytes, s.time_us);
        s.busbw = s.algbw * BusBandwidthFactor(o.op, ranks);
        s.wrong = o.check > 0 ? (mode == 0 ? sum_oop[i] : sum_ip[i]).wrong : -1;
        s.p50_us = Percentile(pool, 50);
        s.p99_us = Percentile(pool, 99);
        s.max_us = Percentile(pool, 100);
        (mode == 0 ? row.out_of_place : row.in_place) = s;
      }
      run.rows.push_back(row);
      SoakSize& size = soak.sizes[i];
      const auto& pool = pools[i * 2 + (row.out_of_place ? 0 : 1)];
      size.p50_us = Percentile(pool, 50);
      size.p99_us = Percentile(pool, 99);
      size.max_us = Percentile(pool, 100);
      SummarizeSoak(size);
    }
    run.soak = std::move(soak);
    return Ok();
  }

  // Pairwise point to point: in each round every rank is in at most one pair.
  Result<CommRun> RunMatrix() {
    CommRun run = NewRun();
    run.op.reset();
    run.redop.reset();
    run.root = -1;
    run.checked = false;
    ANXIN_TRY(Agree(engine.Reserve(std::max(o.matrix_bytes, o.matrix_lat_bytes),
                                   std::max(o.matrix_bytes, o.matrix_lat_bytes)),
                    "allocating buffers"));
    const auto rounds = PairRounds(ranks);
    const size_t n = static_cast<size_t>(ranks);
    std::vector<double> my_bw(n, 0.0), my_lat(n, 0.0);
    int64_t calls = 0;
    // Payload sends carry the delay fault; the one-byte acknowledgements that
    // end a bandwidth clock do not, so the slow rank's sends are the slow
    // direction and its peer's direction stays fast.
    auto send = [&](int peer, uint64_t bytes) {
      if (fault.kind == Fault::Kind::kDelay) ApplyFault(fault, rank, calls);
      return engine.Send(peer, bytes);
    };
    auto ack = [&](int peer) { return engine.Send(peer, 1); };
    for (size_t k = 0; k < rounds.size(); ++k) {
      Barrier(fmt::format("waiting for the ranks before matrix round {}", k + 1));
      for (auto [a, b] : rounds[k]) {
        if (rank != a && rank != b) continue;
        const int peer = rank == a ? b : a;
        const bool first = rank == a;
        Arm(fmt::format("matrix round {}: ranks {} and {}", k + 1, a, b));
        // Latency: ping-pong, the lower rank measures.
        const int lat_iters = std::max(o.matrix_iters, 10);
        double best = 1e300;
        std::vector<double> rtts;
        for (int it = -2; it < lat_iters; ++it) {
          if (first) {
            const double t0 = NowUs();
            ANXIN_TRY(send(peer, o.matrix_lat_bytes));
            ANXIN_TRY(engine.Recv(peer, o.matrix_lat_bytes));
            if (it >= 0) rtts.push_back(NowUs() - t0);
          } else {
            ANXIN_TRY(engine.Recv(peer, o.matrix_lat_bytes));
            ANXIN_TRY(send(peer, o.matrix_lat_bytes));
          }
        }
        if (first) {
          best = Percentile(rtts, 50) / 2;
          my_lat[static_cast<size_t>(peer)] = best;
        }
        // Bandwidth, each direction in turn: a stream of messages, then a
        // one-byte acknowledgement that ends the clock.
        for (int dir = 0; dir < 2; ++dir) {
          const bool sender = (dir == 0) == first;
          if (sender) {
            ANXIN_TRY(send(peer, o.matrix_bytes));  // warm-up
            ANXIN_TRY(engine.Recv(peer, 1));
            const double t0 = NowUs();
            for (int it = 0; it < o.matrix_iters; ++it) ANXIN_TRY(send(peer, o.matrix_bytes));
            ANXIN_TRY(engine.Recv(peer, 1));
            const double us = NowUs() - t0;
            my_bw[static_cast<size_t>(peer)] =
                AlgBandwidth(o.matrix_bytes * static_cast<uint64_t>(o.matrix_iters), us);
          } else {
            ANXIN_TRY(engine.Recv(peer, o.matrix_bytes));
            ANXIN_TRY(ack(peer));
            for (int it = 0; it < o.matrix_iters; ++it)
              ANXIN_TRY(engine.Recv(peer, o.matrix_bytes));
            ANXIN_TRY(ack(peer));
          }
        }
        Disarm();
      }
    }
    std::vector<double> bw_all, lat_all;
    if (rank == 0) {
      bw_all.resize(n * n);
      lat_all.resize(n * n);
    }
    Arm("collecting the matrix");
    MPI_Gather(my_bw.data(), ranks, MPI_DOUBLE, bw_all.data(), ranks, MPI_DOUBLE, 0, ctl);
    MPI_Gather(my_lat.data(), ranks, MPI_DOUBLE, lat_all.data(), ranks, MPI_DOUBLE, 0, ctl);
    Disarm();
    if (rank == 0) {
      MatrixReport m;
      m.ranks = ranks;
      m.bytes = o.matrix_bytes;
      m.lat_bytes = o.matrix_lat_bytes;
      m.rounds = static_cast<int>(rounds.size());
      m.bw_gbs = bw_all;
      // The lower rank of each pair measured the latency: mirror it.
      m.lat_us.assign(n * n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
          m.lat_us[i * n + j] = m.lat_us[j * n + i] = lat_all[i * n + j];
        }
      }
      AnalyzeMatrix(m, o.matrix_options);
      run.matrix = std::move(m);
    }
    return run;
  }

  int Report(const CommRun& run) {
    int status = 0;
    if (TotalWrong(run) > 0) status = 1;
    if (run.skew && run.skew->slow_rank) status = 1;
    if (run.matrix && !run.matrix->slow_ranks.empty()) status = 1;
    const std::string text = o.json ? ToJson(run).dump(2) + "\n" : FormatRun(run);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (!o.json_file.empty()) {
      if (auto st = WriteFileAtomic(o.json_file, ToJson(run).dump(2) + "\n"); !st) {
        std::fprintf(stderr, "error: %s\n", st.error().Describe().c_str());
        status = 3;
      }
    }
    if (!o.csv_file.empty()) {
      if (auto st = WriteFileAtomic(o.csv_file, FormatCsv(run)); !st) {
        std::fprintf(stderr, "error: %s\n", st.error().Describe().c_str());
        status = 3;
      }
    }
    return status;
  }

  int Main() {
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    MPI_Comm_rank(ctl, &rank);
    MPI_Comm_size(ctl, &ranks);
    watchdog = std::make_unique<Watchdog>(rank, o.op_timeout_s);
    int status = 0;
    auto fail = [&](const Error& e) {
      // Agree() already printed each failing rank's line.
      return ExitCodeFor(e);
    };
    GatherHosts();
    AlignClocks();
    MPI_Comm local;
    int local_rank = 0;
    MPI_Comm_split_type(ctl, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    Status checks = Ok();
    if (OpHasRoot(o.op) && o.root >= ranks) {
      checks = InvalidArgument(fmt::format("-r {}: there are only {} ranks", o.root, ranks));
    } else if (!o.matrix) {
      checks = engine.Supports(Call{o.op, o.type, o.redop, o.root, false, 1});
    }
    if (auto st = Agree(checks, "checking the options"); !st) return fail(st.error());
    if (auto st =
            Agree(engine.Init(rank, ranks, local_rank), "starting the " + o.engine + " engine");
        !st) {
      return fail(st.error());
    }
    Result<CommRun> run = o.matrix ? RunMatrix() : RunSweep();
    if (auto st = Agree(run ? Ok() : Status(std::unexpected(run.error())), "the run"); !st) {
      engine.Finalize();
      return fail(st.error());
    }
    if (rank == 0) status = Report(*run);
    Arm("finishing");
    MPI_Bcast(&status, 1, MPI_INT, 0, ctl);
    Disarm();
    engine.Finalize();
    MPI_Comm_free(&ctl);
    return status;
  }
};

Runner::Runner(BenchOptions options, Engine& engine, Fault fault)
    : options_(std::move(options)), engine_(engine), fault_(fault) {}

int Runner::Main() {
  Impl impl(*this);
  return impl.Main();
}

}  // namespace anxin::comm
