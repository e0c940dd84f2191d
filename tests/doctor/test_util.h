// Shared by the doctor end-to-end tests: the captured host tree and short
// names for base/testing.h's helpers, which do the work.
#ifndef ANXIN_TESTS_DOCTOR_TEST_UTIL_H_
#define ANXIN_TESTS_DOCTOR_TEST_UTIL_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin::doctor_test {

inline const std::string kAnxin = ::anxin::testing::AnxinBinary();
inline const std::string kTree = ::anxin::testing::FixturePath("doctor/host_a");

// `anxin args...` with "NAME=VALUE" entries added to the environment.
inline CommandOutput Anxin(std::vector<std::string> args, std::vector<std::string> env = {}) {
  return ::anxin::testing::RunAnxin(std::move(args),
                                    {.env = std::move(env), .timeout = std::chrono::seconds(60)});
}

// base's TempDir, with a copy of the captured host tree on demand.
class TempDir : public ::anxin::testing::TempDir {
 public:
  TempDir() : ::anxin::testing::TempDir("anxin-doctor-e2e") {}
  std::string CopyTree(const std::string& name) const {
    return ::anxin::testing::TempDir::CopyTree(kTree, name);
  }
};

inline void WriteFile(const std::string& path, const std::string& text) {
  ::anxin::testing::WriteTextFile(path, text);
}
inline std::string ReadFile(const std::string& path) {
  return ::anxin::testing::ReadTextFile(path);
}

}  // namespace anxin::doctor_test

#endif  // ANXIN_TESTS_DOCTOR_TEST_UTIL_H_
