// Token counting with a Hugging Face tokenizer.json (BPE models: byte-level
// ones such as GPT-2, Llama 3 and Qwen, and SentencePiece-style ones with a
// "▁" metaspace such as Llama 2), for servers that report no usage.
//
//   ANXIN_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load("tokenizer.json"));
//   int64_t n = tok.Count("Hello world");   // 2 with GPT-2's vocabulary
//
// The count follows the model's merges exactly within each pre-tokenized
// piece; the pre-tokenizer is a hand-written form of GPT-2's split pattern
// (contractions, letter runs, digit runs, punctuation runs, whitespace) that
// treats every non-ASCII byte as a letter, and a metaspace text is split
// before each "▁". Counts may differ from the reference tokenizer's by a
// token or two on text with unusual Unicode; special tokens in the text are
// counted as plain text.
//
// Thread safety: Count caches word results and must not be called from two
// threads at once.
#ifndef ANXIN_LOADGEN_TOKENIZER_H_
#define ANXIN_LOADGEN_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "anxin/base/error.h"

namespace anxin::loadgen {

class Tokenizer {
 public:
  // kNotFound for a missing file; kInvalidArgument for a file that is not a
  // tokenizer.json with a BPE model (the message says what was found).
  [[nodiscard]] static Result<Tokenizer> Load(const std::string& path);
  [[nodiscard]] static Result<Tokenizer> FromJson(std::string_view json_text,
                                                  const std::string& name);

  int64_t Count(std::string_view text) const;
  const std::string& name() const { return name_; }
  size_t vocab_size() const { return vocab_.size(); }

 private:
  int64_t CountPiece(std::string_view piece) const;
  int64_t Bpe(std::string_view mapped) const;

  std::string name_;
  bool byte_level_ = true;
  bool byte_fallback_ = false;
  bool prepend_space_ = false;
  std::unordered_map<std::string, int> vocab_;
  std::unordered_map<std::string, int> merge_rank_;  // "left right" -> rank
  std::string byte_map_[256];
  mutable std::unordered_map<std::string, int64_t> cache_;
};

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_TOKENIZER_H_
