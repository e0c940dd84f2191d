// Test helpers shared by every module's unit and integration tests: gtest
// matchers for Result and Status, a scratch directory, paths into the source
// tree, and running the built `anxin` program the way a user does.
//
//   using ::anxin::testing::HasCode;
//   using ::anxin::testing::IsOk;
//   EXPECT_THAT(RunCommand({"true"}), IsOk());
//   EXPECT_THAT(RunCommand({"/nonexistent/tool"}), HasCode(ErrorCode::kNotFound));
//   EXPECT_THAT(RunCommand({"/nonexistent/tool"}),
//               HasCode(ErrorCode::kNotFound, ::testing::HasSubstr("/nonexistent/tool")));
//
//   using namespace ::anxin::testing;
//   TempDir dir;                                   // removed at scope exit
//   std::string cfg = dir.Write("g.yaml", "log:\n  level: debug\n");
//   CommandOutput out = RunAnxin({"--config", cfg, "config", "--json"});
//   EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
//   std::string npu_smi = ReadTextFile(FixturePath("ascend/npu-smi-info-1x910B4-idle.txt"));
//
//   bool ready = true;                             // set by the code under test
//   EXPECT_TRUE(WaitFor([&] { return ready; }, std::chrono::seconds(10)));
//
// Paths come from the ANXIN_SOURCE_DIR and ANXIN_BINARY_DIR definitions that
// anxin_test() (cmake/AnxinHelpers.cmake) gives every test executable; tests
// never read anything outside the repository and the build tree.
//
// Thread safety: TempDir objects are independent; RunAnxin may be called from
// several threads at once.
#ifndef ANXIN_BASE_TESTING_H_
#define ANXIN_BASE_TESTING_H_

#include <gmock/gmock.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"

namespace anxin::testing {

MATCHER(IsOk, "is ok") {
  if (arg.has_value()) return true;
  *result_listener << "error: " << arg.error().ToString();
  return false;
}

MATCHER_P(HasCode, code,
          std::string("is an error with code ") + std::string(::anxin::ErrorCodeName(code))) {
  if (arg.has_value()) {
    *result_listener << "is ok";
    return false;
  }
  *result_listener << "error: " << arg.error().ToString();
  return arg.error().code() == code;
}

MATCHER_P2(HasCode, code, message_matcher,
           std::string("is an error with code ") + std::string(::anxin::ErrorCodeName(code))) {
  if (arg.has_value()) {
    *result_listener << "is ok";
    return false;
  }
  *result_listener << "error: " << arg.error().ToString();
  return arg.error().code() == code &&
         ::testing::ExplainMatchResult(message_matcher, arg.error().Describe(), result_listener);
}

// Polls done until it is true (true) or timeout has passed (false): the way
// a test waits for something another thread or process does, instead of a
// fixed sleep. The first poll is at once; the pause between polls grows from
// 1 ms to 20 ms, so quick conditions are seen quickly and slow ones (an HTTP
// scrape, a file another process writes) are not polled in a busy loop.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::chrono::milliseconds pause(1);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return true;
}

// A TCP port on 127.0.0.1 nobody listens on right now.
inline int FreePort() { return FreeLoopbackPort().value_or(0); }

