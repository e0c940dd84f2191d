// `anxin bench comm`: collective stress tests over MPI, NCCL and HCCL with
// nccl-tests' columns, the pairwise link matrix, slow-rank finding, soak and
// algorithm sweeps (docs/comm.md).
//
//   anxin bench comm --np 4 [-b 8] [-e 32M] [--coll all_reduce] [--engine mpi] ...
//   mpirun -np 4 anxin bench comm ...                 (each rank becomes a worker)
//   anxin bench comm import FILE [--op NAME] [--ranks N]
//   anxin bench comm compare A B [--max-regression PCT]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/comm/format.h"
#include "anxin/comm/import.h"
#include "anxin/comm/launcher.h"
#include "anxin/comm/options.h"
#include "anxin/comm/result_diff.h"
#include "anxin/comm/stats.h"
#include "anxin/comm/sweep.h"

namespace anxin::cli::bench_comm_cmd {
namespace {

namespace comm = anxin::comm;

struct Opts {
  // Sizes and counts as text, parsed with nccl-tests' K/M/G.
  std::string min_bytes = "8", max_bytes = "32M", step_factor = "2", step_bytes = "0";
  std::string coll = "all_reduce", type = "float", redop = "sum";
  int gpus = 1;
  comm::BenchOptions bench;
  int np = 0;
  std::string hosts;
  std::vector<std::string> mpirun_args;
  double timeout_s = 0;
  bool sweep_algos = false;
  std::string algos;
  std::string matrix_bytes = "4M";
  std::string duration;
  bool progress = false, no_progress = false;
  std::string save, csv;
  // import
  CLI::App* import_cmd = nullptr;
  std::string import_file, import_op, import_type;
  int import_ranks = 0;
  // compare
  CLI::App* compare_cmd = nullptr;
  std::string file_a, file_b;
  double max_regression = -1;
};

comm::Getenv SystemGetenv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Result<comm::BenchOptions> BuildOptions(Opts& o, const GlobalOptions& g) {
  comm::BenchOptions b = o.bench;
  ANXIN_ASSIGN_OR_RETURN(b.op, comm::ParseOp(o.coll));
  auto size = [](const std::string& text, const char* flag) -> Result<uint64_t> {
    auto v = comm::ParseSize(text);
    if (!v) return InvalidArgument(std::string(flag) + ": " + v.error().message());
    return *v;
  };
  ANXIN_ASSIGN_OR_RETURN(b.min_bytes, size(o.min_bytes, "-b/--minbytes"));
  ANXIN_ASSIGN_OR_RETURN(b.max_bytes, size(o.max_bytes, "-e/--maxbytes"));
  ANXIN_ASSIGN_OR_RETURN(b.step_factor, size(o.step_factor, "-f/--stepfactor"));
  ANXIN_ASSIGN_OR_RETURN(b.step_bytes, size(o.step_bytes, "-i/--stepbytes"));
  ANXIN_ASSIGN_OR_RETURN(b.matrix_bytes, size(o.matrix_bytes, "--matrix-bytes"));
  auto type = comm::ParseType(o.type);
  if (!type) return InvalidArgument("-d/--datatype: " + type.error().message());
  b.type = *type;
  auto redop = comm::ParseRedOp(o.redop);
  if (!redop) return InvalidArgument("-o/--op: " + redop.error().message());
  b.redop = *redop;
  if (o.gpus != 1) {
    return InvalidArgument(
        "-g/--ngpus: anxin runs one device per rank; start more ranks (--np) instead");
  }
  if (!o.duration.empty()) {
    auto d = ParseSeconds(o.duration);
    if (!d) return InvalidArgument("--duration: " + d.error().message());
    b.duration_s = *d;
  }
  b.progress = !o.no_progress && (o.progress || isatty(STDERR_FILENO) == 1);
  b.json = g.json;
  b.json_file = o.save;
  b.csv_file = o.csv;
  ANXIN_TRY(comm::Validate(b));
  if (o.sweep_algos && b.matrix) {
    return InvalidArgument("--sweep-algos and --matrix do not go together");
  }
  return b;
}

std::chrono::seconds Deadline(const Opts& o, const comm::BenchOptions& b) {
  if (o.timeout_s > 0) return std::chrono::seconds(static_cast<int64_t>(o.timeout_s));
  // Generous by default: the watchdog in each rank catches stuck collectives
  // much sooner; this catches a launcher that never starts the ranks.
  return std::chrono::seconds(static_cast<int64_t>(600 + 2 * b.duration_s));
}

Result<comm::LaunchRequest> Request(const Opts& o, const comm::BenchOptions& b,
                                    const std::string& algo) {
  comm::LaunchRequest r;
  ANXIN_ASSIGN_OR_RETURN(r.mpirun, comm::FindMpirun(SystemGetenv()));
  ANXIN_ASSIGN_OR_RETURN(r.worker, comm::FindWorker(b.engine, SystemGetenv()));
  r.ranks = o.np;
  r.hosts = o.hosts;
  r.mpirun_args = o.mpirun_args;
  r.root = ::geteuid() == 0;
  r.hardware_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!algo.empty()) {
    ANXIN_ASSIGN_OR_RETURN(r.env, comm::AlgorithmEnvironment(b.engine, b.op, algo));
  }
  comm::BenchOptions spec = b;
  spec.algo = algo;
  spec.launched = true;
  r.spec = comm::ToJson(spec).dump();
  return r;
}

void PrintLine(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void PrintProgress(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

int RunLaunched(const Opts& o, const comm::BenchOptions& b) {
  auto request = Request(o, b, b.algo);
  if (!request) return ReportError(request.error());
  auto result =
      comm::RunLaunch(comm::BuildLaunch(*request), Deadline(o, b), PrintLine, PrintProgress);
  if (!result) return ReportError(result.error());
  return result->status;
}

int RunSweep(const Opts& o, const comm::BenchOptions& b) {
  comm::SweepRequest request;
  auto launch = Request(o, b, "");
  if (!launch) return ReportError(launch.error());
  request.launch = *std::move(launch);
  request.bench = b;
  request.algos = o.algos;
  request.timeout = Deadline(o, b);
  auto outcome = comm::RunSweep(request, PrintProgress);
  if (!outcome) return ReportError(outcome.error());
  const comm::SweepReport& sweep = outcome->sweep;
  const int status = outcome->status;
  const nlohmann::json j = comm::ToJson(sweep);
  if (!o.save.empty()) {
    if (auto st = WriteFileAtomic(o.save, j.dump(2) + "\n"); !st) return ReportError(st.error());
  }
  if (b.json) {
    PrintLine(j.dump(2));
  } else {
    for (const auto& run : sweep.runs) {
      std::printf("# --- algorithm %s\n%s", run.algo.c_str(), comm::FormatTable(run).c_str());
    }
    std::printf("#\n%s", comm::FormatSweep(sweep).c_str());
  }
  return status;
}

int RunBench(Opts& o, const GlobalOptions& g) {
  auto b = BuildOptions(o, g);
  if (!b) return ReportError(b.error());
  const bool under = comm::UnderMpiLauncher(SystemGetenv());
  if (o.sweep_algos) {
    if (under || o.np <= 0) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--sweep-algos starts one mpirun per algorithm: give --np N "
                               "instead of starting anxin under mpirun"));
    }
    return RunSweep(o, *b);
  }
  if (under) {
    if (o.np > 0) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--np: anxin is already a rank of an mpirun job; leave out --np "
                               "(or start anxin without mpirun)"));
    }
    std::vector<std::string> env;
    if (!b->algo.empty()) {
      auto e = comm::AlgorithmEnvironment(b->engine, b->op, b->algo);
      if (!e) return ReportError(e.error());
      env = *e;
    }
    auto worker = comm::FindWorker(b->engine, SystemGetenv());
    if (!worker) return ReportError(worker.error());
    std::fflush(stdout);
    auto st = comm::ExecWorker(*worker, comm::ToJson(*b).dump(), env);
    return ReportError(st.error());
  }
  if (o.np <= 0) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "give --np N (anxin starts mpirun with N ranks) or start anxin "
                             "under mpirun -np N"));
  }
  return RunLaunched(o, *b);
}

