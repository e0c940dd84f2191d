// The fast path of ParseChunk: one pass over the event's bytes that checks the
// JSON grammar (as nlohmann's parser does, UTF-8 included) and picks out the
// few fields a load tester needs, without building a document. Anything
// unusual (an error object, escapes in keys, duplicate fields, exponents,
// deep nesting, invalid JSON) returns nullopt, and the full parser decides.
#include <cstring>
#include <optional>

#include "anxin/loadgen/api.h"

namespace anxin::loadgen::internal {
namespace {

// What the value being scanned is, for the fields we want.
enum class Role {
  kOther,
  kRoot,
  kUsage,
  kChoices,
  kChoice,
  kDelta,         // choices[i].delta or .message
  kText,          // a string to count (text, content, reasoning_content, text_output)
  kPromptTokens,  // usage.prompt_tokens
  kCompletionTokens,
  kErrorField,   // root "error": nullopt unless null
  kObjectField,  // root "object": nullopt if "error"
};

class Scanner {
 public:
  Scanner(Api api, std::string_view s, bool keep_text, Chunk& out)
      : api_(api), s_(s), keep_(keep_text), out_(out) {}

  // False: not handled here.
  bool Run() {
    Ws();
    if (i_ >= s_.size() || s_[i_] != '{') return false;
    if (!Value(Role::kRoot, 0)) return false;
    Ws();
    return i_ == s_.size();
  }
  bool has_choices() const { return has_choices_; }
  bool has_text_output() const { return has_text_output_; }

 private:
  void Ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }

  bool Value(Role role, int depth) {
    if (depth > 64 || i_ >= s_.size()) return false;
    // Only "error": null stays on the fast path.
    if (role == Role::kErrorField) return Literal("null");
    char c = s_[i_];
    if (c == '{') return Object(role, depth);
    if (c == '[') return Array(role, depth);
    if (c == '"') {
      std::string* text = nullptr;
      std::string tmp;
      size_t bytes = 0;
      if (role == Role::kText && keep_) text = &tmp;
      if (!String(text, &bytes)) return false;
      if (role == Role::kText) {
        // The full parser joins a choice's texts in a fixed field order;
        // with several in one choice, leave the joining to it.
        if (keep_ && ++texts_in_choice_ > 1) return false;
        out_.text_bytes += bytes;
        if (keep_) out_.text += tmp;
      }
      if (role == Role::kObjectField && (raw_escaped_ || raw_ == "error")) return false;
      return true;
    }
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    return Number(role);
  }

  bool Literal(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }

