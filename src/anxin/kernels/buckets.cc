#include "anxin/kernels/buckets.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>

#include "anxin/base/line_reader.h"
#include "anxin/base/strings.h"

namespace anxin::kernels {
namespace {

// A length and how many sequences have it, before they are histogrammed.
struct Entry {
  int64_t length;
  uint64_t count;
};

std::string Excerpt(std::string_view s) {
  std::string e(s.substr(0, 40));
  if (s.size() > 40) e += "...";
  return e;
}

// One non-negative integer; names line and text in the error.
Result<int64_t> ParseLength(std::string_view field, const std::string& where) {
  field = Trim(field);
  if (field.empty()) return InvalidArgument(where + ": empty field where a length belongs");
  int64_t v = 0;
  const char* end = field.data() + field.size();
  auto [p, ec] = std::from_chars(field.data(), end, v);
  if (ec == std::errc::result_out_of_range)
    return InvalidArgument(where + ": '" + Excerpt(field) + "' is too large for a length");
  if (ec != std::errc() || p != end) {
    // 1834.0 is a whole number written as a float (pandas writes them so).
    double d = 0;
    auto [q, ec2] = std::from_chars(field.data(), end, d);
    if (ec2 == std::errc() && q == end && std::isfinite(d) && d == std::floor(d) && d < 9e15) {
      v = static_cast<int64_t>(d);
    } else {
      return InvalidArgument(where + ": '" + Excerpt(field) +
                             "' is not a number: give one whole number of tokens");
    }
  }
  if (v < 0)
    return InvalidArgument(where + ": '" + Excerpt(field) +
                           "' is negative: lengths count tokens, 0 or more");
  return v;
}

// The fields a JSON Lines record gives its length in, in the order they are
// looked for: a number, else the token ids themselves.
constexpr std::string_view kNumberKeys[] = {"length",   "len",     "num_tokens",
                                            "n_tokens", "seq_len", "sequence_length"};
constexpr std::string_view kTokenKeys[] = {"input_ids", "token_ids", "tokens", "ids"};
constexpr int kNumberKeyCount = static_cast<int>(std::size(kNumberKeys));
constexpr int kKeyCount = kNumberKeyCount + static_cast<int>(std::size(kTokenKeys));

Result<int64_t> JsonLength(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": not a JSON object");
  for (std::string_view key : kNumberKeys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_number_integer()) {
      int64_t v = it->get<int64_t>();
      if (v < 0)
        return InvalidArgument(
            fmt::format("{}: \"{}\" is {}: lengths count tokens, 0 or more", where, key, v));
      return v;
    }
    if (it->is_number_float())
      return ParseLength(it->dump(), where + ": \"" + std::string(key) + "\"");
    return InvalidArgument(fmt::format("{}: \"{}\" is {}, not a whole number of tokens", where, key,
                                       Excerpt(it->dump())));
  }
  for (std::string_view key : kTokenKeys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_array())
      return InvalidArgument(fmt::format("{}: \"{}\" is not an array of token ids", where, key));
    return static_cast<int64_t>(it->size());
  }
  return InvalidArgument(where +
                         ": no length field: give \"length\" (a number) or \"input_ids\" (the "
                         "token ids)");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A JSON Lines record's length read without building a document, where the
