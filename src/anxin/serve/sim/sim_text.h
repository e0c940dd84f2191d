// The serving simulator's stand-in tokenizer and vocabulary: prompts become
// token ids deterministically (runs of letters or digits in pieces of at most
// four characters, each other non-space character alone, about one token per
// four characters of English, as real BPE vocabularies average), and
// generated tokens are words of a small fixed vocabulary.
//
//   std::vector<int32_t> ids = SimTokenize("Hello, world");   // 4 tokens
//   std::string_view w = SimWord(17);                         // " time"
//
// Thread safety: pure functions.
#ifndef ANXIN_SERVE_SIM_SIM_TEXT_H_
#define ANXIN_SERVE_SIM_SIM_TEXT_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace anxin::serve::sim {

std::vector<int32_t> SimTokenize(std::string_view text);
// Generated tokens: 0 .. SimVocabSize()-1, each a word with a leading space.
int SimVocabSize();
std::string_view SimWord(int32_t token);
// Logits over the vocabulary, most common words first (Zipf-like), from
// which generated tokens are sampled.
std::span<const float> SimLogits();

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_SIM_TEXT_H_
