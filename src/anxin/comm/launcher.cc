#include "anxin/comm/launcher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "anxin/base/subprocess.h"

namespace anxin::comm {
namespace {

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::optional<std::string> OnPath(const std::string& name, const Getenv& getenv) {
  const char* path = getenv("PATH");
  std::string_view p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string_view::npos) end = p.size();
    std::string dir(p.substr(start, end - start));
    if (!dir.empty() && Executable(dir + "/" + name)) return dir + "/" + name;
    start = end + 1;
  }
  return std::nullopt;
}

std::string SelfDir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return self.parent_path().string();
}

}  // namespace

bool UnderMpiLauncher(const Getenv& getenv) {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"}) {
    if (getenv(name) != nullptr) return true;
  }
  return false;
}

Result<std::string> FindWorker(std::string_view engine, const Getenv& getenv) {
  const bool nccl = engine == "nccl";
  const std::string name = nccl ? "anxin-comm-worker-nccl" : "anxin-comm-worker";
  const char* var = nccl ? "ANXIN_COMM_WORKER_NCCL" : "ANXIN_COMM_WORKER";
  if (const char* env = getenv(var); env && *env) {
    if (!Executable(env)) {
      return Unavailable(fmt::format("{}={}: not an executable file", var, env));
    }
    return std::string(env);
  }
  if (std::string dir = SelfDir(); !dir.empty() && Executable(dir + "/" + name)) {
    return dir + "/" + name;
  }
  if (auto found = OnPath(name, getenv)) return *found;
  if (nccl) {
    return Unavailable(
        "the nccl engine is not built: anxin-comm-worker-nccl is built when CUDA and NCCL are "
        "found at build time (nccl.h and libnccl under /usr/local/cuda or CUDAToolkit_ROOT); "
        "rebuild there, or set ANXIN_COMM_WORKER_NCCL");
  }
  return Unavailable(
      "anxin-comm-worker not found next to anxin or on PATH: build it (it needs Open MPI, "
      "Debian packages openmpi-bin and libopenmpi-dev) or set ANXIN_COMM_WORKER");
}

Result<std::string> FindMpirun(const Getenv& getenv) {
  if (const char* env = getenv("ANXIN_MPIRUN"); env && *env) {
    if (!Executable(env)) return Unavailable(fmt::format("ANXIN_MPIRUN={}: not executable", env));
    return std::string(env);
  }
  if (auto found = OnPath("mpirun", getenv)) return *found;
  return Unavailable(
      "mpirun not found on PATH: install Open MPI (Debian: apt-get install openmpi-bin), set "
      "ANXIN_MPIRUN, or start anxin under your own launcher (mpirun -np N anxin bench comm ...)");
}

LaunchPlan BuildLaunch(const LaunchRequest& r) {
  LaunchPlan plan;
  plan.argv = {r.mpirun, "-np", std::to_string(r.ranks)};
  if (!r.hosts.empty()) {
    plan.argv.push_back("-H");
    plan.argv.push_back(r.hosts);
  } else if (r.ranks > r.hardware_threads) {
    // More ranks than this machine has threads: Open MPI refuses without it.
    plan.argv.push_back("--oversubscribe");
  }
  for (const std::string& kv : r.env) {
    const std::string name = kv.substr(0, kv.find('='));
    // OMPI_MCA_* are read by mpirun and passed on; the rest need -x.
    if (!name.starts_with("OMPI_")) {
      plan.argv.push_back("-x");
      plan.argv.push_back(name);
    }
    plan.env.push_back(kv);
  }
  for (const std::string& a : r.mpirun_args) plan.argv.push_back(a);
  plan.argv.push_back(r.worker);
  plan.argv.push_back("--spec");
  plan.argv.push_back(r.spec);
  if (r.root) {
    plan.env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    plan.env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  return plan;
}

std::string ExplainFailure(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    auto at = l.find("error: ");
    if (at != std::string::npos) return l.substr(at + 7);
  }
  static constexpr std::string_view kHints[] = {"exited on signal",
                                                "noticed that process rank",
                                                "returned a non-zero exit code",
                                                "The first process to do so was",
                                                "was killed",
                                                "not found",
                                                "could not",
                                                "unable to",
                                                "ORTE",
                                                "There are not enough slots"};
  for (std::string_view hint : kHints) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find(hint) == std::string::npos) continue;
      // mpirun wraps its sentences over several lines; take the paragraph.
      size_t start = i;
      while (start > 0 && i - start < 4 && !lines[start - 1].empty() &&
             !lines[start - 1].starts_with("---")) {
        --start;
      }
      std::string out = lines[start];
      for (size_t j = start + 1; j < lines.size() && j < start + 6; ++j) {
        if (lines[j].empty() || lines[j].starts_with("---")) break;
        out += " " + lines[j];
      }
      size_t first = out.find_first_not_of(' ');
      return out.substr(first == std::string::npos ? 0 : first);
    }
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (!it->empty() && !it->starts_with("---")) return *it;
  }
  return "the job ended without a result and without a message";
}

Result<LaunchResult> RunLaunch(const LaunchPlan& plan, std::chrono::seconds timeout,
                               const std::function<void(const std::string&)>& on_stdout,
                               const std::function<void(const std::string&)>& on_progress) {
  std::mutex mu;
  std::vector<std::string> err_lines;
  std::optional<int> status;
  SubprocessOptions options;
  options.argv = plan.argv;
  options.env = plan.env;
  options.timeout = timeout;
  options.stop_grace = std::chrono::seconds(3);
  options.on_stdout = [&](const OutputLine& line) {
    if (line.text.starts_with(kStatusMarker)) {
      std::lock_guard lock(mu);
      status = std::atoi(line.text.c_str() + kStatusMarker.size());
      return;
    }
    on_stdout(line.text);
  };
  options.on_stderr = [&](const OutputLine& line) {
    if (line.text.starts_with("soak: ") || line.text.starts_with("telemetry: ")) {
      on_progress(line.text);
      return;
    }
    spdlog::debug("mpirun: {}", line.text);
    std::lock_guard lock(mu);
    if (err_lines.size() < 2000) err_lines.push_back(line.text);
  };
  spdlog::debug("starting: {}", fmt::join(plan.argv, " "));
  ANXIN_ASSIGN_OR_RETURN(auto child, Subprocess::Start(std::move(options)));
  ANXIN_ASSIGN_OR_RETURN(ExitStatus exit, child->Wait());
  std::lock_guard lock(mu);
  if (exit.timed_out) {
    return DeadlineExceeded(fmt::format(
        "mpirun did not finish within {} s and was stopped (raise --timeout, or look for a rank "
        "that hangs outside a collective)",
        timeout.count()));
  }
  if (!status) {
    return Unavailable(fmt::format("the ranks failed (mpirun {}): {}", exit.Describe(),
                                   ExplainFailure(err_lines)));
  }
  // A clean status line but a failing mpirun: a rank died after rank 0 was done.
  if (!exit.ok()) {
    return Unavailable(
        fmt::format("mpirun {} after the run: {}", exit.Describe(), ExplainFailure(err_lines)));
  }
  return LaunchResult{*status};
}

Status ExecWorker(const std::string& worker, const std::string& spec,
                  const std::vector<std::string>& env) {
  for (const std::string& kv : env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  std::vector<std::string> args = {worker, "--spec", spec};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(worker.c_str(), argv.data());
  return std::unexpected(ErrnoError(errno, "exec " + worker));
}

}  // namespace anxin::comm