// text leaves no doubt: the whole line is valid JSON (as strict as
// nlohmann::json: UTF-8, escapes, number syntax, finite numbers), one object,
// and its length field (the last of duplicates, as nlohmann keeps) is a plain
// integer or an array (whose top-level elements are counted). Whatever it is
// not sure of (negative or fractional lengths, escapes in keys, surrogate
// escapes, numbers near the limits, deep nesting, errors) is nullopt, and
// the document parser decides, so the answer is always the document's.
class JsonLengthScanner {
 public:
  explicit JsonLengthScanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  std::optional<int64_t> Scan() {
    enum State : uint8_t { kAbsent, kKnown, kUnsure };
    State state[kKeyCount] = {};
    int64_t value[kKeyCount] = {};
    if (p_ == end_ || *p_ != '{') return std::nullopt;
    ++p_;
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
    } else {
      for (;;) {
        if (p_ == end_ || *p_ != '"') return std::nullopt;
        const char* key_begin = p_ + 1;
        bool escaped = false;
        if (!String(&escaped)) return std::nullopt;
        if (escaped) return std::nullopt;  // "\u006cength" is "length"
        const std::string_view key(key_begin, static_cast<size_t>(p_ - 1 - key_begin));
        SkipSpace();
        if (p_ == end_ || *p_ != ':') return std::nullopt;
        ++p_;
        SkipSpace();
        int slot = Slot(key);
        if (slot < 0) {
          if (!Value(1)) return std::nullopt;
        } else if (slot < kNumberKeyCount && p_ < end_ && IsDigit(*p_)) {
          std::optional<int64_t> v;
          if (!Number(&v)) return std::nullopt;
          state[slot] = v ? kKnown : kUnsure;
          value[slot] = v.value_or(0);
        } else if (slot >= kNumberKeyCount && p_ < end_ && *p_ == '[') {
          if (!Array(1, &value[slot])) return std::nullopt;
          state[slot] = kKnown;
        } else {
          if (!Value(1)) return std::nullopt;
          state[slot] = kUnsure;
        }
        SkipSpace();
        if (p_ == end_) return std::nullopt;
        if (*p_ == ',') {
          ++p_;
          SkipSpace();
          continue;
        }
        if (*p_ != '}') return std::nullopt;
        ++p_;
        break;
      }
    }
    SkipSpace();
    if (p_ != end_) return std::nullopt;
    // JsonLength's order: the first number field present, else the first token field.
    for (int group = 0; group < 2; ++group) {
      for (int i = group == 0 ? 0 : kNumberKeyCount; i < (group == 0 ? kNumberKeyCount : kKeyCount);
           ++i) {
        if (state[i] == kAbsent) continue;
        if (state[i] == kKnown) return value[i];
        return std::nullopt;
      }
    }
    return std::nullopt;  // no length field: the document parser words the error
  }

 private:
  static constexpr int kMaxDepth = 64;

  static int Slot(std::string_view key) {
    for (int i = 0; i < kNumberKeyCount; ++i)
      if (key == kNumberKeys[i]) return i;
    for (int i = kNumberKeyCount; i < kKeyCount; ++i)
      if (key == kTokenKeys[i - kNumberKeyCount]) return i;
    return -1;
  }

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  // At '"': past the closing quote. escaped: the string holds a backslash.
  bool String(bool* escaped) {
    ++p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        *escaped = true;
        if (end_ - p_ < 2) return false;
        switch (p_[1]) {
          case '"':
          case '\\':
          case '/':
          case 'b':
          case 'f':
          case 'n':
          case 'r':
          case 't':
            p_ += 2;
            continue;
          case 'u': {
            if (end_ - p_ < 6) return false;
            unsigned cp = 0;
            for (int i = 2; i < 6; ++i) {
              char h = p_[i];
              unsigned d = IsDigit(h)               ? static_cast<unsigned>(h - '0')
                           : (h >= 'a' && h <= 'f') ? static_cast<unsigned>(h - 'a' + 10)
                           : (h >= 'A' && h <= 'F') ? static_cast<unsigned>(h - 'A' + 10)
                                                    : 16u;
              if (d == 16u) return false;
              cp = cp * 16 + d;
            }
            // Surrogates must pair up; the document parser checks that.
            if (cp >= 0xd800 && cp <= 0xdfff) return false;
            p_ += 6;
            continue;
          }
          default:
            return false;
        }
      }
      if (c < 0x20) return false;  // control characters must be escaped
      if (c < 0x80) {
        ++p_;
        continue;
      }
      size_t n = Utf8SequenceLength(std::string_view(p_, static_cast<size_t>(end_ - p_)), 0);
      if (n == 0) return false;
      p_ += n;
    }
    return false;
  }

  // A JSON number. plain: its value when it is an integer of 1 to 18 digits
  // without a sign (certainly a non-negative int64 to the document parser).
  bool Number(std::optional<int64_t>* plain) {
    const char* begin = p_;
    if (*p_ == '-') ++p_;
    const char* digits = p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (IsDigit(*p_)) {
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    } else {
      return false;
    }
    const char* int_end = p_;
    bool integer = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ < end_ && IsDigit(*p_)) ++p_;
      integer = false;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ < end_ && IsDigit(*p_)) ++p_;
      integer = false;
    }
    if (integer && int_end - digits <= 18) {
      if (plain != nullptr && begin == digits) {
        int64_t v = 0;
        std::from_chars(digits, int_end, v);
        *plain = v;
      }
      return true;
    }
    // nlohmann::json reads what is not a 64-bit integer as a double and
    // rejects it when that overflows; be sure it does not.
    double d = 0;
    auto [q, ec] = std::from_chars(begin, p_, d);
    return ec == std::errc() && q == p_ && std::isfinite(d);
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  // At '[': past the ']', with the number of elements.
  bool Array(int depth, int64_t* count) {
    ++p_;
    SkipSpace();
    int64_t n = 0;
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      *count = 0;
      return true;
    }
    for (bool closed = false; !closed;) {
      if (!Value(depth + 1)) return false;
      ++n;
      if (!AfterElement(']', &closed)) return false;
    }
    *count = n;
    return true;
  }

  // At '{' below the top level: past the '}'.
  bool Object(int depth) {
    ++p_;
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      bool escaped = false;
      if (p_ == end_ || *p_ != '"' || !String(&escaped)) return false;
      SkipSpace();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      SkipSpace();
      if (!Value(depth + 1)) return false;
      bool closed = false;
      if (!AfterElement('}', &closed)) return false;
      if (closed) return true;
    }
  }

  // After an element of an array or object: past a ',' (and the space after
  // it), or past `close` with *closed set; false on anything else.
  bool AfterElement(char close, bool* closed) {
    SkipSpace();
    if (p_ == end_) return false;
    if (*p_ == ',') {
      ++p_;
      SkipSpace();
      return true;
    }
    if (*p_ != close) return false;
    ++p_;
    *closed = true;
    return true;
  }

  // Any value, skipped; at its first character.
  bool Value(int depth) {
    if (p_ == end_ || depth > kMaxDepth) return false;
    switch (*p_) {
      case '"': {
        bool escaped = false;
        return String(&escaped);
      }
      case '{':
        return Object(depth);
      case '[': {
        int64_t n = 0;
        return Array(depth, &n);
      }
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return (*p_ == '-' || IsDigit(*p_)) && Number(nullptr);
    }
  }

  const char* p_;
  const char* end_;
};

