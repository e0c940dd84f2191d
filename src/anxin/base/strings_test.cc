#include "anxin/base/strings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

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

TEST(StringsTest, ParseDoubleIsStrict) {
  EXPECT_EQ(ParseDouble("0.25"), 0.25);
  EXPECT_EQ(ParseDouble(" -3 \n"), -3.0);
  EXPECT_EQ(ParseDouble("1e-3"), 1e-3);
  EXPECT_EQ(ParseDouble("12"), 12.0);
  EXPECT_FALSE(ParseDouble(""));
  EXPECT_FALSE(ParseDouble("  "));
  EXPECT_FALSE(ParseDouble("0.5x"));
  EXPECT_FALSE(ParseDouble("+1"));
  EXPECT_FALSE(ParseDouble("inf"));
  EXPECT_FALSE(ParseDouble("nan"));
  EXPECT_FALSE(ParseDouble("1e999"));
  EXPECT_FALSE(ParseDouble("1 2"));
  EXPECT_FALSE(ParseDouble("1,5"));
  EXPECT_FALSE(ParseDouble("."));
}

TEST(StringsTest, FormatBytesRounded) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(FormatBytes(1288490189), "1.20 GiB");
  EXPECT_EQ(FormatBytes(80ull << 30), "80.00 GiB");
  EXPECT_EQ(FormatBytes(3ull << 40), "3072.00 GiB");
}

TEST(StringsTest, FormatBytesExact) {
  EXPECT_EQ(FormatBytes(8, ByteUnits::kExact), "8 B");
  EXPECT_EQ(FormatBytes(1000, ByteUnits::kExact), "1000 B");
  EXPECT_EQ(FormatBytes(1536, ByteUnits::kExact), "1536 B");
  EXPECT_EQ(FormatBytes(64 << 10, ByteUnits::kExact), "64 KiB");
  EXPECT_EQ(FormatBytes(1 << 20, ByteUnits::kExact), "1 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30, ByteUnits::kExact), "3 GiB");
  EXPECT_EQ(FormatBytes(2048ull << 40, ByteUnits::kExact), "2048 TiB");
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

TEST(StringsTest, EqualsIgnoreCaseFoldsAsciiLettersOnly) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-LENGTH"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("chunked", "chunke"));
  EXPECT_FALSE(EqualsIgnoreCase("close", "clone"));
  // '@' and '`' sit next to the letters; only letters fold.
  EXPECT_FALSE(EqualsIgnoreCase("@", "`"));
  EXPECT_FALSE(EqualsIgnoreCase("[", "{"));
  // Bytes above ASCII compare exactly (no locale folding of U+00C9/U+00E9).
  EXPECT_FALSE(EqualsIgnoreCase("\xc3\x89", "\xc3\xa9"));
}

TEST(StringsTest, XmlEscapeReplacesMarkupCharacters) {
  EXPECT_EQ(XmlEscape("t <&> \"q\" 'a'"), "t &lt;&amp;&gt; &quot;q&quot; 'a'");
  EXPECT_EQ(XmlEscape("&amp;"), "&amp;amp;");
  EXPECT_EQ(XmlEscape(""), "");
  EXPECT_EQ(XmlEscape("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(StringsTest, Utf8SequenceLengthAcceptsEachWellFormedLength) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength(std::string_view("\0", 1), 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc2\x80", 0), 2u);          // U+0080, the smallest 2-byte
  EXPECT_EQ(Utf8SequenceLength("\xdf\xbf", 0), 2u);          // U+07FF
  EXPECT_EQ(Utf8SequenceLength("\xe0\xa0\x80", 0), 3u);      // U+0800
  EXPECT_EQ(Utf8SequenceLength("\xed\x9f\xbf", 0), 3u);      // U+D7FF, below the surrogates
  EXPECT_EQ(Utf8SequenceLength("\xee\x80\x80", 0), 3u);      // U+E000, above them
  EXPECT_EQ(Utf8SequenceLength("\xf0\x90\x80\x80", 0), 4u);  // U+10000
  EXPECT_EQ(Utf8SequenceLength("\xf4\x8f\xbf\xbf", 0), 4u);  // U+10FFFF, the largest
  EXPECT_EQ(Utf8SequenceLength("x\xe2\x82\xac", 1), 3u);     // at an offset
}

TEST(StringsTest, Utf8SequenceLengthRejectsOverlongForms) {
  EXPECT_EQ(Utf8SequenceLength("\xc0\xaf", 0), 0u);          // '/' in 2 bytes
  EXPECT_EQ(Utf8SequenceLength("\xc1\xbf", 0), 0u);          // U+007F in 2 bytes
  EXPECT_EQ(Utf8SequenceLength("\xe0\x9f\xbf", 0), 0u);      // U+07FF in 3 bytes
  EXPECT_EQ(Utf8SequenceLength("\xf0\x8f\xbf\xbf", 0), 0u);  // U+FFFF in 4 bytes
}

TEST(StringsTest, Utf8SequenceLengthRejectsSurrogatesAndBeyondU10FFFF) {
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);          // U+D800
  EXPECT_EQ(Utf8SequenceLength("\xed\xbf\xbf", 0), 0u);          // U+DFFF
  EXPECT_EQ(Utf8SequenceLength("\xf4\x90\x80\x80", 0), 0u);      // U+110000
  EXPECT_EQ(Utf8SequenceLength("\xf7\xbf\xbf\xbf", 0), 0u);      // U+1FFFFF
  EXPECT_EQ(Utf8SequenceLength("\xf8\x88\x80\x80\x80", 0), 0u);  // 5-byte lead
  EXPECT_EQ(Utf8SequenceLength("\xff", 0), 0u);
}

TEST(StringsTest, Utf8SequenceLengthRejectsTruncatedAndStrayBytes) {
  EXPECT_EQ(Utf8SequenceLength("\xc3", 0), 0u);  // cut off by the end
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82", 0), 0u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98", 0), 0u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 0), 3u);  // the same, whole
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82"
                               "a",
                               0),
            0u);                                         // a non-continuation byte inside
  EXPECT_EQ(Utf8SequenceLength("\x80", 0), 0u);          // a continuation byte alone
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 1), 0u);  // the middle of a sequence
}

TEST(StringsTest, Base64RoundTripsAndRejectsMalformedText) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("/anxin/run/job"), "L2FueGluL3J1bi9qb2I=");
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
  EXPECT_EQ(Base64Decode("Zm8="), "fo");
  EXPECT_EQ(Base64Decode("Zg=="), "f");
  EXPECT_EQ(Base64Decode(""), "");
  EXPECT_EQ(Base64Decode("Zm8"), std::nullopt);   // not a multiple of 4
  EXPECT_EQ(Base64Decode("Z=8="), std::nullopt);  // padding in the middle
  EXPECT_EQ(Base64Decode("Zm9v Zg=="), std::nullopt);
  EXPECT_EQ(Base64Decode("Zg==Zm9v"), std::nullopt);  // padding before the end
  EXPECT_EQ(Base64Decode("Z-8="), std::nullopt);      // URL alphabet is not accepted
}

}  // namespace
}  // namespace anxin
