#include "anxin/kernels/variant_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace anxin::kernels {
namespace {
constexpr int64_t kBlock = 64;  // the kernel's query and key block (attention_kernel_impl.h)
}

Result<const AttentionVariant*> VariantCache::Get(const VariantKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variants_.find(key);
  if (it != variants_.end()) {
    ++hits_;
    return it->second.get();
  }
  if (key.bucket < 1 || key.bucket > (int64_t{1} << 31))
    return InvalidArgument(fmt::format("bucket {}: give a length of 1 or more", key.bucket));
  if (key.head_dim < 16 || key.head_dim > 256 || key.head_dim % 16 != 0)
    return InvalidArgument(
        fmt::format("head_dim {}: the kernel takes multiples of 16 up to 256", key.head_dim));
  auto v = std::make_unique<AttentionVariant>();
  v->key = key;
  v->isa = AvailableIsas().back();
  v->query_blocks = (key.bucket + kBlock - 1) / kBlock;
  v->key_blocks = v->query_blocks;
  for (int64_t qb = 0; qb < v->query_blocks; ++qb)
    v->block_pairs += key.causal ? qb + 1 : v->key_blocks;
  const uint64_t d = static_cast<uint64_t>(key.head_dim);
  v->workspace_bytes = 4 * (2 * static_cast<uint64_t>(v->key_blocks * kBlock) * d + 2 * kBlock * d +
                            kBlock * kBlock + 2 * kBlock);
  ++compilations_;
  const AttentionVariant* raw = v.get();
  variants_.emplace(key, std::move(v));
  return raw;
}

uint64_t VariantCache::compilations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compilations_;
}
uint64_t VariantCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t BucketFor(std::span<const int64_t> buckets, int64_t length) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), length);
  return it == buckets.end() ? length : *it;
}

Status BucketedAttentionForward(VariantCache& cache, std::span<const int64_t> buckets,
                                const AttentionArgs& a, int length, const void* q, const void* k,
                                const void* v, void* out) {
  if (length < 1) return InvalidArgument(fmt::format("length {}: give 1 or more", length));
  const int64_t bucket = BucketFor(buckets, length);
  const VariantKey key{bucket, a.shape.head_dim, a.dtype, a.causal, true};
  ANXIN_ASSIGN_OR_RETURN(const AttentionVariant* variant, cache.Get(key));
  AttentionArgs p = a;
  p.shape.batch = 1;
  p.shape.q_len = p.shape.kv_len = static_cast<int>(variant->key.bucket);
  const int valid[1] = {length};
  p.kv_valid = valid;
  p.isa = variant->isa;
  ANXIN_TRY(ValidateAttention(p));
  // Copy each head's rows into the padded buffers (zeros after length).
  const size_t es = ElementSize(a.dtype), d = static_cast<size_t>(a.shape.head_dim);
  const size_t row = d * es, real = static_cast<size_t>(length) * row,
               padded = static_cast<size_t>(bucket) * row;
  auto pad = [&](const void* src, int heads) {
    std::vector<char> buf(padded * static_cast<size_t>(heads), 0);
    for (int h = 0; h < heads; ++h)
      std::memcpy(buf.data() + h * padded, static_cast<const char*>(src) + h * real, real);
    return buf;
  };
  std::vector<char> qp = pad(q, a.shape.heads), kp = pad(k, a.shape.kv_heads),
                    vp = pad(v, a.shape.kv_heads), op(padded * static_cast<size_t>(a.shape.heads));
  ANXIN_TRY(AttentionForward(p, qp.data(), kp.data(), vp.data(), op.data(), nullptr));
  for (int h = 0; h < a.shape.heads; ++h)
    std::memcpy(static_cast<char*>(out) + h * real, op.data() + h * padded, real);
  return Ok();
}

Result<CompileCount> CountCompilations(std::span<const int64_t> lengths,
                                       std::span<const int64_t> buckets, int head_dim,
                                       ElementType dtype, bool causal) {
  VariantCache bucketed, per_length;
  for (int64_t len : lengths) {
    const VariantKey with_buckets{BucketFor(buckets, len), head_dim, dtype, causal, true};
    const VariantKey own_shape{len, head_dim, dtype, causal, false};
    ANXIN_TRY(bucketed.Get(with_buckets));
    ANXIN_TRY(per_length.Get(own_shape));
  }
  return CompileCount{bucketed.compilations(), per_length.compilations()};
}

}  // namespace anxin::kernels
