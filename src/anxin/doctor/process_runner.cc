#include "anxin/doctor/process_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"

namespace anxin::doctor {

std::string FindExecutable(const std::string& name, const std::vector<std::string>& extra_dirs) {
  auto ok = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return ok(name) ? name : "";
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    for (std::string_view d : Split(path, ':')) {
      if (!d.empty()) dirs.emplace_back(d);
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const std::string& d : dirs) {
    std::string p = d + "/" + name;
    if (ok(p)) return p;
  }
  return "";
}

Result<ProcessOutput> RunProcess(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) return InvalidArgument("RunProcess: empty argv");
  std::string exe = FindExecutable(argv[0]);
  if (exe.empty()) return NotFound(argv[0] + " is not installed (not found on PATH)");
  std::vector<std::string> full = argv;
  full[0] = exe;
  RunOptions options;
  options.timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(timeout_s));
  options.max_output_bytes = 16u << 20;
  ANXIN_ASSIGN_OR_RETURN(CommandOutput out, RunCommand(std::move(full), std::move(options)));
  if (out.timed_out) {
    return DeadlineExceeded(argv[0] + " did not finish within " + std::to_string(timeout_s) +
                            " s (" + out.Describe() + ")");
  }
  ProcessOutput r;
  r.exit_code = out.signal != 0 ? 128 + out.signal : out.exit_code;
  r.out = std::move(out.stdout_text);
  r.err = std::move(out.stderr_text);
  return r;
}

}  // namespace anxin::doctor
