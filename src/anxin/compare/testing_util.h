// Test helpers for the compare module: a scratch directory and running
// Debian's NumPy (/usr/bin/python3) with an argument vector.
//
//   ScratchDir dir;
//   ASSERT_EQ(RunPython({ScriptPath("metric_cases.py"), dir.path()}), 0);
#ifndef ANXIN_COMPARE_TESTING_UTIL_H_
#define ANXIN_COMPARE_TESTING_UTIL_H_

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace anxin::compare::testing {

// A fresh directory under $TMPDIR, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "anxin-compare-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string FixturePath(const std::string& name) {
  return std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/compare/" + name;
}

// Runs argv[0] with argv (no shell) and returns its exit status (-1 if it did
// not exit normally).
inline int RunArgv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// /usr/bin/python3 (Debian's, with NumPy) running args.
inline int RunPython(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/python3");
  return RunArgv(args);
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace anxin::compare::testing

#endif  // ANXIN_COMPARE_TESTING_UTIL_H_
