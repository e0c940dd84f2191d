// Next-token sampling: temperature, top-k and top-p (nucleus), as inference
// servers apply them (temperature first, then top-k, then top-p over what is
// left, renormalised).
//
//   SamplingParams p{.temperature = 0.8f, .top_k = 50, .top_p = 0.95f};
//   ANXIN_TRY(ValidateSampling(p));
//   std::vector<float> logits(32000, 0.0f);   // one per vocabulary entry
//   logits[42] = 5.0f;
//   std::mt19937_64 rng(/*seed=*/7);
//   int token = SampleToken(logits, p, rng);
//
//   PreparedSampler s(logits, p);      // one distribution drawn many times
//   int t2 = s.Draw(rng);              // O(log vocab) a draw
//
// Thread safety: pure functions; a PreparedSampler may be shared (Draw is const).
#ifndef ANXIN_SERVE_SIM_SAMPLING_H_
#define ANXIN_SERVE_SIM_SAMPLING_H_

#include <random>
#include <span>
#include <utility>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::serve::sim {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (the largest logit)
  int top_k = 0;             // 0 or -1: no limit
  float top_p = 1.0f;        // (0, 1]
};

// kInvalidArgument naming the field: temperature < 0, top_p outside (0, 1],
// top_k < -1.
[[nodiscard]] Status ValidateSampling(const SamplingParams& params);

// The tokens that can be drawn, most likely first, with their probabilities
// (summing to 1). Ties in logits keep the lower token index first.
// REQUIRES: logits not empty, params valid.
std::vector<std::pair<int, double>> TruncatedDistribution(std::span<const float> logits,
                                                          const SamplingParams& params);

int SampleToken(std::span<const float> logits, const SamplingParams& params, std::mt19937_64& rng);

class PreparedSampler {
 public:
  PreparedSampler(std::span<const float> logits, const SamplingParams& params);
  int Draw(std::mt19937_64& rng) const;
  size_t candidates() const { return tokens_.size(); }

 private:
  std::vector<int> tokens_;
  std::vector<double> cdf_;
};

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_SAMPLING_H_