// Counts per length, gathered record by record: a dense table for lengths up
// to 2^24 (the usual case: nothing allocated per record), a list sorted at
// the end for longer ones.
class HistogramBuilder {
 public:
  void Add(int64_t length, uint64_t count) {
    ++records_;
    const auto l = static_cast<uint64_t>(length);
    if (l < dense_.size()) {
      dense_[l] += count;
    } else {
      AddOutsideTable(length, count);
    }
  }
  size_t records() const { return records_; }

  LengthHistogram Finish(std::string format) && {
    LengthHistogram h;
    h.format = std::move(format);
    for (size_t l = 0; l < dense_.size(); ++l) {
      if (dense_[l] == 0) continue;
      h.lengths.push_back(static_cast<int64_t>(l));
      h.counts.push_back(dense_[l]);
    }
    // All longer than the table's lengths, so they follow them.
    std::sort(sparse_.begin(), sparse_.end(),
              [](const Entry& a, const Entry& b) { return a.length < b.length; });
    for (const Entry& e : sparse_) {
      if (e.count == 0) continue;
      if (!h.lengths.empty() && h.lengths.back() == e.length) {
        h.counts.back() += e.count;
      } else {
        h.lengths.push_back(e.length);
        h.counts.push_back(e.count);
      }
    }
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      h.sequences += h.counts[i];
      h.tokens += h.counts[i] * static_cast<uint64_t>(h.lengths[i]);
    }
    return h;
  }

 private:
  static constexpr int64_t kDenseMax = int64_t{1} << 24;

  void AddOutsideTable(int64_t length, uint64_t count) {
    if (length > kDenseMax) {
      sparse_.push_back({length, count});
      return;
    }
    const auto l = static_cast<size_t>(length);
    dense_.resize(std::max(l + 1, std::min(2 * dense_.size(), static_cast<size_t>(kDenseMax) + 1)),
                  0);
    dense_[l] += count;
  }

  std::vector<uint64_t> dense_;
  std::vector<Entry> sparse_;
  size_t records_ = 0;
};

