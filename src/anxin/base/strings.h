// Small text helpers shared by every module: trimming, splitting, case,
// strict number parsing of tokens found in /proc, /sys, tool output and
// configuration values, byte counts for people, UTF-8 checks and XML escaping.
//
//   std::string_view v = Trim("  42 \n");                    // "42"
//   std::optional<int64_t> n = ParseInt(v);                   // 42
//   std::optional<double> f = ParseDouble("0.25");            // 0.25
//   std::string size = FormatBytes(1288490189);               // "1.20 GiB"
//   std::string exact = FormatBytes(65536, ByteUnits::kExact);  // "64 KiB"
//   uint64_t hbm = 64 * kGiB;                                  // 68719476736
//   double shown = ToMiB(3 * kMiB / 2);                        // 1.5
//   std::string text = "cpu0\ncpu1\n";
//   for (std::string_view line : SplitLines(text)) std::puts(std::string(line).c_str());
//   std::vector<std::string_view> words = SplitWords("a  b\tc");   // "a", "b", "c"
//   bool same = EqualsIgnoreCase("Content-Length", "content-length");  // true
//   size_t len = Utf8SequenceLength("\xc3\xa9!", 0);            // 2 (U+00E9)
//   std::string xml = XmlEscape("a < \"b\"");                  // "a &lt; &quot;b&quot;"
//   std::string b = Base64Encode("hi");                        // "aGk="
//   std::optional<std::string> raw = Base64Decode(b);          // "hi"
//
// Thread safety: pure functions.
#ifndef ANXIN_BASE_STRINGS_H_
#define ANXIN_BASE_STRINGS_H_

#include <cstddef>
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
// A whole (trimmed) token as a finite decimal number ("3", "-0.5", "1e-3");
// nullopt for anything else: trailing text, a leading '+', "inf", "nan",
// hexadecimal, out of range.
std::optional<double> ParseDouble(std::string_view s);

// Binary byte units, and a count of bytes in them for display.
inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr double ToMiB(double bytes) { return bytes / static_cast<double>(kMiB); }
constexpr double ToGiB(double bytes) { return bytes / static_cast<double>(kGiB); }

// How FormatBytes writes a count.
enum class ByteUnits {
  // The largest binary unit up to GiB the count reaches, rounded: "1.20 GiB",
  // "512.0 MiB", "1.5 KiB", "1000 B". For sizes read by people.
  kRounded,
  // The largest binary unit up to TiB that divides the count exactly:
  // "64 KiB", "3 GiB", "1000 B", "1536 B". For message sizes and block sizes,
  // where the exact value matters.
  kExact,
};
std::string FormatBytes(uint64_t bytes, ByteUnits units = ByteUnits::kRounded);
// ASCII lower case.
std::string ToLower(std::string_view s);
// True when a and b differ at most in the case of ASCII letters (HTTP header
// names, tokens); other bytes compare exactly, whatever the locale.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Text for XML and HTML, in element content and in quoted attribute values:
// '<', '>', '&' and '"' become entities; every other byte is kept.
std::string XmlEscape(std::string_view s);

// Standard base64 (RFC 4648 section 4, with '=' padding), as JSON APIs such
// as etcd's carry bytes.
std::string Base64Encode(std::string_view bytes);
// nullopt when s is not padded standard base64 (a length not a multiple of
// 4, a byte outside the alphabet, padding in the middle).
std::optional<std::string> Base64Decode(std::string_view s);

// Length (1..4) of the well-formed UTF-8 sequence that starts at s[i]; 0 when
// the bytes there are not one: a stray continuation byte, a sequence cut off
// by the end of s, an overlong form, a surrogate (U+D800..U+DFFF) or a code
// point above U+10FFFF. REQUIRES: i < s.size().
// Inline because libanxin_sdk.so (through monitor/sdk_wire_format.h) uses it
// and links no anxin library.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
  return len;
}

}  // namespace anxin

#endif  // ANXIN_BASE_STRINGS_H_
