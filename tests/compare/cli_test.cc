// `anxin compare` as a user runs it: exit codes, JSON, reports, errors.
// The program under test is $ANXIN_BIN if set, else the build's anxin.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "anxin/base/subprocess.h"
#include "anxin/compare/testing_util.h"

namespace anxin::compare {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Anxin() {
  const char* env = std::getenv("ANXIN_BIN");
  return env && *env ? env : std::string(ANXIN_BINARY_DIR) + "/anxin";
}

CommandOutput RunAnxin(std::vector<std::string> args) {
  args.insert(args.begin(), Anxin());
  auto r = RunCommand(args, {.timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(r.has_value()) << r.error().ToString();
  return r.value_or(CommandOutput{});
}

class CompareCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    ASSERT_EQ(testing::RunPython({testing::FixturePath("msprobe_cases.py"), dir_->path()}), 0);
    ASSERT_EQ(testing::RunPython(
                  {"-c",
                   "import numpy as np, sys; d = sys.argv[1]; r = np.linspace(-1, 1, 1001); "
                   "np.save(d + '/ref.npy', r); np.save(d + '/good.npy', r.astype(np.float32)); "
                   "np.save(d + '/bad.npy', (r + 0.5).astype(np.float32))",
                   dir_->path()}),
              0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static testing::ScratchDir* dir_;
};
testing::ScratchDir* CompareCli::dir_ = nullptr;

TEST_F(CompareCli, HelpListsTheOptions) {
  auto r = RunAnxin({"compare", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("--fuzzy"));
  EXPECT_THAT(r.stdout_text, HasSubstr("--html"));
  EXPECT_THAT(r.stdout_text, HasSubstr("ref"));
}

TEST_F(CompareCli, DumpsWithADivergingOpFailWithReports) {
  std::string html = *dir_ / "r.html", csv = *dir_ / "r.csv";
  auto r = RunAnxin({"--json", "compare", *dir_ / "npu", *dir_ / "gpu", "--map", *dir_ / "map.yaml",
                     "--html", html, "--csv", csv});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  auto j = nlohmann::json::parse(r.stdout_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.stdout_text;
  EXPECT_EQ(j["first_divergence"]["name"], "Functional.softmax.0.forward.output.0");
  EXPECT_EQ(j["first_divergence"]["modules"][0], "Module.act.Softmax.forward.0");
  EXPECT_GT(j["summary"]["fail"].get<int>(), 0);
  EXPECT_EQ(j["summary"]["unmatched_out"].get<int>(), 0);
  EXPECT_THAT(testing::ReadAll(html), HasSubstr("<svg"));
  EXPECT_THAT(testing::ReadAll(csv), HasSubstr("Functional.softmax.0.forward.output.0"));

  auto table = RunAnxin({"compare", *dir_ / "npu", *dir_ / "gpu"});
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_THAT(table.stdout_text, HasSubstr("first divergence"));
  EXPECT_THAT(table.stdout_text,
              HasSubstr("  in Module.act.Softmax.forward.0 < Module.net.Net.forward.0\n"));
  EXPECT_THAT(table.stdout_text, HasSubstr("unmatched in output (3)"));
}

TEST_F(CompareCli, SameDumpPasses) {
  auto r = RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu"});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  std::string stats =
      std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/msprobe/gpu_dump/step0/proc2016";
  EXPECT_EQ(RunAnxin({"compare", stats, stats}).exit_code, 0);
}

TEST_F(CompareCli, RefComparesOneTensor) {
  auto ok = RunAnxin({"compare", "ref", *dir_ / "good.npy", *dir_ / "ref.npy"});
  EXPECT_EQ(ok.exit_code, 0) << ok.stdout_text << ok.stderr_text;
  EXPECT_THAT(ok.stdout_text, HasSubstr(": pass"));
  EXPECT_THAT(ok.stdout_text, HasSubstr("max_ulp_err"));
  auto bad = RunAnxin({"--json", "compare", "ref", *dir_ / "bad.npy", *dir_ / "ref.npy"});
  EXPECT_EQ(bad.exit_code, 1);
  auto j = nlohmann::json::parse(bad.stdout_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << bad.stdout_text;
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_NEAR(j["metrics"]["max_abs_err"].get<double>(), 0.5, 1e-6);  // float32 rounding
}

TEST_F(CompareCli, TwoNpyFilesAreOnePairWhateverTheirNames) {
  auto ok = RunAnxin({"--json", "compare", *dir_ / "good.npy", *dir_ / "ref.npy"});
  EXPECT_EQ(ok.exit_code, 0) << ok.stdout_text << ok.stderr_text;
  auto j = nlohmann::json::parse(ok.stdout_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ok.stdout_text;
  EXPECT_EQ(j["summary"]["pairs"], 1);
  EXPECT_EQ(j["summary"]["pass"], 1);
  EXPECT_EQ(j["summary"]["unmatched_out"], 0);
  EXPECT_EQ(j["pairs"][0]["name"], "good");
  auto bad = RunAnxin({"compare", *dir_ / "bad.npy", *dir_ / "ref.npy"});
  EXPECT_EQ(bad.exit_code, 1) << bad.stdout_text << bad.stderr_text;
  EXPECT_THAT(bad.stdout_text, HasSubstr("1 fail"));
}

// Runs anxin with stdout to /dev/null; returns its exit code and peak RSS (KiB).
std::pair<int, long> RunMeasured(std::vector<std::string> args) {
  args.insert(args.begin(), Anxin());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return {-1, 0};
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status)) return {-1, 0};
  return {WEXITSTATUS(status), ru.ru_maxrss};
}

// The peak resident set allowed for comparing `data_bytes` of mapped tensors:
// 256 MiB in the optimised build (run as release.compare_cli_test). Under
// AddressSanitizer every byte read also touches its shadow byte (one per 8
// bytes of the mapping), and on some kernels those shadow pages stay resident,
// so the sanitized build may hold an eighth of the data on top.
long RssBoundKiB(uint64_t data_bytes) {
  long bound = 256 << 10;
#if defined(__SANITIZE_ADDRESS__)
  bound += static_cast<long>(data_bytes / 8 / 1024);
#else
  (void)data_bytes;
#endif
  return bound;
}

// A tensor pair far larger than the peak resident set: pages are streamed
// through the mapping and dropped after use, which is what lets a tensor
// larger than RAM through (docs/compare.md has a 2 x 24 GiB run on 24 GiB).
// The files are sparse (holes read as zeros), so they take no disk.
TEST_F(CompareCli, ALargeTensorPairStreamsInBoundedMemory) {
  const uint64_t n = uint64_t{256} << 20;  // float32 elements: 1 GiB per side
  auto write = [&](const std::string& name, bool fortran) {
    std::string header = fortran ? "{'descr': '<f4', 'fortran_order': True, 'shape': (" +
                                       std::to_string(n / 1024) + ", 1024), }"
                                 : "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                                       std::to_string(n) + ",), }";
    header.resize(128 - 10 - 1, ' ');
    header += '\n';
    std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) +
                       char(header.size() >> 8) + header;
    std::ofstream f(*dir_ / name, std::ios::binary);
    f << file;
    f.seekp(static_cast<std::streamoff>(128 + n * 4 - 1));
    f.put('\0');
    return f.good();
  };
  // Two column-major tensors of one shape stream as stored, like row-major
  // ones (they were once gathered element by element, every page kept).
  ASSERT_TRUE(write("big_out_f.npy", true));
  ASSERT_TRUE(write("big_ref_f.npy", true));
  auto [fcode, frss_kib] =
      RunMeasured({"compare", *dir_ / "big_out_f.npy", *dir_ / "big_ref_f.npy"});
  EXPECT_EQ(fcode, 0);
  EXPECT_LT(frss_kib, RssBoundKiB(2 * n * 4)) << "column-major: peak RSS " << frss_kib << " KiB";
  fs::remove(*dir_ / "big_out_f.npy");
  fs::remove(*dir_ / "big_ref_f.npy");
  for (const char* name : {"big_out.npy", "big_ref.npy"}) ASSERT_TRUE(write(name, false));
  auto [code, rss_kib] = RunMeasured({"compare", *dir_ / "big_out.npy", *dir_ / "big_ref.npy"});
  EXPECT_EQ(code, 0);
  // 2 GiB of tensors; the process itself stays far below.
  EXPECT_LT(rss_kib, RssBoundKiB(2 * n * 4)) << "peak RSS " << rss_kib << " KiB";
  // Long work shows progress on stderr when asked (or on a terminal).
  auto shown =
      RunAnxin({"compare", "ref", *dir_ / "big_out.npy", *dir_ / "big_ref.npy", "--progress"});
  EXPECT_EQ(shown.exit_code, 0) << shown.stderr_text;
  EXPECT_THAT(shown.stderr_text, HasSubstr("compare: 2.15 of 2.15 GB (100%), 1 of 1 tensors"));
  auto hidden =
      RunAnxin({"compare", "ref", *dir_ / "big_out.npy", *dir_ / "big_ref.npy", "--no-progress"});
  EXPECT_EQ(hidden.exit_code, 0);
  EXPECT_EQ(hidden.stderr_text, "");
  fs::remove(*dir_ / "big_out.npy");
  fs::remove(*dir_ / "big_ref.npy");
}

TEST_F(CompareCli, BadInputIsAUsageErrorNamingTheProblem) {
  auto missing = RunAnxin({"compare", *dir_ / "nope", *dir_ / "gpu"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr("error: reading the output dump"));
  std::string bytes = testing::ReadAll(*dir_ / "good.npy");
  std::ofstream(*dir_ / "cut.npy", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto cut = RunAnxin({"compare", "ref", *dir_ / "cut.npy", *dir_ / "ref.npy"});
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_THAT(cut.stderr_text, HasSubstr("cut.npy: offset"));
  std::ofstream(*dir_ / "bad.yaml") << "default: {pass_cosine: [1]}\n";
  auto thr =
      RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", "--thresholds", *dir_ / "bad.yaml"});
  EXPECT_EQ(thr.exit_code, 2);
  EXPECT_THAT(thr.stderr_text, HasSubstr("bad.yaml:1:"));
}

// A CI gate pointed at two dumps whose tensors never meet must not pass:
// nothing compared is exit 1 with a message saying so, after the report
// (which lists the unmatched tensors) in both output formats.
TEST_F(CompareCli, NothingMatchedIsAFailure) {
  testing::ScratchDir t;
  ASSERT_EQ(testing::RunPython(
                {"-c",
                 "import json, numpy as np, struct, sys; d = sys.argv[1]; "
                 "a = np.linspace(-1, 1, 64).astype(np.float32); "
                 "import os; os.makedirs(d + '/n1'); os.makedirs(d + '/n2'); "
                 "np.save(d + '/n1/x.npy', a); np.save(d + '/n2/y.npy', a); "
                 "h = json.dumps({'w': {'dtype': 'F32', 'shape': [64], "
                 "'data_offsets': [0, a.nbytes]}}).encode(); h += b' ' * (-len(h) % 8); "
                 "open(d + '/one.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + "
                 "a.tobytes())",
                 t.path()}),
            0);
  auto dirs = RunAnxin({"compare", t / "n1", t / "n2"});
  EXPECT_EQ(dirs.exit_code, 1) << dirs.stdout_text << dirs.stderr_text;
  EXPECT_THAT(dirs.stdout_text, HasSubstr("0 pairs: 0 pass, 0 warn, 0 fail; 1 + 1 unmatched"));
  EXPECT_THAT(dirs.stderr_text,
              HasSubstr("error: no tensor pairs matched (1 output and 1 reference tensors without "
                        "a partner)"));
  // A .npy against a one-tensor .safetensors of another name: `compare ref`
  // is the way to pair them, and the message says so.
  auto files = RunAnxin({"--json", "compare", *dir_ / "good.npy", t / "one.safetensors"});
  EXPECT_EQ(files.exit_code, 1) << files.stdout_text << files.stderr_text;
  auto j = nlohmann::json::parse(files.stdout_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << files.stdout_text;
  EXPECT_EQ(j["summary"]["pairs"], 0);
  EXPECT_THAT(files.stderr_text, HasSubstr("`anxin compare ref OUT REF`"));
  auto ref = RunAnxin({"compare", "ref", t / "n1/x.npy", t / "one.safetensors"});
  EXPECT_EQ(ref.exit_code, 0) << ref.stdout_text << ref.stderr_text;
  EXPECT_THAT(ref.stdout_text, HasSubstr(": pass"));
}

// `compare ref --help` names every format it takes for one tensor.
TEST_F(CompareCli, RefHelpNamesEveryFormat) {
  auto r = RunAnxin({"compare", "ref", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr(".npy"));
  EXPECT_THAT(r.stdout_text, HasSubstr(".npz"));
  EXPECT_THAT(r.stdout_text, HasSubstr(".safetensors"));
}

// Thresholds outside their range or crossing each other are input errors
// (exit 2) naming the key and what it allows, from --thresholds and from the
// compare: section of --config alike.
TEST_F(CompareCli, BadThresholdValuesAreUsageErrors) {
  std::ofstream(*dir_ / "high.yaml") << "default: {pass_cosine: 1.5}\n";
  auto high = RunAnxin({"compare", "ref", *dir_ / "good.npy", *dir_ / "ref.npy", "--thresholds",
                        *dir_ / "high.yaml"});
  EXPECT_EQ(high.exit_code, 2);
  EXPECT_THAT(high.stderr_text,
              HasSubstr("high.yaml:1:24: default.pass_cosine: 1.5 is out of range: pass_cosine "
                        "must be in [-1, 1)"));
  std::ofstream(*dir_ / "crossed.yaml")
      << "compare:\n  default: {pass_cosine: 0.5, fail_cosine: 0.9}\n";
  auto crossed =
      RunAnxin({"--config", *dir_ / "crossed.yaml", "compare", *dir_ / "gpu", *dir_ / "gpu"});
  EXPECT_EQ(crossed.exit_code, 2);
  EXPECT_THAT(crossed.stderr_text,
              HasSubstr("crossed.yaml:2:26: compare.default.pass_cosine: 0.5 is below "
                        "fail_cosine 0.9"));
}

// Counts are never negative: refused by name, not wrapped to a huge number.
TEST_F(CompareCli, NegativeCountsAreRefusedByName) {
  for (const char* flag : {"--top", "--html-rows"}) {
    auto r = RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", flag, "-1"});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.stderr_text,
                HasSubstr(std::string("error: ") + flag + ": must be at least 0, got -1"));
  }
  EXPECT_EQ(RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", "--top", "0"}).exit_code, 0);
}

// A --thresholds or --map file that is missing, a directory or empty is an
// input error naming the flag.
TEST_F(CompareCli, UnreadableInputFilesNameTheirFlag) {
  std::ofstream(*dir_ / "empty.yaml").flush();
  for (const char* flag : {"--thresholds", "--map"}) {
    SCOPED_TRACE(flag);
    auto missing = RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", flag, *dir_ / "nope.yaml"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_THAT(missing.stderr_text, HasSubstr(std::string("error: ") + flag + ": open "));
    EXPECT_THAT(missing.stderr_text, HasSubstr("nope.yaml: No such file or directory"));
    auto dir = RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", flag, dir_->path()});
    EXPECT_EQ(dir.exit_code, 2);
    EXPECT_THAT(dir.stderr_text, HasSubstr(std::string("error: ") + flag + " " + dir_->path() +
                                           ": is a directory, not a file"));
    auto empty = RunAnxin({"compare", *dir_ / "gpu", *dir_ / "gpu", flag, *dir_ / "empty.yaml"});
    EXPECT_EQ(empty.exit_code, 2);
    EXPECT_THAT(empty.stderr_text, HasSubstr(std::string("error: ") + flag + " " +
                                             (*dir_ / "empty.yaml") + ": the file is empty"));
  }
  // `compare ref` reads --thresholds the same way.
  auto ref = RunAnxin({"compare", "ref", *dir_ / "good.npy", *dir_ / "ref.npy", "--thresholds",
                       *dir_ / "nope.yaml"});
  EXPECT_EQ(ref.exit_code, 2);
  EXPECT_THAT(ref.stderr_text, HasSubstr("error: --thresholds: open "));
}

}  // namespace
}  // namespace anxin::compare