// The whole of s as a length when it is plainly one: digits only.
bool PlainLength(std::string_view s, int64_t* v) {
  if (s.empty() || !IsDigit(s.front()) || !IsDigit(s.back())) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

enum class Format { kUnknown, kNumbers, kCsv, kJsonl };

const char* FormatName(Format f) {
  switch (f) {
    case Format::kNumbers:
      return "numbers";
    case Format::kCsv:
      return "csv";
    case Format::kJsonl:
      return "jsonl";
    case Format::kUnknown:
      break;
  }
  return "";
}

// ParseLengths and ReadLengths: the lines of a lengths file, label naming it
// in errors. Each line first meets a fast path for a plain record of the
// file's format; anything else (blank lines, comments, the CSV header,
// white space, floats, negative numbers, odd JSON) takes the general path,
// which words every error.
Result<LengthHistogram> ParseLines(LineReader& lines, const std::string& label) {
  HistogramBuilder hist;
  Format format = Format::kUnknown;
  bool csv_header_allowed = true;
  std::string_view line;
  for (;;) {
    ANXIN_ASSIGN_OR_RETURN(bool more, lines.Next(line));
    if (!more) break;
    int64_t v = 0;
    if (format == Format::kNumbers) {
      if (PlainLength(line, &v)) {
        hist.Add(v, 1);
        continue;
      }
    } else if (format == Format::kCsv) {
      int64_t count = 0;
      size_t comma = line.find(',');
      if (comma != std::string_view::npos && PlainLength(line.substr(0, comma), &v) &&
          PlainLength(line.substr(comma + 1), &count)) {
        hist.Add(v, static_cast<uint64_t>(count));
        csv_header_allowed = false;
        continue;
      }
    }
    std::string_view t = Trim(line);
    if (t.empty() || t.front() == '#') continue;
    if (format == Format::kUnknown) {
      format = t.front() == '{'                        ? Format::kJsonl
               : t.find(',') != std::string_view::npos ? Format::kCsv
                                                       : Format::kNumbers;
    }
    // Built only on the error paths below, so the loop stays cheap.
    auto where = [&] { return fmt::format("{}:{}", label, lines.line_number()); };
    if (format == Format::kNumbers) {
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || p != t.data() + t.size() || v < 0) {
        ANXIN_ASSIGN_OR_RETURN(v, ParseLength(t, where()));
      }
      hist.Add(v, 1);
    } else if (format == Format::kCsv) {
      auto fields = Split(t, ',');
      if (fields.size() != 2)
        return InvalidArgument(fmt::format(
            "{}: {} fields: a histogram CSV has two, length and count", where(), fields.size()));
      if (csv_header_allowed && !Trim(fields[0]).empty() &&
          !std::isdigit(static_cast<unsigned char>(Trim(fields[0]).front()))) {
        if (Trim(fields[0]).front() != '-') {
          csv_header_allowed = false;
          continue;  // the header line
        }
      }
      csv_header_allowed = false;
      ANXIN_ASSIGN_OR_RETURN(int64_t len, ParseLength(fields[0], where() + ": length"));
      ANXIN_ASSIGN_OR_RETURN(int64_t count, ParseLength(fields[1], where() + ": count"));
      hist.Add(len, static_cast<uint64_t>(count));
    } else {
      if (std::optional<int64_t> len = JsonLengthScanner(t).Scan()) {
        hist.Add(*len, 1);
        continue;
      }
      ANXIN_ASSIGN_OR_RETURN(int64_t len, internal::JsonLineLengthByDocument(t, where()));
      hist.Add(len, 1);
    }
  }
  if (hist.records() == 0)
    return InvalidArgument(label +
                           ": no lengths in the file: give one number a line, a length,count "
                           "CSV or JSON Lines");
  LengthHistogram h = std::move(hist).Finish(FormatName(format));
  if (h.sequences == 0) return InvalidArgument(label + ": every count is 0: no sequences");
  return h;
}

