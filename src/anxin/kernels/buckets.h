// Sequence-length buckets: which padded shapes to compile so that a dataset's
// sequences waste the fewest padded tokens (docs/kernels.md, `anxin buckets plan`).
//
// A compiler for static shapes (TIK, XLA, torch.compile without dynamic
// shapes) compiles once per distinct sequence length. Padding every sequence
// up to the next of K bucket lengths caps the compilations at K and costs the
// padded tokens; PlanBuckets finds the K boundaries that minimise them,
// exactly, and sets them beside hand-picked buckets and powers of two.
//
//   ANXIN_ASSIGN_OR_RETURN(LengthHistogram h, ParseLengths("700\n1200\n3900\n", "lengths.txt"));
//   BucketPlanOptions opts;
//   opts.max_buckets = 2;
//   opts.align = 128;
//   ANXIN_ASSIGN_OR_RETURN(BucketPlan plan, PlanBuckets(h, opts));
//   // plan.schemes.back() is the optimum: boundaries {1280, 3968}, 1,536 padded tokens.
//   std::printf("%s", BucketPlanText(plan).c_str());
//
// Lengths files (format chosen per file from its first non-empty line):
//   one number a line                    "1834"
//   a histogram CSV (header optional)    "length,count" then "1834,12"
//   JSON Lines                           {"length": 1834} or {"input_ids": [1, 2, ...]}
//                                        (also "len", "num_tokens", "n_tokens", "tokens",
//                                        "token_ids", "ids")
// Errors name the file and line (kInvalidArgument).
//
// Thread safety: all functions are pure.
#ifndef ANXIN_KERNELS_BUCKETS_H_
#define ANXIN_KERNELS_BUCKETS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::kernels {

// Distinct lengths in ascending order with how many sequences have each.
struct LengthHistogram {
  std::vector<int64_t> lengths;
  std::vector<uint64_t> counts;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  std::string format;  // "numbers", "csv" or "jsonl"
};

// Parses a lengths file's text; label names it in errors ("lengths.txt:4:
// '-3' is negative: lengths count tokens, 0 or more").
[[nodiscard]] Result<LengthHistogram> ParseLengths(std::string_view text, const std::string& label);
// Reads and parses the file at path (what names the flag in errors), a block
// at a time (base/line_reader.h), without holding the whole file: 10 million
// lines take a fraction of a second (docs/kernels.md, "Speed"). JSON Lines
// records are scanned for their length field without building a document;
// only lines the scan is unsure of (escaped keys, fractional or negative
// lengths, invalid JSON, ...) go to nlohmann::json, so results and errors are
// the document parser's.
[[nodiscard]] Result<LengthHistogram> ReadLengths(const std::string& path,
                                                  std::string_view what = "--lengths");
// The histogram of raw lengths (each >= 0).
LengthHistogram HistogramOf(std::span<const int64_t> lengths);

// What a compilation costs, in padded tokens: compile_seconds of compiling
// while the device could have run tokens_per_second tokens.
struct CostModel {
  double compile_seconds = 0;
  double tokens_per_second = 0;
  double TokensPerCompile() const { return compile_seconds * tokens_per_second; }
};
// "compile=40,throughput=50000" (seconds per compilation, tokens per second).
[[nodiscard]] Result<CostModel> ParseCostModel(std::string_view spec);

struct BucketPlanOptions {
  int max_buckets = 3;          // K >= 1
  int64_t align = 128;          // boundaries are multiples of it (>= 1)
  int64_t step_tokens = 65536;  // padded tokens one step processes
  std::vector<int64_t> hand_picked = {4096, 8192, 16384};
  std::optional<CostModel> cost;  // pick K <= max_buckets by total cost
  int64_t truncate = 0;           // > 0: longer sequences are cut to this many tokens first
};

// One way of bucketing, evaluated on the histogram.
struct BucketScheme {
  std::string name;                  // "hand-picked", "powers of two", "optimum"
  std::vector<int64_t> boundaries;   // ascending bucket lengths
  std::vector<uint64_t> per_bucket;  // sequences in each bucket
  uint64_t sequences = 0;            // sequences that fit (length <= the largest bucket)
  uint64_t over_limit = 0;           // sequences longer than the largest bucket
  uint64_t real_tokens = 0;          // tokens of the sequences that fit
  uint64_t padded_tokens = 0;        // padding added to them
  uint64_t compiles = 0;             // buckets holding at least one sequence
  double waste = 0;                  // padded / (real + padded)
  double tokens_per_step = 0;        // real tokens in a step of step_tokens padded slots
  double cost_tokens = 0;            // padded + compiles * tokens per compile (with a cost model)
};

struct BucketPlan {
  BucketPlanOptions options;
  uint64_t sequences = 0, tokens = 0;
  int64_t min_length = 0, max_length = 0;
  uint64_t distinct_lengths = 0;      // compilations without buckets
  uint64_t distinct_aligned = 0;      // ... with lengths rounded up to align
  uint64_t truncated = 0;             // sequences cut to options.truncate
  std::vector<BucketScheme> schemes;  // hand-picked, powers of two, optimum (last)
  // Least padding with k = 1..max_buckets buckets (the optimum's curve).
  std::vector<uint64_t> padding_by_k;
};

// Evaluates the given boundaries (sorted, deduplicated) on h.
BucketScheme EvaluateBuckets(const LengthHistogram& h, std::string name,
                             std::vector<int64_t> boundaries, int64_t step_tokens);

// Exact minimum padding with at most max_buckets buckets whose lengths are
// multiples of align: dynamic programming over the sorted distinct (aligned)
// lengths, one SMAWK row-minima pass per bucket count, O(K * n).
[[nodiscard]] Result<BucketPlan> PlanBuckets(const LengthHistogram& h,
                                             const BucketPlanOptions& options);

// Reads the file at path and plans it (what `anxin buckets plan` runs).
[[nodiscard]] Result<BucketPlan> PlanBucketsForFile(const std::string& path,
                                                    const BucketPlanOptions& options);

std::string BucketPlanText(const BucketPlan& plan);
nlohmann::json BucketPlanJson(const BucketPlan& plan);

namespace internal {
// The length of one JSON Lines record (a trimmed line) where a scan of the
// text, without building a document, is certain of it; nullopt leaves the
// line to the document parser (invalid JSON, negative or fractional lengths,
// escaped keys, ...).
std::optional<int64_t> ScanJsonLength(std::string_view line);
// A record's length as ParseLengths reads it: the scan, else the document;
// where ("FILE:LINE") names the line in errors.
[[nodiscard]] Result<int64_t> JsonLineLength(std::string_view line, const std::string& where);
// The same from the document alone (nlohmann::json): the reference the scan
// must agree with.
[[nodiscard]] Result<int64_t> JsonLineLengthByDocument(std::string_view line,
                                                       const std::string& where);
// Least padding over all ways to cut sorted aligned values into <= k groups,
// by trying every cut (O(k * n^2)); tests check the planner against it.
uint64_t BruteForcePadding(const std::vector<int64_t>& aligned, const std::vector<uint64_t>& counts,
                           const std::vector<uint64_t>& real_tokens, int k);
}  // namespace internal

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_BUCKETS_H_
