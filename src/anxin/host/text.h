// Small text helpers shared by the host readers: trimming, splitting and
// strict integer parsing of the tokens found in /proc, /sys and tool output.
//
//   auto n = ParseInt("  42 ");              // 42
//   for (auto line : SplitLines(text)) ...
#ifndef ANXIN_HOST_TEXT_H_
#define ANXIN_HOST_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anxin::host {

std::string_view Trim(std::string_view s);
std::vector<std::string_view> SplitLines(std::string_view text);
// Splits on runs of spaces and tabs; no empty tokens.
std::vector<std::string_view> SplitWords(std::string_view s);
// Splits on one character; keeps empty fields.
std::vector<std::string_view> Split(std::string_view s, char sep);
// A whole (trimmed) token as a base-10 integer (or base 16 with "0x"); nullopt otherwise.
std::optional<int64_t> ParseInt(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
std::string ToLower(std::string_view s);

}  // namespace anxin::host

#endif  // ANXIN_HOST_TEXT_H_