// SMAWK row minima of the totally monotone matrix f(row, col) (leftmost
// minimum of each row), rows and cols ascending. O(rows + cols).
template <typename F>
void Smawk(const std::vector<int32_t>& rows, const std::vector<int32_t>& cols, const F& f,
           std::vector<int32_t>& argmin) {
  if (rows.empty()) return;
  std::vector<int32_t> stack;
  stack.reserve(rows.size());
  for (int32_t c : cols) {
    while (!stack.empty()) {
      int32_t r = rows[stack.size() - 1];
      if (f(r, stack.back()) <= f(r, c)) break;
      stack.pop_back();
    }
    if (stack.size() < rows.size()) stack.push_back(c);
  }
  std::vector<int32_t> odd;
  odd.reserve(rows.size() / 2);
  for (size_t i = 1; i < rows.size(); i += 2) odd.push_back(rows[i]);
  Smawk(odd, stack, f, argmin);
  size_t c = 0;
  for (size_t i = 0; i < rows.size(); i += 2) {
    int32_t row = rows[i];
    int32_t stop = i + 1 < rows.size() ? argmin[rows[i + 1]] : stack.back();
    int32_t best = stack[c];
    auto best_v = f(row, best);
    while (stack[c] != stop) {
      ++c;
      auto v = f(row, stack[c]);
      if (v < best_v) {
        best_v = v;
        best = stack[c];
      }
    }
    argmin[row] = best;
  }
}

int64_t AlignUp(int64_t v, int64_t align) { return v % align == 0 ? v : (v / align + 1) * align; }

std::string Thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string Lengths(const std::vector<int64_t>& b) {
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) s += (i ? " " : "") + std::to_string(b[i]);
  return s;
}

}  // namespace

Result<LengthHistogram> ParseLengths(std::string_view text, const std::string& label) {
  LineReader lines(text);
  return ParseLines(lines, label);
}

Result<LengthHistogram> ReadLengths(const std::string& path, std::string_view what) {
  ANXIN_ASSIGN_OR_RETURN(LineReader lines, LineReader::OpenInput(path, what));
  return ParseLines(lines, path);
}

LengthHistogram HistogramOf(std::span<const int64_t> lengths) {
  HistogramBuilder hist;
  for (int64_t l : lengths) hist.Add(l, 1);
  return std::move(hist).Finish("numbers");
}

Result<CostModel> ParseCostModel(std::string_view spec) {
  CostModel m;
  bool have_compile = false, have_throughput = false;
  for (std::string_view part : Split(spec, ',')) {
    part = Trim(part);
    size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument("'" + std::string(part) +
                             "' is not KEY=VALUE: give compile=SECONDS,throughput=TOKENS_PER_S");
    std::string key(Trim(part.substr(0, eq)));
    std::string_view value = Trim(part.substr(eq + 1));
    double v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || p != value.data() + value.size() || !std::isfinite(v) || v < 0)
      return InvalidArgument(key + "=" + std::string(value) + ": not a number 0 or more");
    if (key == "compile") {
      m.compile_seconds = v;
      have_compile = true;
    } else if (key == "throughput") {
      m.tokens_per_second = v;
      have_throughput = true;
    } else {
      return InvalidArgument("unknown key '" + key +
                             "': give compile=SECONDS,throughput=TOKENS_PER_S");
    }
  }
  if (!have_compile || !have_throughput)
    return InvalidArgument(
        "give both compile=SECONDS (one compilation) and throughput=TOKENS_PER_S");
  return m;
}

BucketScheme EvaluateBuckets(const LengthHistogram& h, std::string name,
                             std::vector<int64_t> boundaries, int64_t step_tokens) {
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  BucketScheme s;
  s.name = std::move(name);
  s.boundaries = std::move(boundaries);
  s.per_bucket.assign(s.boundaries.size(), 0);
  size_t b = 0;
  for (size_t i = 0; i < h.lengths.size(); ++i) {
    while (b < s.boundaries.size() && s.boundaries[b] < h.lengths[i]) ++b;
    if (b == s.boundaries.size()) {
      s.over_limit += h.counts[i];
      continue;
    }
    s.per_bucket[b] += h.counts[i];
    s.sequences += h.counts[i];
    s.real_tokens += h.counts[i] * static_cast<uint64_t>(h.lengths[i]);
    s.padded_tokens += h.counts[i] * static_cast<uint64_t>(s.boundaries[b] - h.lengths[i]);
  }
  for (uint64_t n : s.per_bucket) s.compiles += n > 0;
  uint64_t slots = s.real_tokens + s.padded_tokens;
  s.waste = slots ? static_cast<double>(s.padded_tokens) / static_cast<double>(slots) : 0;
  s.tokens_per_step = static_cast<double>(step_tokens) * (1 - s.waste);
  s.cost_tokens = static_cast<double>(s.padded_tokens);
  return s;
}

