#include "anxin/serve/sim/sim_text.h"

#include <array>
#include <cctype>
#include <cmath>

namespace anxin::serve::sim {
namespace {

constexpr std::array<std::string_view, 128> kWords = {
    " the",   " of",     " and",     " to",    " a",       " in",      " is",      " it",
    " that",  " for",    " was",     " on",    " are",     " with",    " as",      " be",
    " this",  " time",   " by",      " at",    " from",    " or",      " have",    " an",
    " they",  " which",  " one",     " you",   " were",    " all",     " we",      " can",
    " her",   " has",    " there",   " been",  " if",      " more",    " when",    " will",
    " would", " who",    " so",      " no",    " out",     " up",      " into",    " do",
    " any",   " your",   " what",    " has",   " about",   " than",    " only",    " other",
    " new",   " some",   " could",   " these", " two",     " may",     " first",   " then",
    " like",  " our",    " over",    " such",  " make",    " most",    " after",   " also",
    " did",   " many",   " before",  " must",  " through", " years",   " where",   " much",
    " your",  " way",    " well",    " down",  " should",  " because", " each",    " just",
    " those", " people", " how",     " too",   " little",  " state",   " good",    " very",
    " make",  " world",  " still",   " own",   " see",     " men",     " work",    " long",
    " get",   " here",   " between", " both",  " life",    " being",   " under",   " never",
    " day",   " same",   " another", " know",  " while",   " last",    " might",   " us",
    " great", " old",    " year",    " off",   " come",    " since",   " against", " go",
};

}  // namespace

std::vector<int32_t> SimTokenize(std::string_view text) {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 1);
  uint32_t h = 2166136261u;
  int run = 0;
  auto flush = [&] {
    if (run > 0) out.push_back(static_cast<int32_t>(h % 100000u) + 1000);
    h = 2166136261u;
    run = 0;
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      if (run == 4) flush();
      h = (h ^ c) * 16777619u;
      ++run;
    } else {
      flush();
      if (!std::isspace(c)) out.push_back(static_cast<int32_t>(c));
    }
  }
  flush();
  return out;
}

int SimVocabSize() { return static_cast<int>(kWords.size()); }

std::string_view SimWord(int32_t token) {
  if (token < 0 || token >= SimVocabSize()) return " ?";
  return kWords[token];
}

std::span<const float> SimLogits() {
  static const std::array<float, kWords.size()> logits = [] {
    std::array<float, kWords.size()> l{};
    for (size_t i = 0; i < l.size(); ++i) l[i] = -1.1f * std::log(static_cast<float>(i + 1));
    return l;
  }();
  return logits;
}

}  // namespace anxin::serve::sim