int RunImport(const Opts& o, const GlobalOptions& g) {
  comm::ImportOptions io;
  if (!o.import_op.empty()) {
    auto op = comm::ParseOp(o.import_op);
    if (!op) return ReportError(op.error().With("--op"));
    io.op = *op;
  }
  if (!o.import_type.empty()) {
    auto t = comm::ParseType(o.import_type);
    if (!t) return ReportError(t.error().With("--type"));
    io.type = *t;
  }
  io.ranks = o.import_ranks;
  auto text = ReadFile(o.import_file, 256u << 20);
  if (!text) return ReportError(text.error());
  auto runs = comm::ImportText(*text, o.import_file, io);
  if (!runs) return ReportError(runs.error());
  nlohmann::json all = nlohmann::json::array();
  for (const auto& run : *runs) all.push_back(comm::ToJson(run));
  const nlohmann::json out = runs->size() == 1 ? all[0] : all;
  if (!o.save.empty()) {
    if (auto st = WriteFileAtomic(o.save, out.dump(2) + "\n"); !st) return ReportError(st.error());
  }
  if (g.json) {
    PrintLine(out.dump(2));
    return kExitOk;
  }
  for (const auto& run : *runs) {
    std::printf("# imported from %s (%s)%s\n", o.import_file.c_str(), run.source.c_str(),
                run.command.empty() ? "" : (": " + run.command).c_str());
    std::printf("%s", comm::FormatRun(run).c_str());
  }
  return kExitOk;
}

