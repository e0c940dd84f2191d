// How much a KV format costs in accuracy: K and V written through a paged,
// quantised KvCache, attention of many queries against it, and the outputs
// measured against float64 attention over the unquantised tensors with
// compare's metric kernel (cosine, max/mean absolute error).
//
//   KvTensors kv = SyntheticActivations({.tokens = 1024, .kv_heads = 2, .head_dim = 128});
//   KvFiles files;
//   files.keys = "k.npy";
//   files.values = "v.npy";
//   ANXIN_ASSIGN_OR_RETURN(KvTensors user, LoadKvTensors(files));
//   ANXIN_ASSIGN_OR_RETURN(AccuracyReport r,
//                          MeasureAccuracy(kv, {ParseKvFormat("int4").value()}, {}));
//   r.rows[0].attention.cosine;   // e.g. 0.9975
//
//   AccuracyRequest req;                // `anxin kv accuracy`: synthetic unless files
//   req.formats = "fp16,int4";
//   req.min_cosine = 0.99;
//   ANXIN_ASSIGN_OR_RETURN(AccuracyRun run, RunAccuracy(req));
//   std::fputs(AccuracyText(run).c_str(), stdout);   // or AccuracyJson(run).dump(2)
//
// Thread safety: pure functions.
#ifndef ANXIN_KV_KV_ACCURACY_H_
#define ANXIN_KV_KV_ACCURACY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/tensor_metrics.h"
#include "anxin/kv/kv_format.h"

namespace anxin::kv {

// One layer's keys and values, [tokens][kv_heads][head_dim] float32, and
// optionally queries [n][q_heads][head_dim].
struct KvTensors {
  int tokens = 0, kv_heads = 0, head_dim = 0;
  std::vector<float> keys, values;
  int query_count = 0, q_heads = 0;
  std::vector<float> queries;
  std::string source;  // "synthetic (outliers)", "k.npy + v.npy"
};

// Activations shaped like real models': keys with a few channels per head
// far larger than the rest (a fixed set, as in every token: the pattern KIVI
// and KVQuant report) and heavy-tailed (Student-t) elements; values
// heavy-tailed per element without channel structure; queries with the same
// outlier channels.
struct ActivationProfile {
  int tokens = 1024;
  int kv_heads = 2;
  int head_dim = 128;
  int q_heads = 8;
  int queries = 16;
  int outlier_channels = 4;     // per head
  float outlier_scale = 20.0f;  // their magnitude relative to the rest
  float tail_dof = 3.0f;        // Student-t degrees of freedom (smaller: heavier tails)
  uint64_t seed = 1;
};
KvTensors SyntheticActivations(const ActivationProfile& profile);

// Reads user-dumped K and V: .npy files, or tensors named in a safetensors
// file. Shapes: [tokens, head_dim] (one head), [tokens, kv_heads, head_dim],
// or [1, kv_heads, tokens, head_dim] (Hugging Face past_key_values);
// layout "thd" / "htd" / "bhtd" overrides the guess for 3-D and 4-D tensors.
// Any float dtype compare reads (float16, bfloat16, float32, float64).
struct KvFiles {
  std::string keys, values;  // .npy paths, or names in `safetensors`
  std::string safetensors;   // "" for .npy
  std::string queries;       // optional, same rules, [n, q_heads, head_dim]
  std::string layout;        // "" = guess from the rank
};
[[nodiscard]] Result<KvTensors> LoadKvTensors(const KvFiles& files);

struct FormatAccuracy {
  KvFormat format;
  double bits_per_value = 0;
  compare::Metrics attention;  // attention outputs vs float64 reference
  compare::Metrics keys;       // dequantised keys vs the originals
  compare::Metrics values;
};

struct AccuracyOptions {
  int block_tokens = 16;
  int queries = 16;  // used when the tensors bring none: queries are keys of
                     // evenly spaced tokens (a stand-in that shares the
                     // keys' outlier channels)
  int q_heads = 0;   // 0: kv_heads (when queries are generated)
};

struct AccuracyReport {
  std::string source;
  int tokens = 0, kv_heads = 0, head_dim = 0, queries = 0, q_heads = 0;
  std::vector<FormatAccuracy> rows;
};

[[nodiscard]] Result<AccuracyReport> MeasureAccuracy(const KvTensors& kv,
                                                     const std::vector<KvFormat>& formats,
                                                     const AccuracyOptions& options);

// `anxin kv accuracy` as flags give it: K/V from files when keys and values
// are named, else synthetic activations of the given shape (q_heads = 4 x
// kv_heads); formats comma-separated. Errors name the flag.
struct AccuracyRequest {
  KvFiles files{};
  std::string formats = "fp16,int8,int8-asym,int4,int4-asym,int4-asym:kivi";
  int block = 32, queries = 16, tokens = 1024, kv_heads = 2, head_dim = 128;
  uint64_t seed = 1;
  double min_cosine = 0;  // pass: every format's attention cosine >= this
};
struct AccuracyRun {
  AccuracyReport report;
  double min_cosine = 0;
  bool pass = true;
};
[[nodiscard]] Result<AccuracyRun> RunAccuracy(const AccuracyRequest& request);
// The report as `anxin kv accuracy` prints it: a table, or --json.
std::string AccuracyText(const AccuracyRun& run);
nlohmann::json AccuracyJson(const AccuracyRun& run);

}  // namespace anxin::kv

#endif  // ANXIN_KV_KV_ACCURACY_H_
