#include "anxin/base/file.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// A fresh directory per test, removed with its files at the end.
class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/anxin_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    for (const std::string& name : List()) std::remove((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }
  std::vector<std::string> List() const {
    std::vector<std::string> out;
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
    return out;
  }
  mode_t ModeOf(const std::string& path) const {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0);
    return st.st_mode & 07777;
  }
  std::string dir_;
};

TEST_F(FileTest, ReadFileErrors) {
  EXPECT_THAT(ReadFile(dir_ + "/missing"),
              HasCode(ErrorCode::kNotFound, HasSubstr("No such file or directory")));
  EXPECT_THAT(ReadFile(dir_), HasCode(ErrorCode::kInvalidArgument, HasSubstr("is a directory")));
}

// Input files named by the user: every way of naming the wrong thing is an
// input error that names where the name came from.
TEST_F(FileTest, ReadInputFileNamesTheFlagForEveryWrongInput) {
  ASSERT_THAT(WriteFileAtomic(dir_ + "/hosts", "a\n"), IsOk());
  EXPECT_EQ(ReadInputFile(dir_ + "/hosts", "--hosts").value(), "a\n");
  EXPECT_THAT(ReadInputFile(dir_ + "/missing", "--hosts"),
              HasCode(ErrorCode::kNotFound, HasSubstr("--hosts: open ")));
  EXPECT_THAT(
      ReadInputFile(dir_, "--hosts"),
      HasCode(ErrorCode::kInvalidArgument, HasSubstr("--hosts " + dir_ + ": is a directory")));
  ASSERT_THAT(WriteFileAtomic(dir_ + "/empty", ""), IsOk());
  EXPECT_THAT(ReadInputFile(dir_ + "/empty", "--env"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("--env " + dir_ + "/empty: the file is empty")));
  // Opens, but cannot be read (EIO at offset 0), as root too.
  EXPECT_THAT(ReadInputFile("/proc/self/mem", "--map"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--map: read /proc/self/mem")));
  EXPECT_THAT(ReadInputFile(dir_ + "/hosts", "--hosts", 1),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--hosts: ")));
}

TEST_F(FileTest, ReadFileWithALimit) {
  ASSERT_THAT(WriteFileAtomic(dir_ + "/f", "0123456789"), IsOk());
  EXPECT_EQ(ReadFile(dir_ + "/f", 10).value(), "0123456789");
  EXPECT_THAT(ReadFile(dir_ + "/f", 9),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("larger than 9 bytes")));
  EXPECT_THAT(ReadFile("/dev/zero", 1 << 20), HasCode(ErrorCode::kInvalidArgument));
}

TEST_F(FileTest, RoundTripKeepsBinaryData) {
  std::string data("a\0b\nc", 5);
  data += std::string(200000, 'x');
  ASSERT_THAT(WriteFileAtomic(dir_ + "/f", data), IsOk());
  EXPECT_EQ(ReadFile(dir_ + "/f").value(), data);
  ASSERT_THAT(WriteFileAtomic(dir_ + "/f", ""), IsOk());
  EXPECT_EQ(ReadFile(dir_ + "/f").value(), "");
  EXPECT_THAT(List(), ::testing::ElementsAre("f"));
}

TEST_F(FileTest, ModeIsGivenKeptOrDefault) {
  std::string path = dir_ + "/f";
  ASSERT_THAT(WriteFileAtomic(path, "1"), IsOk());
  EXPECT_EQ(ModeOf(path), 0644u);
  ASSERT_THAT(WriteFileAtomic(path, "2", 0600), IsOk());
  EXPECT_EQ(ModeOf(path), 0600u);
  ASSERT_THAT(WriteFileAtomic(path, "3"), IsOk());  // kept
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ReadFile(path).value(), "3");
}

TEST_F(FileTest, WriteErrors) {
  // The error names the file being written, not only the directory missing.
  EXPECT_THAT(
      WriteFileAtomic(dir_ + "/no/such/dir/f", "x"),
      HasCode(ErrorCode::kNotFound, ::testing::HasSubstr("write " + dir_ + "/no/such/dir/f")));
  EXPECT_THAT(WriteFileAtomic(dir_, "x"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(WriteFileAtomic("", "x"), HasCode(ErrorCode::kInvalidArgument));
}

TEST_F(FileTest, UncommittedWriterLeavesTargetAndNoTempFile) {
  std::string path = dir_ + "/f";
  ASSERT_THAT(WriteFileAtomic(path, "old"), IsOk());
  {
    auto w = AtomicFileWriter::Open(path);
    ASSERT_THAT(w, IsOk());
    ASSERT_THAT(w->Write("new contents"), IsOk());
    EXPECT_EQ(ReadFile(path).value(), "old");
  }
  EXPECT_EQ(ReadFile(path).value(), "old");
  EXPECT_THAT(List(), ::testing::ElementsAre("f"));
}

TEST_F(FileTest, WriterCommitsOnceAndMoves) {
  std::string path = dir_ + "/f";
  auto w = AtomicFileWriter::Open(path, 0640);
  ASSERT_THAT(w, IsOk());
  AtomicFileWriter moved = *std::move(w);
  ASSERT_THAT(moved.Write("ab"), IsOk());
  ASSERT_THAT(moved.Write("cd"), IsOk());
  ASSERT_THAT(moved.Commit(), IsOk());
  EXPECT_EQ(ReadFile(path).value(), "abcd");
  EXPECT_EQ(ModeOf(path), 0640u);
  EXPECT_THAT(moved.Commit(), HasCode(ErrorCode::kFailedPrecondition));
  EXPECT_THAT(moved.Write("x"), HasCode(ErrorCode::kFailedPrecondition));
}

// The contents of version v: pseudo-random bytes, a different length each time.
std::string Version(int v) {
  std::mt19937 rng(static_cast<unsigned>(v));
  std::string out(512 * 1024 + static_cast<size_t>(v) * 4099, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Writes version v to path in chunks, one chunk per byte read from `go`, and
// reports each step on `done`; the parent kills it at a chosen step.
[[noreturn]] void WriterChild(const std::string& path, int v, int go, int done) {
  std::string data = Version(v);
  constexpr size_t kChunk = 32 * 1024;
  auto w = AtomicFileWriter::Open(path);
  if (!w) _exit(10);
  char byte;
  for (size_t off = 0; off < data.size(); off += kChunk) {
    if (read(go, &byte, 1) != 1) _exit(11);
    if (!w->Write(std::string_view(data).substr(off, kChunk))) _exit(12);
    if (write(done, "c", 1) != 1) _exit(13);
  }
  if (read(go, &byte, 1) != 1) _exit(11);
  if (!w->Commit()) _exit(14);
  if (write(done, "d", 1) != 1) _exit(13);
  _exit(0);
}

TEST_F(FileTest, KilledWriterLeavesOldOrNewNeverAMix) {
  std::string path = dir_ + "/checkpoint.bin";
  int current = 0;
  ASSERT_THAT(WriteFileAtomic(path, Version(current)), IsOk());
  std::mt19937 rng(20261129);  // a fixed seed: the same kill points every run
  int kept_old = 0, got_new = 0;
  for (int iteration = 0; iteration < 40; ++iteration) {
    int next = current + 1;
    size_t chunks = (Version(next).size() + 32 * 1024 - 1) / (32 * 1024);
    // Kill after `step` chunks; step == chunks lets it start the commit, and
    // the kill then lands somewhere inside fsync/link/rename.
    // One kill in three lands in the commit.
    size_t step = rng() % 3 == 0 ? chunks : rng() % chunks;
    int go[2], done[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(done), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      close(done[0]);
      WriterChild(path, next, go[0], done[1]);
    }
    close(go[0]);
    close(done[1]);
    char byte;
    for (size_t i = 0; i < step; ++i) {
      ASSERT_EQ(write(go[1], "g", 1), 1);
      ASSERT_EQ(read(done[0], &byte, 1), 1);
    }
    if (step == chunks) {
      ASSERT_EQ(write(go[1], "g", 1), 1);
      usleep(static_cast<useconds_t>(rng() % 20000));
    }
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    close(go[1]);
    close(done[0]);

    auto contents = ReadFile(path);
    ASSERT_THAT(contents, IsOk());
    if (*contents == Version(current)) {
      ++kept_old;
    } else {
      ASSERT_EQ(*contents, Version(next))
          << "iteration " << iteration << ": a mix of versions, " << contents->size() << " bytes";
      ++got_new;
      current = next;
    }
    // Nothing but the target and (only if killed between link and rename)
    // hidden temporary files; never anything that could be taken for it.
    for (const std::string& name : List()) {
      if (name != "checkpoint.bin") {
        EXPECT_THAT(name, StartsWith(".checkpoint.bin.tmp."));
      }
    }
  }
  EXPECT_GT(kept_old, 0);
  std::printf("killed writers: %d kept the old file, %d left the new one\n", kept_old, got_new);
  // A writer that is not killed replaces the file.
  ASSERT_THAT(WriteFileAtomic(path, Version(current + 1)), IsOk());
  EXPECT_EQ(ReadFile(path).value(), Version(current + 1));
}

}  // namespace
}  // namespace anxin
