#include "anxin/base/strings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace anxin {
namespace {

using ::testing::ElementsAre;

TEST(StringsTest, TrimDropsWhiteSpaceOfEveryKindAndTrailingNuls) {
  EXPECT_EQ(Trim("  42 \n"), "42");
  EXPECT_EQ(Trim("\t\r\v\fx y\r\n"), "x y");
  EXPECT_EQ(Trim(std::string_view("0-3\n\0", 5)), "0-3");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim(" \n\t"), "");
}

TEST(StringsTest, SplitLinesHandlesCrLfAndNoFinalNewline) {
  EXPECT_THAT(SplitLines("a\r\nb\n\nc"), ElementsAre("a", "b", "", "c"));
  EXPECT_THAT(SplitLines("a\n"), ElementsAre("a"));
  EXPECT_TRUE(SplitLines("").empty());
}

TEST(StringsTest, SplitWordsAndSplit) {
  EXPECT_THAT(SplitWords("  a  b\tc "), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(SplitWords(" \t ").empty());
  EXPECT_THAT(Split("a,,b,", ','), ElementsAre("a", "", "b", ""));
  EXPECT_THAT(Split("", ','), ElementsAre(""));
}

TEST(StringsTest, ParseIntIsStrict) {
  EXPECT_EQ(ParseInt(" 42 "), 42);
  EXPECT_EQ(ParseInt("-7"), -7);
  EXPECT_EQ(ParseInt("0x1F"), 31);
  EXPECT_EQ(ParseInt("42abc"), std::nullopt);
  EXPECT_EQ(ParseInt(""), std::nullopt);
  EXPECT_EQ(ParseInt("-"), std::nullopt);
  EXPECT_EQ(ParseInt("99999999999999999999"), std::nullopt);
}

TEST(StringsTest, ToLowerIsAscii) { EXPECT_EQ(ToLower("HCCL_Algo"), "hccl_algo"); }

}  // namespace
}  // namespace anxin
