// Small text helpers shared by every module: trimming, splitting, case and
// strict integer parsing of tokens found in /proc, /sys, tool output and
// configuration values.
//
//   std::string_view v = Trim("  42 \n");                    // "42"
//   std::optional<int64_t> n = ParseInt(v);                   // 42
//   std::string text = "cpu0\ncpu1\n";
//   for (std::string_view line : SplitLines(text)) std::puts(std::string(line).c_str());
//   std::vector<std::string_view> words = SplitWords("a  b\tc");   // "a", "b", "c"
//
// Thread safety: pure functions.
#ifndef ANXIN_BASE_STRINGS_H_
#define ANXIN_BASE_STRINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anxin {

// Without leading and trailing white space (space, \t, \n, \r, \v, \f) and
// trailing NUL bytes (sysfs values sometimes end in one).
std::string_view Trim(std::string_view s);
// Lines without their '\n' (and a '\r' before it); no empty last line for
// text that ends in '\n'.
std::vector<std::string_view> SplitLines(std::string_view text);
// Splits on runs of spaces and tabs; no empty tokens.
std::vector<std::string_view> SplitWords(std::string_view s);
// Splits on one character; keeps empty fields.
std::vector<std::string_view> Split(std::string_view s, char sep);
// A whole (trimmed) token as a base-10 integer (or base 16 with "0x");
// nullopt otherwise.
std::optional<int64_t> ParseInt(std::string_view s);
// ASCII lower case.
std::string ToLower(std::string_view s);

}  // namespace anxin

#endif  // ANXIN_BASE_STRINGS_H_