namespace internal {
std::optional<int64_t> ScanJsonLength(std::string_view line) {
  return JsonLengthScanner(line).Scan();
}

Result<int64_t> JsonLineLengthByDocument(std::string_view line, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded())
    return InvalidArgument(where + ": not valid JSON: each line holds one object");
  return JsonLength(j, where);
}

Result<int64_t> JsonLineLength(std::string_view line, const std::string& where) {
  if (std::optional<int64_t> len = ScanJsonLength(line)) return *len;
  return JsonLineLengthByDocument(line, where);
}

uint64_t BruteForcePadding(const std::vector<int64_t>& aligned, const std::vector<uint64_t>& counts,
                           const std::vector<uint64_t>& real_tokens, int k) {
  size_t n = aligned.size();
  std::vector<uint64_t> c(n + 1, 0), s(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    c[i + 1] = c[i] + counts[i];
    s[i + 1] = s[i] + real_tokens[i];
  }
  const uint64_t inf = std::numeric_limits<uint64_t>::max() / 4;
  std::vector<uint64_t> prev(n + 1, inf), cur(n + 1, inf);
  prev[0] = 0;
  uint64_t best = inf;
  for (int layer = 1; layer <= k; ++layer) {
    std::fill(cur.begin(), cur.end(), inf);
    for (size_t j = 1; j <= n; ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (prev[i] >= inf) continue;
        uint64_t w = static_cast<uint64_t>(aligned[j - 1]) * (c[j] - c[i]) - (s[j] - s[i]);
        cur[j] = std::min(cur[j], prev[i] + w);
      }
    }
    best = std::min(best, cur[n]);
    prev.swap(cur);
  }
  return best;
}
}  // namespace internal

