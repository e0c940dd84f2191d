// Shared by the doctor end-to-end tests: run the anxin program, copy the
// captured host tree.
#ifndef ANXIN_TESTS_DOCTOR_TEST_UTIL_H_
#define ANXIN_TESTS_DOCTOR_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "anxin/base/subprocess.h"

namespace anxin::doctor_test {

inline const std::string kAnxin = ANXIN_BINARY_DIR "/anxin";
inline const std::string kTree = ANXIN_SOURCE_DIR "/tests/fixtures/doctor/host_a";

inline CommandOutput Anxin(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), kAnxin);
  RunOptions o;
  o.timeout = std::chrono::seconds(60);
  o.env = std::move(env);
  auto r = RunCommand(std::move(args), std::move(o));
  if (!r) {
    CommandOutput failed;
    failed.stderr_text = r.error().ToString();
    return failed;
  }
  return *r;
}

// A temporary directory removed at scope exit (tmpfs when there is one).
class TempDir {
 public:
  TempDir() {
    namespace fs = std::filesystem;
    fs::path base =
        ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "anxin-doctor-e2e-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  // A copy of the captured host tree under this directory.
  std::string CopyTree(const std::string& name) const {
    std::string to = path_ + "/" + name;
    std::filesystem::copy(
        kTree, to,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    return to;
  }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace anxin::doctor_test

#endif  // ANXIN_TESTS_DOCTOR_TEST_UTIL_H_
