#include "anxin/doctor/process_runner.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "anxin/base/strings.h"

namespace anxin::doctor {
namespace {

// extra_dirs: appended to PATH for the lookup and the child ("" = PATH as is).
Result<CommandOutput> Run(const std::vector<std::string>& argv, double timeout_s,
                          const std::vector<std::string>& extra_dirs) {
  if (argv.empty()) return InvalidArgument("cannot run a program: empty argv");
  RunOptions options;
  options.timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(timeout_s));
  options.max_output_bytes = 16u << 20;
  std::string where = "not found on PATH";
  if (!extra_dirs.empty()) {
    const char* path = std::getenv("PATH");
    std::string joined = path != nullptr ? path : "";
    std::string dirs;
    for (const std::string& d : extra_dirs) {
      joined += (joined.empty() ? "" : ":") + d;
      dirs += (dirs.empty() ? "" : ", ") + d;
    }
    options.env.push_back("PATH=" + joined);
    where += " or in " + dirs;
  }
  auto out = RunCommand(argv, std::move(options));
  // RunCommand's kNotFound at start is the program's lookup (no cwd is set).
  if (!out && out.error().code() == ErrorCode::kNotFound &&
      argv[0].find('/') == std::string::npos) {
    return NotFound(argv[0] + " is not installed (" + where + ")");
  }
  if (!out) return std::unexpected(std::move(out).error());
  if (out->timed_out) {
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g s", timeout_s);
    return DeadlineExceeded(argv[0] + " did not finish within " + limit + " (" + out->Describe() +
                            ")");
  }
  return out;
}

}  // namespace

Result<CommandOutput> RunProcess(const std::vector<std::string>& argv, double timeout_s) {
  return Run(argv, timeout_s, {});
}

ProcessRunner ProcessRunnerAlsoIn(std::vector<std::string> extra_dirs) {
  return [dirs = std::move(extra_dirs)](const std::vector<std::string>& argv, double timeout_s) {
    return Run(argv, timeout_s, dirs);
  };
}

Result<std::string> RunTool(const ProcessRunner& run, const std::vector<std::string>& argv,
                            double timeout_s) {
  if (argv.empty()) return InvalidArgument("cannot run a program: empty argv");
  ANXIN_ASSIGN_OR_RETURN(CommandOutput out, run(argv, timeout_s));
  if (out.ok()) return std::move(out.stdout_text);
  std::string err = out.stderr_text.empty() ? out.stdout_text : out.stderr_text;
  if (err.size() > 300) err.resize(300);
  err = std::string(Trim(err));
  return Unavailable(argv[0] + " " + out.Describe() + (err.empty() ? "" : ": " + err));
}

}  // namespace anxin::doctor