Result<BucketPlan> PlanBuckets(const LengthHistogram& h, const BucketPlanOptions& options) {
  if (options.max_buckets < 1)
    return InvalidArgument(fmt::format("--max-buckets {}: give 1 or more", options.max_buckets));
  if (options.max_buckets > 4096)
    return InvalidArgument(fmt::format("--max-buckets {}: give at most 4096", options.max_buckets));
  if (options.align < 1)
    return InvalidArgument(fmt::format("--align {}: give 1 or more tokens", options.align));
  if (options.step_tokens < 1)
    return InvalidArgument(fmt::format("--step-tokens {}: give 1 or more", options.step_tokens));
  if (h.lengths.empty()) return InvalidArgument("no sequences to plan");
  for (int64_t b : options.hand_picked)
    if (b < 1)
      return InvalidArgument(fmt::format("--hand-picked {}: give lengths of 1 or more", b));

  if (options.truncate < 0)
    return InvalidArgument(
        fmt::format("--truncate {}: give a length of 1 or more (0: none)", options.truncate));
  BucketPlan plan;
  plan.options = options;
  if (options.truncate > 0 && h.lengths.back() > options.truncate) {
    // What a training pipeline with a context of `truncate` tokens sees.
    LengthHistogram cut;
    cut.format = h.format;
    uint64_t truncated = 0;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      if (h.lengths[i] <= options.truncate) {
        cut.lengths.push_back(h.lengths[i]);
        cut.counts.push_back(h.counts[i]);
      } else {
        truncated += h.counts[i];
      }
    }
    if (cut.lengths.empty() || cut.lengths.back() != options.truncate) {
      cut.lengths.push_back(options.truncate);
      cut.counts.push_back(0);
    }
    cut.counts.back() += truncated;
    for (size_t i = 0; i < cut.lengths.size(); ++i) {
      cut.sequences += cut.counts[i];
      cut.tokens += cut.counts[i] * static_cast<uint64_t>(cut.lengths[i]);
    }
    BucketPlanOptions rest = options;
    rest.truncate = 0;
    ANXIN_ASSIGN_OR_RETURN(BucketPlan p, PlanBuckets(cut, rest));
    p.options = options;
    p.truncated = truncated;
    return p;
  }
  plan.sequences = h.sequences;
  plan.tokens = h.tokens;
  plan.min_length = h.lengths.front();
  plan.max_length = h.lengths.back();
  plan.distinct_lengths = h.lengths.size();

  // Distinct aligned values (a bucket of length 0 holds nothing: round 0 up too).
  std::vector<int64_t> aligned;
  std::vector<uint64_t> count, real;
  for (size_t i = 0; i < h.lengths.size(); ++i) {
    int64_t a = AlignUp(std::max<int64_t>(h.lengths[i], 1), options.align);
    uint64_t tok = h.counts[i] * static_cast<uint64_t>(h.lengths[i]);
    if (!aligned.empty() && aligned.back() == a) {
      count.back() += h.counts[i];
      real.back() += tok;
    } else {
      aligned.push_back(a);
      count.push_back(h.counts[i]);
      real.push_back(tok);
    }
  }
  const size_t n = aligned.size();
  plan.distinct_aligned = n;
  const int kmax = static_cast<int>(std::min<size_t>(static_cast<size_t>(options.max_buckets), n));

  // dp_k[j]: least padding of the first j values in k groups; the group
  // (i, j] pads to aligned[j-1]: w(i, j) = aligned[j-1] * (C_j - C_i) - (S_j - S_i).
  // w obeys the quadrangle inequality (aligned ascends), so each layer's
  // row minima are monotone and SMAWK finds them in O(n).
  std::vector<uint64_t> c(n + 1, 0), s(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    c[i + 1] = c[i] + count[i];
    s[i + 1] = s[i] + real[i];
  }
  const uint64_t inf = std::numeric_limits<uint64_t>::max() / 4;
  std::vector<uint64_t> prev(n + 1, inf), cur(n + 1, inf);
  prev[0] = 0;
  std::vector<std::vector<int32_t>> choice(static_cast<size_t>(kmax));
  std::vector<int32_t> rows(n), cols(n);
  std::iota(rows.begin(), rows.end(), 1);
  std::iota(cols.begin(), cols.end(), 0);
  for (int k = 1; k <= kmax; ++k) {
    auto f = [&](int32_t j, int32_t i) -> uint64_t {
      if (i >= j || prev[static_cast<size_t>(i)] >= inf) return inf + static_cast<uint64_t>(i);
      size_t ju = static_cast<size_t>(j), iu = static_cast<size_t>(i);
      return prev[iu] + static_cast<uint64_t>(aligned[ju - 1]) * (c[ju] - c[iu]) - (s[ju] - s[iu]);
    };
    std::vector<int32_t>& arg = choice[static_cast<size_t>(k - 1)];
    arg.assign(n + 1, 0);
    Smawk(rows, cols, f, arg);
    cur[0] = inf;
    for (size_t j = 1; j <= n; ++j) cur[j] = std::min(f(static_cast<int32_t>(j), arg[j]), inf);
    plan.padding_by_k.push_back(cur[n]);
    prev.swap(cur);
  }

  // Bucket count: the most allowed, or the cheapest under the cost model.
  int best_k = kmax;
  if (options.cost) {
    double per = options.cost->TokensPerCompile();
    double best = std::numeric_limits<double>::infinity();
    for (int k = 1; k <= kmax; ++k) {
      double total = static_cast<double>(plan.padding_by_k[static_cast<size_t>(k - 1)]) + k * per;
      if (total < best) {
        best = total;
        best_k = k;
      }
    }
  }
  std::vector<int64_t> optimum;
  size_t j = n;
  for (int k = best_k; k >= 1 && j > 0; --k) {
    optimum.push_back(aligned[j - 1]);
    j = static_cast<size_t>(choice[static_cast<size_t>(k - 1)][j]);
  }
  std::reverse(optimum.begin(), optimum.end());

  std::vector<int64_t> pow2;
  for (int64_t b = std::max<int64_t>(1, options.align);; b *= 2) {
    pow2.push_back(b);
    if (b >= plan.max_length || b > (int64_t{1} << 61)) break;
  }
  // Only the powers of two that hold a sequence are compiled; listing the
  // empty ones below the shortest sequence would just be noise.
  plan.schemes.push_back(
      EvaluateBuckets(h, "hand-picked", options.hand_picked, options.step_tokens));
  BucketScheme p2 = EvaluateBuckets(h, "powers of two", pow2, options.step_tokens);
  std::vector<int64_t> used;
  for (size_t i = 0; i < p2.boundaries.size(); ++i)
    if (p2.per_bucket[i] > 0) used.push_back(p2.boundaries[i]);
  plan.schemes.push_back(EvaluateBuckets(h, "powers of two", used, options.step_tokens));
  plan.schemes.push_back(EvaluateBuckets(h, "optimum", optimum, options.step_tokens));
  if (options.cost) {
    for (BucketScheme& sc : plan.schemes)
      sc.cost_tokens = static_cast<double>(sc.padded_tokens) +
                       static_cast<double>(sc.compiles) * options.cost->TokensPerCompile();
  }
  return plan;
}

