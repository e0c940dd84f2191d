#include "anxin/base/line_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every line left, as copies, checking the line numbers.
std::vector<std::string> ReadAll(LineReader& r) {
  std::vector<std::string> out;
  const size_t before = r.line_number();
  std::string_view line;
  for (;;) {
    auto more = r.Next(line);
    EXPECT_THAT(more, IsOk());
    if (!more || !*more) break;
    out.emplace_back(line);
    EXPECT_EQ(r.line_number(), before + out.size());
  }
  return out;
}

TEST(LineReaderTest, LinesOfTextInMemory) {
  LineReader a("a\r\nb\n\nc");
  EXPECT_THAT(ReadAll(a), ElementsAre("a", "b", "", "c"));
  LineReader b("a\n");
  EXPECT_THAT(ReadAll(b), ElementsAre("a"));
  LineReader c("");
  EXPECT_TRUE(ReadAll(c).empty());
  EXPECT_EQ(c.line_number(), 0u);
  LineReader d("\n\r\n");
  EXPECT_THAT(ReadAll(d), ElementsAre("", ""));
  // Only one '\r' before '\n' goes, as in SplitLines.
  LineReader e("x\r\r\ny\r");
  EXPECT_THAT(ReadAll(e), ElementsAre("x\r", "y"));
}

// Files much larger than a block, with lines that straddle block boundaries,
// CRLF split across two reads, and lines longer than a block (the buffer
// grows): the same lines as SplitLines on the whole text.
TEST(LineReaderTest, FileLinesMatchSplitLinesAcrossBlocks) {
  testing::TempDir dir;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 6; ++round) {
    std::string text;
    const size_t target = 3 * LineReader::kBlockBytes + rng() % 1000;
    while (text.size() < target) {
      size_t len = rng() % 8 == 0 ? rng() % 300 : rng() % 12;
      if (round == 1 && text.size() < 10) len = LineReader::kBlockBytes * 5 / 2;  // grows twice
      for (size_t i = 0; i < len; ++i) text += static_cast<char>('a' + rng() % 26);
      text += rng() % 3 == 0 ? "\r\n" : "\n";
    }
    if (round == 2) {
      // A CRLF whose '\r' ends the first block and '\n' starts the second.
      text.resize(LineReader::kBlockBytes + 1000);
      text[LineReader::kBlockBytes - 1] = '\r';
      text[LineReader::kBlockBytes] = '\n';
    }
    if (round % 2 == 1) text += "last line without a newline";
    std::string path = dir.Write("f" + std::to_string(round), text);
    auto r = LineReader::OpenInput(path, "--lines");
    ASSERT_THAT(r, IsOk());
    std::vector<std::string> got = ReadAll(*r);
    std::vector<std::string_view> want = SplitLines(text);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "round " << round << " line " << i + 1;
    std::string_view line;
    auto more = r->Next(line);  // still false after the end
    ASSERT_THAT(more, IsOk());
    EXPECT_FALSE(*more);
  }
}

TEST(LineReaderTest, OpenInputNamesTheFlagForEveryWrongInput) {
  testing::TempDir dir;
  EXPECT_THAT(LineReader::OpenInput(dir / "missing", "--lengths"),
              HasCode(ErrorCode::kNotFound, HasSubstr("--lengths: open ")));
  EXPECT_THAT(LineReader::OpenInput(dir.path(), "--lengths"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("--lengths " + dir.path() + ": is a directory")));
  std::string empty = dir.Write("empty", "");
  EXPECT_THAT(LineReader::OpenInput(empty, "--lengths"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("--lengths " + empty + ": the file is empty")));
  // Opens, but cannot be read (EIO at offset 0), as root too.
  EXPECT_THAT(LineReader::OpenInput("/proc/self/mem", "--map"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--map: read /proc/self/mem")));
}

TEST(LineReaderTest, RefusesALineLongerThanTheLimit) {
  testing::TempDir dir;
  std::string text = "short\n" + std::string(3 * LineReader::kBlockBytes, 'x') + "\nafter\n";
  std::string path = dir.Write("long", text);
  auto r = LineReader::OpenInput(path, "--lengths", 2 * LineReader::kBlockBytes);
  ASSERT_THAT(r, IsOk());
  std::string_view line;
  ASSERT_THAT(r->Next(line), IsOk());
  EXPECT_EQ(line, "short");
  EXPECT_THAT(r->Next(line), HasCode(ErrorCode::kInvalidArgument,
                                     HasSubstr(path + ":2: a line longer than 2097152 bytes")));
  // Under the default limit the same line reads whole.
  auto whole = LineReader::OpenInput(path, "--lengths");
  ASSERT_THAT(whole, IsOk());
  EXPECT_THAT(ReadAll(*whole),
              ElementsAre("short", std::string(3 * LineReader::kBlockBytes, 'x'), "after"));
  // A limit below the block size holds as well, for the last line too.
  std::string small = dir.Write("small", "12345\n123456\n1234567");
  auto s = LineReader::OpenInput(small, "--lengths", 6);
  ASSERT_THAT(s, IsOk());
  ASSERT_THAT(s->Next(line), IsOk());
  EXPECT_EQ(line, "12345");
  ASSERT_THAT(s->Next(line), IsOk());
  EXPECT_EQ(line, "123456");
  EXPECT_THAT(s->Next(line), HasCode(ErrorCode::kInvalidArgument, HasSubstr(small + ":3: ")));
  s = LineReader::OpenInput(small, "--lengths", 5);
  ASSERT_THAT(s, IsOk());
  ASSERT_THAT(s->Next(line), IsOk());
  EXPECT_THAT(s->Next(line), HasCode(ErrorCode::kInvalidArgument, HasSubstr(small + ":2: ")));
  // /dev/zero has no lines: the limit stops it.
  auto zero = LineReader::OpenInput("/dev/zero", "--lengths", LineReader::kBlockBytes);
  ASSERT_THAT(zero, IsOk());
  EXPECT_THAT(zero->Next(line), HasCode(ErrorCode::kInvalidArgument, HasSubstr("/dev/zero:1")));
}

TEST(LineReaderTest, MovedReaderContinuesWhereItWas) {
  testing::TempDir dir;
  std::string path = dir.Write("f", "1\n2\n3\n");
  auto r = LineReader::OpenInput(path, "--lengths");
  ASSERT_THAT(r, IsOk());
  std::string_view line;
  ASSERT_THAT(r->Next(line), IsOk());
  EXPECT_EQ(line, "1");
  LineReader moved = std::move(*r);
  EXPECT_EQ(moved.line_number(), 1u);
  EXPECT_THAT(ReadAll(moved), ElementsAre("2", "3"));
}

}  // namespace
}  // namespace anxin
