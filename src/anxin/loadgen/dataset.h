// The prompts a load test sends: read from a JSONL (or JSON array) dataset,
// or made up with input and output lengths drawn from distributions.
//
//   ANXIN_ASSIGN_OR_RETURN(LengthDist out, ParseLengthDist("uniform:64:256"));
//   DatasetOptions opts{.count = 1000, .output = out, .seed = 1};
//   ANXIN_ASSIGN_OR_RETURN(std::vector<Prompt> p, LoadDataset("sharegpt.json", opts));
//   std::vector<Prompt> s = SyntheticPrompts(1000, *ParseLengthDist("512"), out, 1);
//
// Dataset records (one JSON object a line, or one JSON array of them):
//   {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}
//       ShareGPT: the first human turn is the prompt; the reply after it sets
//       the output length (tokens counted as below), unless --output-tokens.
//   {"prompt": "...", "output_tokens": 128}   plain; output_tokens optional
//   {"messages": [{"role": "user", "content": "..."}]}   the last user turn
// Token counts of text come from the tokenizer when one is given, else are
// estimated as one token per 4 bytes (the common rule of thumb for English
// BPE vocabularies).
//
// Thread safety: free functions; a Tokenizer is only read.
#ifndef ANXIN_LOADGEN_DATASET_H_
#define ANXIN_LOADGEN_DATASET_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/loadgen/tokenizer.h"

namespace anxin::loadgen {

struct Prompt {
  std::string text{};
  // Tokens in text (from the tokenizer, or estimated); the server's usage
  // chunk replaces it when there is one.
  int64_t input_tokens = 0;
  // max_tokens asked of the server.
  int64_t output_tokens = 0;
};

// A distribution of lengths in tokens, sampled as whole numbers >= 1.
struct LengthDist {
  enum Kind { kFixed, kUniform, kNormal, kLognormal };
  Kind kind = kFixed;
  double a = 128;  // fixed value; uniform low; normal mean; lognormal median
  double b = 0;    // uniform high; normal standard deviation; lognormal sigma
  int64_t Sample(std::mt19937_64& rng) const;
  std::string ToString() const;
};

// "128", "uniform:64:256", "normal:128:32", "lognormal:128:0.5".
[[nodiscard]] Result<LengthDist> ParseLengthDist(std::string_view text);

// One token per 4 bytes, at least 1 for non-empty text.
int64_t EstimateTokens(std::string_view text);

struct DatasetOptions {
  int64_t count = 0;
  // When set, every prompt asks for lengths from this distribution instead of
  // the length of the dataset's reply.
  std::optional<LengthDist> output{};
  uint64_t seed = 0;
  // Not owned; may be null.
  const Tokenizer* tokenizer = nullptr;
};

// count prompts from the file in a shuffled order (seeded), reusing records
// when the file has fewer. Errors name the file and line.
[[nodiscard]] Result<std::vector<Prompt>> LoadDataset(const std::string& path,
                                                      const DatasetOptions& options);

// count prompts of random common English words, sized so that each word is
// about one token, with lengths drawn from the two distributions (seeded).
std::vector<Prompt> SyntheticPrompts(int64_t count, const LengthDist& input,
                                     const LengthDist& output, uint64_t seed,
                                     const Tokenizer* tokenizer = nullptr);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_DATASET_H_