Result<BucketPlan> PlanBucketsForFile(const std::string& path, const BucketPlanOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(LengthHistogram h, ReadLengths(path));
  return PlanBuckets(h, options);
}

std::string BucketPlanText(const BucketPlan& plan) {
  std::string out = fmt::format(
      "{} sequences, {} tokens; lengths {}..{}, {} distinct ({} after aligning to {}): "
      "{} compilations without buckets\n\n",
      Thousands(plan.sequences), Thousands(plan.tokens), plan.min_length, plan.max_length,
      Thousands(plan.distinct_lengths), Thousands(plan.distinct_aligned), plan.options.align,
      Thousands(plan.distinct_lengths));
  bool cost = plan.options.cost.has_value();
  if (plan.truncated > 0)
    out += fmt::format("{} sequences longer than {} tokens cut to {} (--truncate)\n\n",
                       Thousands(plan.truncated), plan.options.truncate, plan.options.truncate);
  out += fmt::format("{:<15} {:>8} {:>7} {:>16} {:>7} {:>12}{}\n", "scheme", "compiles", "waste",
                     "padded tokens", "over", "tokens/step", cost ? "  cost (tokens)" : "");
  for (const BucketScheme& s : plan.schemes) {
    out += fmt::format("{:<15} {:>8} {:>6.2f}% {:>16} {:>7} {:>12.0f}{}\n", s.name, s.compiles,
                       100 * s.waste, Thousands(s.padded_tokens), Thousands(s.over_limit),
                       s.tokens_per_step, cost ? fmt::format("  {:>13.4g}", s.cost_tokens) : "");
  }
  out += "\nbuckets:\n";
  for (const BucketScheme& s : plan.schemes) {
    out += fmt::format("  {:<15} {}\n", s.name, Lengths(s.boundaries));
  }
  out += fmt::format(
      "\ntokens/step: real tokens in a step of {} padded tokens; over: sequences "
      "longer than the largest bucket (not counted in waste)\n",
      Thousands(static_cast<uint64_t>(plan.options.step_tokens)));
  return out;
}

nlohmann::json BucketPlanJson(const BucketPlan& plan) {
  nlohmann::json j;
  j["sequences"] = plan.sequences;
  j["tokens"] = plan.tokens;
  j["min_length"] = plan.min_length;
  j["max_length"] = plan.max_length;
  j["distinct_lengths"] = plan.distinct_lengths;
  j["distinct_aligned_lengths"] = plan.distinct_aligned;
  j["align"] = plan.options.align;
  j["max_buckets"] = plan.options.max_buckets;
  j["step_tokens"] = plan.options.step_tokens;
  j["truncate"] = plan.options.truncate;
  j["truncated"] = plan.truncated;
  if (plan.options.cost) {
    j["cost_model"] = {{"compile_seconds", plan.options.cost->compile_seconds},
                       {"tokens_per_second", plan.options.cost->tokens_per_second},
                       {"tokens_per_compile", plan.options.cost->TokensPerCompile()}};
  }
  j["padding_by_buckets"] = plan.padding_by_k;
  nlohmann::json schemes = nlohmann::json::array();
  for (const BucketScheme& s : plan.schemes) {
    nlohmann::json e;
    e["name"] = s.name;
    e["boundaries"] = s.boundaries;
    e["sequences_per_bucket"] = s.per_bucket;
    e["compiles"] = s.compiles;
    e["sequences"] = s.sequences;
    e["over_limit"] = s.over_limit;
    e["real_tokens"] = s.real_tokens;
    e["padded_tokens"] = s.padded_tokens;
    e["waste"] = s.waste;
    e["tokens_per_step"] = s.tokens_per_step;
    if (plan.options.cost) e["cost_tokens"] = s.cost_tokens;
    schemes.push_back(std::move(e));
  }
  j["schemes"] = std::move(schemes);
  return j;
}

}  // namespace anxin::kernels
