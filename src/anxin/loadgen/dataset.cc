#include "anxin/loadgen/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::loadgen {
namespace {

using nlohmann::json;

Result<double> ParseNumber(std::string_view s, std::string_view whole) {
  std::optional<double> v = ParseDouble(s);
  if (!v || !std::isfinite(*v)) {
    return InvalidArgument(fmt::format(
        "'{}' in length distribution '{}' is not a number (use e.g. 128, uniform:64:256, "
        "normal:128:32 or lognormal:128:0.5)",
        s, whole));
  }
  return *v;
}

int64_t CountTokens(std::string_view text, const Tokenizer* tokenizer) {
  return tokenizer ? tokenizer->Count(text) : EstimateTokens(text);
}

// The prompt and, when the record says, the reply text or output length.
struct Record {
  std::string prompt;
  std::optional<std::string> reply;
  std::optional<int64_t> output_tokens;
};

Result<std::optional<Record>> ParseRecord(const json& j) {
  if (!j.is_object()) return InvalidArgument("record is not a JSON object");
  Record r;
  if (auto c = j.find("conversations"); c != j.end()) {
    if (!c->is_array()) return InvalidArgument("\"conversations\" is not an array");
    for (size_t i = 0; i < c->size(); ++i) {
      const json& turn = (*c)[i];
      if (!turn.is_object()) continue;
      std::string from = turn.value("from", turn.value("role", ""));
      if (from != "human" && from != "user") continue;
      auto v = turn.find("value");
      if (v == turn.end()) v = turn.find("content");
      if (v == turn.end() || !v->is_string()) continue;
      r.prompt = v->get<std::string>();
      if (i + 1 < c->size() && (*c)[i + 1].is_object()) {
        const json& next = (*c)[i + 1];
        auto nv = next.find("value");
        if (nv == next.end()) nv = next.find("content");
        if (nv != next.end() && nv->is_string()) r.reply = nv->get<std::string>();
      }
      break;
    }
    // ShareGPT has conversations that start with the model or lack a reply;
    // they make no request.
    if (r.prompt.empty() || !r.reply || r.reply->empty()) return std::optional<Record>();
    return std::optional<Record>(std::move(r));
  }
  if (auto m = j.find("messages"); m != j.end()) {
    if (!m->is_array()) return InvalidArgument("\"messages\" is not an array");
    for (const json& turn : *m) {
      if (turn.is_object() && turn.value("role", "") == "user" && turn.contains("content") &&
          turn["content"].is_string()) {
        r.prompt = turn["content"].get<std::string>();
      }
    }
    if (r.prompt.empty()) return InvalidArgument("\"messages\" has no user turn with text");
  } else if (auto p = j.find("prompt"); p != j.end() && p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (auto t = j.find("text"); t != j.end() && t->is_string()) {
    r.prompt = t->get<std::string>();
  } else {
    return InvalidArgument(
        "record has none of \"conversations\", \"messages\", \"prompt\" or \"text\"");
  }
  for (const char* key : {"output_tokens", "max_tokens", "output_len"}) {
    if (auto o = j.find(key); o != j.end()) {
      if (!o->is_number_integer() || o->get<int64_t>() < 1) {
        return InvalidArgument(fmt::format("\"{}\" is not a positive whole number", key));
      }
      r.output_tokens = o->get<int64_t>();
      break;
    }
  }
  return std::optional<Record>(std::move(r));
}

// Words that are one token each in common English BPE vocabularies (GPT-2,
// Llama, Qwen), with the leading space they carry inside a sentence.
constexpr const char* kWords[] = {
    "the",  "of",    "and",  "to",    "in",    "is",   "that",  "for",    "it",    "as",
    "was",  "with",  "be",   "by",    "on",    "not",  "he",    "this",   "are",   "or",
    "his",  "from",  "at",   "which", "but",   "have", "an",    "had",    "they",  "you",
    "were", "their", "one",  "all",   "we",    "can",  "her",   "has",    "there", "been",
    "if",   "more",  "when", "will",  "would", "who",  "so",    "no",     "time",  "people",
    "new",  "year",  "work", "day",   "world", "life", "state", "system", "water", "model"};

}  // namespace

int64_t LengthDist::Sample(std::mt19937_64& rng) const {
  double v = a;
  switch (kind) {
    case kFixed:
      break;
    case kUniform:
      v = std::uniform_real_distribution<double>(a, b + 1)(rng);
      v = std::floor(v);
      break;
    case kNormal:
      v = std::round(std::normal_distribution<double>(a, b)(rng));
      break;
    case kLognormal:
      v = std::round(std::lognormal_distribution<double>(std::log(a), b)(rng));
      break;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(v, 1e9)));
}

std::string LengthDist::ToString() const {
  switch (kind) {
    case kFixed:
      return fmt::format("{}", a);
    case kUniform:
      return fmt::format("uniform:{}:{}", a, b);
    case kNormal:
      return fmt::format("normal:{}:{}", a, b);
    case kLognormal:
      return fmt::format("lognormal:{}:{}", a, b);
  }
  return "?";
}