// The whole file as bytes; "" when it cannot be read (the test's own
// expectations then fail on the content).
inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes text to path, creating the parent directories.
inline void WriteTextFile(const std::string& path, std::string_view text) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// A fresh directory, removed with everything in it when the object goes.
// Under /dev/shm when it is writable (fast, and nothing is left on disk after
// a crash), else under $TMPDIR.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "anxin-test") {
    namespace fs = std::filesystem;
    fs::path base =
        ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (base / (std::string(prefix) + "-XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << templ << " failed";
    }
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name (not created).
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Writes name (subdirectories allowed) and returns its full path.
  std::string Write(std::string_view name, std::string_view text) const {
    std::string p = *this / name;
    WriteTextFile(p, text);
    return p;
  }
  std::string Read(std::string_view name) const { return ReadTextFile(*this / name); }
  // Creates the directory path()/name (and its parents); returns its path.
  std::string Mkdir(std::string_view name) const {
    std::string p = *this / name;
    std::filesystem::create_directories(p);
    return p;
  }
  // A recursive copy of `from` (symbolic links kept as links) at path()/name.
  std::string CopyTree(const std::string& from, std::string_view name) const {
    std::string to = *this / name;
    std::filesystem::copy(
        from, to,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    return to;
  }

 private:
  std::string path_;
};

#if defined(ANXIN_SOURCE_DIR) && defined(ANXIN_BINARY_DIR)

// A path in the source tree: SourcePath("examples/scenarios/faults.yaml").
inline std::string SourcePath(std::string_view relative) {
  return std::string(ANXIN_SOURCE_DIR) + "/" + std::string(relative);
}
// A path under tests/fixtures/: FixturePath("ascend/npu-smi-info-1x910B4-idle.txt").
inline std::string FixturePath(std::string_view relative) {
  return SourcePath("tests/fixtures/" + std::string(relative));
}
// The built `anxin` program.
inline std::string AnxinBinary() { return std::string(ANXIN_BINARY_DIR) + "/anxin"; }

struct RunAnxinOptions {
  // "NAME=VALUE" entries added to the inherited environment.
  std::vector<std::string> env{};
  // Start from an environment with only PATH (and then env): for tests of
  // ANXIN_* variables that must not see the caller's.
  bool clear_env = false;
  std::string cwd{};
  std::chrono::seconds timeout{120};
};

// Runs `anxin args...` (an argument vector, no shell) to completion. A
// failure to start it is a test failure and an exit_code of -1.
inline CommandOutput RunAnxin(std::vector<std::string> args, RunAnxinOptions options = {}) {
  args.insert(args.begin(), AnxinBinary());
  RunOptions run;
  run.timeout = options.timeout;
  run.env = std::move(options.env);
  run.cwd = std::move(options.cwd);
  if (options.clear_env) {
    run.clear_env = true;
    run.env.push_back("PATH=/usr/bin:/bin");
  }
  auto r = RunCommand(std::move(args), std::move(run));
  if (!r) {
    ADD_FAILURE() << "cannot run anxin: " << r.error().ToString();
    CommandOutput failed;
    failed.stderr_text = r.error().ToString();
    return failed;
  }
  return *std::move(r);
}

#endif  // ANXIN_SOURCE_DIR && ANXIN_BINARY_DIR

// A test PKI made with the openssl program, as an operator would make one:
// dir/ca.{crt,key} (a CA), dir/server.{crt,key} (for 127.0.0.1 and
// etcd.anxin.test, signed by the CA), dir/client.{crt,key} (CN=prometheus,
// signed by the CA), dir/expired.{crt,key} (signed by the CA, valid only on
// 2020-01-01) and dir/other-ca.crt (a CA that signed none of them). Adds a
// test failure naming the step and returns false when one fails.
inline bool MakeTestCertificates(const TempDir& dir) {
  const std::string d = dir.path();
  dir.Write("server.ext", "subjectAltName=IP:127.0.0.1,DNS:etcd.anxin.test\n");
  // openssl ca is the tool that takes a validity in the past.
  dir.Mkdir("ca-db");
  dir.Write("ca-db/index.txt", "");
  dir.Write("ca-db/serial", "01\n");
  dir.Write("ca.cnf", "[ca]\ndefault_ca = test\n[test]\ndatabase = " + d +
                          "/ca-db/index.txt\nserial = " + d + "/ca-db/serial\nnew_certs_dir = " +
                          d + "/ca-db\ncertificate = " + d + "/ca.crt\nprivate_key = " + d +
                          "/ca.key\ndefault_md = sha256\npolicy = any\n[any]\ncommonName = "
                          "supplied\n");
  const std::vector<std::vector<std::string>> steps = {
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=anxin test CA"},
      {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", d + "/server.key", "-out", d + "/server.csr", "-subj", "/CN=127.0.0.1"},
      {"openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.crt", "-CAkey",
       d + "/ca.key", "-CAcreateserial", "-out", d + "/server.crt", "-days", "2", "-extfile",
       d + "/server.ext"},
      {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", d + "/client.key", "-out", d + "/client.csr", "-subj", "/CN=prometheus"},
      {"openssl", "x509", "-req", "-in", d + "/client.csr", "-CA", d + "/ca.crt", "-CAkey",
       d + "/ca.key", "-CAcreateserial", "-out", d + "/client.crt", "-days", "2"},
      {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", d + "/expired.key", "-out", d + "/expired.csr", "-subj", "/CN=expired"},
      {"openssl", "ca", "-batch", "-config", d + "/ca.cnf", "-in", d + "/expired.csr", "-out",
       d + "/expired.crt", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z"},
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", d + "/other-ca.key", "-out", d + "/other-ca.crt", "-days", "2", "-subj",
       "/CN=another CA"},
  };
  for (const auto& argv : steps) {
    auto out = RunCommand(argv, {.timeout = std::chrono::seconds(60)});
    if (!out || out->exit_code != 0) {
      ADD_FAILURE() << "openssl " << argv[1] << ": "
                    << (out ? out->stderr_text : out.error().ToString());
      return false;
    }
  }
  return true;
}

// The value of one series ("name{labels}" exactly as written) in a
// Prometheus text exposition; nullopt when it is not there.
inline std::optional<double> Value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace anxin::testing

#endif  // ANXIN_BASE_TESTING_H_