  bool Number(Role role) {
    size_t start = i_;
    bool negative = false;
    if (i_ < s_.size() && s_[i_] == '-') {
      negative = true;
      ++i_;
    }
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return false;
    if (s_[i_] == '0') {
      ++i_;
    } else {
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    bool integer = true;
    if (i_ < s_.size() && s_[i_] == '.') {
      integer = false;
      ++i_;
      size_t digits = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == digits) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) return false;  // leave to the parser
    size_t len = i_ - start - (negative ? 1 : 0);
    if (integer && len > 18) return false;
    if (integer && (role == Role::kPromptTokens || role == Role::kCompletionTokens)) {
      int64_t v = 0;
      for (size_t k = start + (negative ? 1 : 0); k < i_; ++k) v = v * 10 + (s_[k] - '0');
      if (negative) v = -v;
      (role == Role::kPromptTokens ? out_.prompt_tokens : out_.completion_tokens) = v;
    }
    return true;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool Hex4(uint32_t* v) {
    if (i_ + 4 > s_.size()) return false;
    *v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = Hex(s_[i_ + static_cast<size_t>(k)]);
      if (h < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(h);
    }
    i_ += 4;
    return true;
  }
  static void Append(std::string* out, size_t* bytes, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
      b[0] = static_cast<char>(cp);
      n = 1;
    } else if (cp < 0x800) {
      b[0] = static_cast<char>(0xC0 | (cp >> 6));
      b[1] = static_cast<char>(0x80 | (cp & 0x3F));
      n = 2;
    } else if (cp < 0x10000) {
      b[0] = static_cast<char>(0xE0 | (cp >> 12));
      b[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<char>(0x80 | (cp & 0x3F));
      n = 3;
    } else {
      b[0] = static_cast<char>(0xF0 | (cp >> 18));
      b[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      b[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      b[3] = static_cast<char>(0x80 | (cp & 0x3F));
      n = 4;
    }
    *bytes += n;
    if (out) out->append(b, n);
  }

  // A string at s_[i_] == '"'; its decoded bytes are counted (and appended to
  // out when given). Sets raw_/raw_escaped_ for keys.
  bool String(std::string* out, size_t* bytes) {
    ++i_;
    size_t start = i_;
    raw_escaped_ = false;
    while (i_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        raw_ = s_.substr(start, i_ - start);
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        raw_escaped_ = true;
        if (++i_ >= s_.size()) return false;
        char e = s_[i_++];
        uint32_t cp = 0;
        switch (e) {
          case '"':
            cp = '"';
            break;
          case '\\':
            cp = '\\';
            break;
          case '/':
            cp = '/';
            break;
          case 'b':
            cp = '\b';
            break;
          case 'f':
            cp = '\f';
            break;
          case 'n':
            cp = '\n';
            break;
          case 'r':
            cp = '\r';
            break;
          case 't':
            cp = '\t';
            break;
          case 'u': {
            if (!Hex4(&cp)) return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo = 0;
              if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
              i_ += 2;
              if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            break;
          }
          default:
            return false;
        }
        Append(out, bytes, cp);
        continue;
      }
      // UTF-8, as RFC 3629 allows it.
      size_t n = c < 0x80                   ? 1
                 : (c >= 0xC2 && c <= 0xDF) ? 2
                 : (c >= 0xE0 && c <= 0xEF) ? 3
                 : (c >= 0xF0 && c <= 0xF4) ? 4
                                            : 0;
      if (n == 0 || i_ + n > s_.size()) return false;
      for (size_t k = 1; k < n; ++k) {
        unsigned char cc = static_cast<unsigned char>(s_[i_ + k]);
        unsigned char lo = 0x80, hi = 0xBF;
        if (k == 1) {
          if (c == 0xE0) lo = 0xA0;
          if (c == 0xED) hi = 0x9F;
          if (c == 0xF0) lo = 0x90;
          if (c == 0xF4) hi = 0x8F;
        }
        if (cc < lo || cc > hi) return false;
      }
      *bytes += n;
      if (out) out->append(s_.data() + i_, n);
      i_ += n;
    }
    return false;
  }

  // The role of the value under key `key` in an object of role `parent`;
  // `bit` gets a flag to detect a repeated field (0: not tracked).
  Role Child(Role parent, std::string_view key, unsigned* bit) {
    *bit = 0;
    auto field = [&](unsigned b, Role r) {
      *bit = b;
      return r;
    };
    switch (parent) {
      case Role::kRoot:
        if (key == "error") return field(1, Role::kErrorField);
        if (key == "object") return field(2, Role::kObjectField);
        if (key == "usage") return field(4, api_ == Api::kTriton ? Role::kOther : Role::kUsage);
        if (key == "choices") return field(8, Role::kChoices);
        if (key == "text_output")
          return field(16, api_ == Api::kTriton ? Role::kText : Role::kOther);
        return Role::kOther;
      case Role::kUsage:
        if (key == "prompt_tokens") return field(1, Role::kPromptTokens);
        if (key == "completion_tokens") return field(2, Role::kCompletionTokens);
        return Role::kOther;
      case Role::kChoice:
        if (api_ == Api::kCompletions && key == "text") return field(1, Role::kText);
        if (api_ == Api::kChat && key == "delta") return field(2, Role::kDelta);
        if (api_ == Api::kChat && key == "message") return field(4, Role::kDelta);
        return Role::kOther;
      case Role::kDelta:
        if (key == "content") return field(1, Role::kText);
        if (key == "reasoning_content") return field(2, Role::kText);
        return Role::kOther;
      default:
        return Role::kOther;
    }
  }

  bool Object(Role role, int depth) {
    ++i_;
    // Only these objects hold fields we want; "text": {...} counts nothing.
    if (role != Role::kRoot && role != Role::kUsage && role != Role::kChoice &&
        role != Role::kDelta) {
      role = Role::kOther;
    }
    if (role == Role::kChoice) texts_in_choice_ = 0;
    unsigned seen = 0;
    Ws();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    while (true) {
      Ws();
      if (i_ >= s_.size() || s_[i_] != '"') return false;
      size_t ignored = 0;
      if (!String(nullptr, &ignored)) return false;
      if (raw_escaped_ && role != Role::kOther) return false;  // keys compare unescaped
      unsigned bit = 0;
      Role child = role == Role::kOther ? Role::kOther : Child(role, raw_, &bit);
      if (bit) {
        if (seen & bit) return false;  // a repeated field: the last one wins there
        seen |= bit;
      }
      if (role == Role::kRoot && child == Role::kChoices) has_choices_ = true;
      if (role == Role::kRoot && bit == 16) has_text_output_ = true;
      Ws();
      if (i_ >= s_.size() || s_[i_] != ':') return false;
      ++i_;
      Ws();
      if (child == Role::kChoices && (i_ >= s_.size() || s_[i_] != '[')) {
        has_choices_ = false;
        child = Role::kOther;
      }
      if ((child == Role::kPromptTokens || child == Role::kCompletionTokens) && i_ < s_.size() &&
          s_[i_] == '"') {
        child = Role::kOther;
      }
      if (!Value(child, depth + 1)) return false;
      Ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') {
        ++i_;
        return true;
      }
      return false;
    }
  }

  bool Array(Role role, int depth) {
    ++i_;
    Role child = role == Role::kChoices ? Role::kChoice : Role::kOther;
    Ws();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    while (true) {
      Ws();
      Role r = child;
      if (r == Role::kChoice && (i_ >= s_.size() || s_[i_] != '{')) r = Role::kOther;
      if (!Value(r, depth + 1)) return false;
      Ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == ']') {
        ++i_;
        return true;
      }
      return false;
    }
  }

  Api api_;
  std::string_view s_;
  size_t i_ = 0;
  bool keep_;
  Chunk& out_;
  std::string_view raw_;
  bool raw_escaped_ = false;
  int texts_in_choice_ = 0;
  bool has_choices_ = false;
  bool has_text_output_ = false;
};

}  // namespace

std::optional<Chunk> FastParseChunk(Api api, std::string_view data, bool keep_text) {
  Chunk c;
  Scanner scanner(api, data, keep_text, c);
  if (!scanner.Run()) return std::nullopt;
  if (api == Api::kTriton) {
    if (!scanner.has_text_output()) return std::nullopt;  // malformed: the parser says why
    return c;
  }
  if (!scanner.has_choices()) return std::nullopt;
  return c;
}

}  // namespace anxin::loadgen::internal