int RunCompare(const Opts& o, const GlobalOptions& g) {
  auto a = comm::LoadResult(o.file_a);
  if (!a) return ReportError(a.error());
  auto b = comm::LoadResult(o.file_b);
  if (!b) return ReportError(b.error());
  comm::CompareReport report = comm::CompareRuns(*a, *b, o.file_a, o.file_b);
  if (g.json) {
    PrintLine(comm::ToJson(report).dump(2));
  } else {
    std::printf("%s", comm::FormatCompare(report).c_str());
  }
  if (report.rows.empty()) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument, "no size is in both results: nothing to compare"));
  }
  if (o.max_regression >= 0 && report.worst_bw_change_pct &&
      *report.worst_bw_change_pct < -o.max_regression) {
    std::fprintf(stderr, "bandwidth dropped %.1f%% at worst, more than --max-regression %.1f%%\n",
                 -*report.worst_bw_change_pct, o.max_regression);
    return kExitCheckFailed;
  }
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  comm::BenchOptions& b = o->bench;
  app.add_option("--coll", o->coll,
                 "collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                 "alltoall or sendrecv (default all_reduce)");
  app.add_option("--engine", b.engine, "mpi (CPU), nccl (GPU) or hccl (Ascend NPU); default mpi");
  app.add_option("-b,--minbytes", o->min_bytes, "smallest size, e.g. 8, 64K (K = 1024); default 8");
  app.add_option("-e,--maxbytes", o->max_bytes, "largest size; default 32M");
  app.add_option("-f,--stepfactor", o->step_factor, "multiply the size by this; default 2");
  app.add_option("-i,--stepbytes", o->step_bytes, "or add this many bytes (with -f 1)");
  app.add_option("-n,--iters", b.iters, "timed iterations per size; default 20")->check(AtLeast(1));
  app.add_option("-w,--warmup_iters", b.warmup, "warm-up iterations per size; default 5")
      ->check(AtLeast(0));
  app.add_option("-c,--check", b.check,
                 "verify every element of the result this many times per size (0: off); "
                 "default 1")
      ->check(AtLeast(0));
  app.add_option("-d,--datatype", o->type,
                 "int8, uint8, int32, uint32, int64, uint64, float, double; default float");
  app.add_option("-o,--op", o->redop, "reduction: sum, prod, min or max; default sum");
  app.add_option("-r,--root", b.root, "root rank of broadcast and reduce; default 0")
      ->check(AtLeast(0));
  app.add_option("-g,--ngpus", o->gpus, "devices per rank (always 1: one device per rank)")
      ->check(AtLeast(1));
  app.add_option("--np", o->np, "start mpirun with this many ranks")->check(AtLeast(1));
  app.add_option("--hosts", o->hosts, "hosts for mpirun -H, e.g. node1:8,node2:8");
  app.add_option("--mpirun-arg", o->mpirun_args,
                 "one more argument for mpirun (repeat), e.g. --mpirun-arg=--mca "
                 "--mpirun-arg=btl_tcp_if_include --mpirun-arg=eth0");
  app.add_option("--timeout", o->timeout_s,
                 "stop mpirun after this many seconds (default 600 + twice --duration)")
      ->check(Above(0));
  app.add_option("--op-timeout", b.op_timeout_s,
                 "a collective that takes longer than this (s) ends the run as stuck; "
                 "default 120")
      ->check(Above(0));
  app.add_option("--algo", b.algo,
                 "algorithm for the run: Open MPI's tuned names (ring, recursive_doubling, ...), "
                 "NCCL_ALGO or HCCL_ALGO values");
  app.add_flag("--sweep-algos", o->sweep_algos,
               "run once per algorithm and print the sizes where the fastest changes");
  app.add_option("--algos", o->algos, "comma list for --sweep-algos (default per engine)");
  app.add_flag("--matrix", b.matrix,
               "pairwise point-to-point bandwidth and latency between every pair of ranks");
  app.add_option("--matrix-bytes", o->matrix_bytes, "message size of the matrix; default 4M");
  app.add_option("--matrix-iters", b.matrix_iters, "messages per pair and direction; default 20")
      ->check(AtLeast(1));
  app.add_option("--duration", o->duration,
                 "soak: repeat the sweep for this long (30s, 10m, 2h) and report drift");
  app.add_option("--slow-us", b.skew_options.min_late_us,
                 "name a rank slow when its median lateness is at least this (us); "
                 "default 100")
      ->check(AtLeast(0));
  app.add_flag("--progress", o->progress, "soak progress on stderr (default: when a terminal)");
  app.add_flag("--no-progress", o->no_progress, "no progress lines");
  app.add_option("--save", o->save, "also write the result as JSON to this file");
  app.add_option("--csv", o->csv, "also write the result as CSV to this file");

  o->import_cmd =
      app.add_subcommand("import", "read nccl-tests or hccl_test output into anxin's model");
  o->import_cmd->add_option("FILE", o->import_file, "the saved output")->required();
  o->import_cmd->add_option("--op", o->import_op,
                            "the collective, when the output does not name it");
  o->import_cmd
      ->add_option("--ranks", o->import_ranks,
                   "rank count (hccl_test prints none; needed for its busbw)")
      ->check(AtLeast(1));
  o->import_cmd->add_option("--type", o->import_type,
                            "hccl_test's -d type (default float), for the element count");
  o->import_cmd->add_option("--save", o->save, "also write the JSON to this file");

  o->compare_cmd = app.add_subcommand("compare", "before/after: per size, the change in percent");
  o->compare_cmd->add_option("A", o->file_a, "before: anxin JSON, nccl-tests or hccl_test output")
      ->required();
  o->compare_cmd->add_option("B", o->file_b, "after, of the same kinds")->required();
  o->compare_cmd
      ->add_option("--max-regression", o->max_regression,
                   "exit 1 when the bandwidth of any size drops more than this (%)")
      ->check(InRange(0, 100));

  return [o](const GlobalOptions& g) -> int {
    if (o->import_cmd->parsed()) return RunImport(*o, g);
    if (o->compare_cmd->parsed()) return RunCompare(*o, g);
    return RunBench(*o, g);
  };
}

ANXIN_REGISTER_SUBCOMMAND(bench, comm,
                          "collective stress test (MPI, NCCL, HCCL): nccl-tests columns, link "
                          "matrix, slow ranks, soak",
                          Setup);

}  // namespace
}  // namespace anxin::cli::bench_comm_cmd
