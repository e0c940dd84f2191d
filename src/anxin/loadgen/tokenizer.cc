#include "anxin/loadgen/tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "anxin/base/file.h"

namespace anxin::loadgen {
namespace {

using nlohmann::json;

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 "▁"

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the UTF-8 sequence starting with byte c (1 for stray bytes).
size_t Utf8Len(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

enum class CharClass { kLetter, kDigit, kSpace, kOther };

CharClass Classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
    return CharClass::kSpace;
  }
  return CharClass::kOther;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at the start of s, or 0.
size_t Contraction(std::string_view s) {
  if (s.size() < 2 || s[0] != '\'') return 0;
  auto lower = [&](size_t i) { return i < s.size() ? static_cast<char>(s[i] | 0x20) : '\0'; };
  char a = lower(1), b = lower(2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

// Splits text as GPT-2's pre-tokenizer pattern does, calling fn per piece.
template <typename Fn>
void SplitPieces(std::string_view text, Fn fn) {
  size_t i = 0, n = text.size();
  auto cls = [&](size_t k) { return Classify(static_cast<unsigned char>(text[k])); };
  while (i < n) {
    size_t start = i;
    if (size_t c = Contraction(text.substr(i))) {
      fn(text.substr(i, c));
      i += c;
      continue;
    }
    CharClass c0 = cls(i);
    if (c0 == CharClass::kSpace) {
      size_t j = i;
      while (j < n && cls(j) == CharClass::kSpace) ++j;
      if (j < n && j - i >= 1 && text[j - 1] == ' ') {
        // The last space joins the word after it.
        if (j - 1 > i) fn(text.substr(i, j - 1 - i));
        i = j - 1;
      } else {
        fn(text.substr(i, j - i));
        i = j;
        continue;
      }
      start = i;
      ++i;  // the joining space
      c0 = cls(i);
    }
    CharClass run = c0;
    while (i < n && cls(i) == run) ++i;
    fn(text.substr(start, i - start));
  }
}

}  // namespace

Result<Tokenizer> Tokenizer::Load(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{1} << 30));
  return FromJson(text, path);
}

Result<Tokenizer> Tokenizer::FromJson(std::string_view json_text, const std::string& name) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(name + ": not a JSON object (expected a Hugging Face tokenizer.json)");
  }
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_object()) {
    return InvalidArgument(name + ": no \"model\" object (expected a Hugging Face tokenizer.json)");
  }
  std::string type = model->value("type", "BPE");
  if (type != "BPE") {
    return InvalidArgument(
        fmt::format("{}: model type {} is not supported; only BPE tokenizers can count tokens here "
                    "(leave out --tokenizer to estimate counts instead)",
                    name, type));
  }
  Tokenizer t;
  t.name_ = name;
  auto vocab = model->find("vocab");
  auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object() || merges == model->end() ||
      !merges->is_array()) {
    return InvalidArgument(name + ": BPE model without vocab and merges");
  }
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (it.value().is_number_integer()) t.vocab_[it.key()] = it.value().get<int>();
  }
  int rank = 0;
  for (const json& m : *merges) {
    std::string key;
    if (m.is_string()) {
      key = m.get<std::string>();
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      key = m[0].get<std::string>() + " " + m[1].get<std::string>();
    } else {
      return InvalidArgument(
          fmt::format("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", name, rank));
    }
    t.merge_rank_.emplace(std::move(key), rank++);
  }
  t.byte_fallback_ = model->value("byte_fallback", false);
  // Byte-level unless the normalizer or pre-tokenizer uses the metaspace.
  std::string norm = doc.contains("normalizer") ? doc["normalizer"].dump() : "";
  std::string pre = doc.contains("pre_tokenizer") ? doc["pre_tokenizer"].dump() : "";
  bool metaspace = pre.find("Metaspace") != std::string::npos ||
                   norm.find(std::string(kMetaspace)) != std::string::npos ||
                   norm.find("\\u2581") != std::string::npos;
  t.byte_level_ = !metaspace;
  t.prepend_space_ = metaspace && (norm.find("Prepend") != std::string::npos ||
                                   pre.find("\"prepend_scheme\":\"always\"") != std::string::npos ||
                                   pre.find("\"add_prefix_space\":true") != std::string::npos);
  // GPT-2's byte-to-character table: printable bytes stand for themselves,
  // the rest map to U+0100 upwards in order.
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    t.byte_map_[b] = Utf8(printable ? static_cast<uint32_t>(b) : next++);
  }
  return t;
}

int64_t Tokenizer::Bpe(std::string_view mapped) const {
  std::vector<std::string> syms;
  for (size_t i = 0; i < mapped.size();) {
    size_t len = std::min(Utf8Len(static_cast<unsigned char>(mapped[i])), mapped.size() - i);
    syms.emplace_back(mapped.substr(i, len));
    i += len;
  }
  std::string key;
  while (syms.size() > 1) {
    int best = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      key.assign(syms[i]).append(" ").append(syms[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && (best < 0 || it->second < best)) {
        best = it->second;
        best_at = i;
      }
    }
    if (best < 0) break;
    std::string left = syms[best_at], right = syms[best_at + 1];
    std::vector<std::string> merged;
    merged.reserve(syms.size());
    for (size_t i = 0; i < syms.size(); ++i) {
      if (i + 1 < syms.size() && syms[i] == left && syms[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(std::move(syms[i]));
      }
    }
    syms = std::move(merged);
  }
  int64_t count = 0;
  for (const std::string& s : syms) {
    // A symbol outside the vocabulary is spelled in byte tokens with byte
    // fallback, or is one unknown token.
    count += (byte_fallback_ && !vocab_.contains(s)) ? static_cast<int64_t>(s.size()) : 1;
  }
  return count;
}

int64_t Tokenizer::CountPiece(std::string_view piece) const {
  if (auto it = cache_.find(std::string(piece)); it != cache_.end()) return it->second;
  std::string mapped;
  if (byte_level_) {
    for (unsigned char c : piece) mapped += byte_map_[c];
  } else {
    mapped.assign(piece);
  }
  int64_t n = Bpe(mapped);
  if (cache_.size() < (1u << 20)) cache_.emplace(std::string(piece), n);
  return n;
}

int64_t Tokenizer::Count(std::string_view text) const {
  int64_t total = 0;
  if (byte_level_) {
    SplitPieces(text, [&](std::string_view p) { total += CountPiece(p); });
    return total;
  }
  std::string s = prepend_space_ ? std::string(kMetaspace) : std::string();
  for (char c : text) {
    if (c == ' ') {
      s += kMetaspace;
    } else {
      s += c;
    }
  }
  size_t start = 0;
  while (start < s.size()) {
    size_t next = s.find(kMetaspace, start + 1);
    if (next == std::string::npos) next = s.size();
    total += CountPiece(std::string_view(s).substr(start, next - start));
    start = next;
  }
  return total;
}

}  // namespace anxin::loadgen