Result<LengthDist> ParseLengthDist(std::string_view text) {
  LengthDist d;
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    ANXIN_ASSIGN_OR_RETURN(d.a, ParseNumber(text, text));
    if (d.a < 1) return InvalidArgument(fmt::format("length '{}' must be at least 1", text));
    return d;
  }
  std::string_view kind = text.substr(0, colon);
  std::string_view rest = text.substr(colon + 1);
  size_t colon2 = rest.find(':');
  if (colon2 == std::string_view::npos) {
    return InvalidArgument(
        fmt::format("length distribution '{}' needs two numbers, e.g. {}:64:256", text, kind));
  }
  ANXIN_ASSIGN_OR_RETURN(d.a, ParseNumber(rest.substr(0, colon2), text));
  ANXIN_ASSIGN_OR_RETURN(d.b, ParseNumber(rest.substr(colon2 + 1), text));
  if (kind == "uniform") {
    d.kind = LengthDist::kUniform;
    if (d.a < 1 || d.b < d.a) {
      return InvalidArgument(fmt::format("'{}': need 1 <= low <= high", text));
    }
  } else if (kind == "normal") {
    d.kind = LengthDist::kNormal;
    if (d.a < 1 || d.b < 0)
      return InvalidArgument(fmt::format("'{}': need mean >= 1, std >= 0", text));
  } else if (kind == "lognormal") {
    d.kind = LengthDist::kLognormal;
    if (d.a < 1 || d.b < 0) {
      return InvalidArgument(fmt::format("'{}': need median >= 1, sigma >= 0", text));
    }
  } else {
    return InvalidArgument(fmt::format(
        "unknown length distribution '{}' (use a number, uniform:LOW:HIGH, normal:MEAN:STD or "
        "lognormal:MEDIAN:SIGMA)",
        kind));
  }
  return d;
}

int64_t EstimateTokens(std::string_view text) {
  return text.empty() ? 0 : static_cast<int64_t>((text.size() + 3) / 4);
}

Result<std::vector<Prompt>> LoadDataset(const std::string& path, const DatasetOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{4} << 30));
  std::vector<Record> records;
  auto add = [&](const json& j, std::string where) -> Status {
    auto r = ParseRecord(j);
    if (!r) return std::unexpected(std::move(r.error()).With(where));
    if (*r) records.push_back(std::move(**r));
    return Ok();
  };
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) {
      return InvalidArgument(path + ": starts with '[' but is not a valid JSON array");
    }
    for (size_t i = 0; i < doc.size(); ++i) {
      ANXIN_TRY(add(doc[i], fmt::format("{}: element {}", path, i)));
    }
  } else {
    size_t line_no = 0, start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      std::string_view line(text.data() + start, nl - start);
      ++line_no;
      start = nl + 1;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        return InvalidArgument(fmt::format(
            "{}:{}: not a JSON object (the dataset must hold one JSON record a line, or one "
            "JSON array)",
            path, line_no));
      }
      ANXIN_TRY(add(j, fmt::format("{}:{}", path, line_no)));
    }
  }
  if (records.empty()) {
    return InvalidArgument(path +
                           ": no usable records (each needs a prompt; ShareGPT "
                           "conversations also need a reply)");
  }
  std::mt19937_64 rng(options.seed);
  std::shuffle(records.begin(), records.end(), rng);
  std::vector<Prompt> prompts;
  prompts.reserve(static_cast<size_t>(std::max<int64_t>(0, options.count)));
  for (int64_t i = 0; i < options.count; ++i) {
    const Record& r = records[static_cast<size_t>(i) % records.size()];
    Prompt p;
    p.text = r.prompt;
    p.input_tokens = CountTokens(r.prompt, options.tokenizer);
    if (options.output) {
      p.output_tokens = options.output->Sample(rng);
    } else if (r.output_tokens) {
      p.output_tokens = *r.output_tokens;
    } else if (r.reply) {
      p.output_tokens = std::max<int64_t>(1, CountTokens(*r.reply, options.tokenizer));
    } else {
      p.output_tokens = 128;
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

std::vector<Prompt> SyntheticPrompts(int64_t count, const LengthDist& input,
                                     const LengthDist& output, uint64_t seed,
                                     const Tokenizer* tokenizer) {
  std::mt19937_64 rng(seed);
  constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);
  std::vector<Prompt> prompts;
  prompts.reserve(static_cast<size_t>(std::max<int64_t>(0, count)));
  for (int64_t i = 0; i < count; ++i) {
    Prompt p;
    int64_t words = input.Sample(rng);
    p.text.reserve(static_cast<size_t>(words) * 6);
    for (int64_t w = 0; w < words; ++w) {
      if (w > 0) p.text += ' ';
      p.text += kWords[rng() % kWordCount];
    }
    p.input_tokens = tokenizer ? tokenizer->Count(p.text) : words;
    p.output_tokens = output.Sample(rng);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace anxin::loadgen
