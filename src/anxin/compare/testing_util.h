// Test helpers for the compare module: a scratch directory and running
// Debian's NumPy (/usr/bin/python3) with an argument vector.
//
//   #include <gtest/gtest.h>
//
//   testing::ScratchDir dir;
//   EXPECT_EQ(testing::RunPython({testing::FixturePath("metric_cases.py"), dir.path()}), 0);
#ifndef ANXIN_COMPARE_TESTING_UTIL_H_
#define ANXIN_COMPARE_TESTING_UTIL_H_

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "anxin/base/subprocess.h"

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

// Runs argv (no shell) with a deadline and returns its exit status (-1 if it
// could not start or did not exit normally); its stderr is echoed on failure.
inline int RunArgv(const std::vector<std::string>& args) {
  auto r = ::anxin::RunCommand(args, {.timeout = std::chrono::seconds(120)});
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().ToString().c_str());
    return -1;
  }
  if (!r->ok())
    std::fprintf(stderr, "%s: %s\n%s", args[0].c_str(), r->Describe().c_str(),
                 r->stderr_text.c_str());
  return r->exit_code;
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
