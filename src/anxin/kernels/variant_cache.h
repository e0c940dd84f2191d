// A cache of compiled attention variants keyed by (bucket length, head
// dimension, dtype, mask), counting the compilations it performs: what a
// static-shape compiler pays per distinct shape, and what bucketing saves
// (docs/kernels.md, "Compiled variants").
//
//   VariantCache cache;
//   std::vector<int64_t> buckets = {4096, 8192, 16384};
//   for (int64_t len : {1000, 3000, 5000, 9000, 4000}) {
//     VariantKey key{BucketFor(buckets, len), 128, ElementType::kBFloat16, /*causal=*/true,
//                    /*padded=*/true};
//     ANXIN_ASSIGN_OR_RETURN(const AttentionVariant* v, cache.Get(key));
//     (void)v;
//   }
//   // cache.compilations() == 3 (4096, 8192, 16384), cache.hits() == 2.
//
// On the CPU a variant is the kernel path for the instruction set, the
// block schedule of its shape and its workspace size; a GPU or NPU compiler
// would build a binary for the same key. Thread safety: Get may be called
// from several threads; a variant lives as long as the cache.
#ifndef ANXIN_KERNELS_VARIANT_CACHE_H_
#define ANXIN_KERNELS_VARIANT_CACHE_H_

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "anxin/base/error.h"
#include "anxin/kernels/attention.h"

namespace anxin::kernels {

struct VariantKey {
  int64_t bucket = 0;  // padded sequence length
  int head_dim = 0;
  ElementType dtype = ElementType::kFloat32;
  bool causal = false;
  bool padded = false;  // has a padding mask
  auto operator<=>(const VariantKey&) const = default;
};

struct AttentionVariant {
  VariantKey key;
  Isa isa = Isa::kBaseline;
  int64_t query_blocks = 0;      // blocks of 64 queries
  int64_t key_blocks = 0;        // blocks of 64 keys
  int64_t block_pairs = 0;       // (query, key) blocks the mask leaves to compute
  uint64_t workspace_bytes = 0;  // per worker: packed K and V plus one block's buffers
};

class VariantCache {
 public:
  // The variant for key, built on first use. Errors: a shape the kernel
  // does not take (head_dim, bucket < 1).
  [[nodiscard]] Result<const AttentionVariant*> Get(const VariantKey& key);
  uint64_t compilations() const;
  uint64_t hits() const;

 private:
  mutable std::mutex mu_;
  std::map<VariantKey, std::unique_ptr<AttentionVariant>> variants_;
  uint64_t compilations_ = 0, hits_ = 0;
};

// The smallest bucket >= length; the length itself when it exceeds them all
// (then it needs a shape of its own). REQUIRES: buckets ascending.
int64_t BucketFor(std::span<const int64_t> buckets, int64_t length);

// Runs one sequence of `length` tokens (q, k, v: [heads, length, head_dim] of
// a.dtype, a.shape's batch 1 and lengths ignored) through the variant of
// its bucket: pads to the bucket, masks the padding, writes the length real
// rows to out.
[[nodiscard]] Status BucketedAttentionForward(VariantCache& cache, std::span<const int64_t> buckets,
                                              const AttentionArgs& a, int length, const void* q,
                                              const void* k, const void* v, void* out);

struct CompileCount {
  uint64_t bucketed = 0;    // compilations with the buckets
  uint64_t per_length = 0;  // compilations with one shape per distinct length
  uint64_t avoided() const { return per_length - bucketed; }
};
// Both caches fed the same stream of lengths.
[[nodiscard]] Result<CompileCount> CountCompilations(std::span<const int64_t> lengths,
                                                     std::span<const int64_t> buckets, int head_dim,
                                                     ElementType dtype, bool causal);

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_VARIANT_CACHE_H_
