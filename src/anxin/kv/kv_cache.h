// Paged, quantised K/V storage for one attention layer, and attention of one
// query position against it (fp32 accumulation, online softmax).
//
//   ANXIN_ASSIGN_OR_RETURN(KvFormat f, ParseKvFormat("int4"));
//   ANXIN_ASSIGN_OR_RETURN(KvCache cache, KvCache::Create({.kv_heads = 8, .head_dim = 128,
//                                                          .block_tokens = 16, .num_blocks = 1024,
//                                                          .format = f}));
//   KvSequenceState seq;                          // block table + length (+ KIVI residual)
//   seq.blocks = {3, 7};                          // from a BlockManager
//   std::vector<float> k(8 * 128, 0.1f), v(8 * 128, 0.2f);   // kv_heads x head_dim
//   cache.AppendToken(seq, k.data(), v.data());
//   std::vector<float> q(32 * 128, 0.3f), out(32 * 128);
//   cache.Attend(q.data(), /*q_heads=*/32, seq, out.data());
//
// Storage, per block and per KV head: one row per token (kv_kernels.h) and
// its group parameters. With keys per channel (":kivi"), key groups run over
// `group_size` consecutive tokens of one channel; the tokens of a group not
// yet complete wait in the sequence's fp16 residual (as KIVI keeps them) and
// are quantised into the block when the group fills. Values are always
// grouped per token.
//
// Thread safety: Attend and ReadToken are const and may run concurrently;
// AppendToken and CopyBlock need exclusive access to the blocks they write.
#ifndef ANXIN_KV_KV_CACHE_H_
#define ANXIN_KV_KV_CACHE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/kv/kv_format.h"
#include "anxin/kv/kv_kernels.h"

namespace anxin::kv {

struct KvCacheOptions {
  int kv_heads = 8;
  int head_dim = 128;
  int block_tokens = 16;
  int num_blocks = 0;
  KvFormat format{};
  KvIsa isa = KvIsa::kAuto;  // tests and benchmarks force one
};

// One sequence's view of a layer's cache.
struct KvSequenceState {
  std::vector<int> blocks{};  // block table: blocks[i] holds tokens [i*B, (i+1)*B)
  int length = 0;             // tokens written
  // Per-channel keys only: keys of the incomplete group, fp16,
  // [group_size][kv_heads][head_dim].
  std::vector<uint16_t> key_residual{};
};

class KvCache {
 public:
  // kInvalidArgument when the format does not fit the shape (ValidateKvLayout).
  [[nodiscard]] static Result<KvCache> Create(const KvCacheOptions& options);

  const KvCacheOptions& options() const { return options_; }
  // Bytes of storage (all blocks, K and V, with group parameters).
  uint64_t bytes() const;
  // Bytes one block holds (K and V).
  uint64_t block_bytes() const;

  // Writes token seq.length (k and v: kv_heads x head_dim) and increments the
  // length. REQUIRES: seq.blocks covers position seq.length; k, v finite.
  void AppendToken(KvSequenceState& seq, const float* k, const float* v);
  // Copies every byte of block src to dst (copy-on-write).
  void CopyBlock(int src, int dst);

  // The stored (dequantised) key and value of token pos, head h.
  void ReadToken(const KvSequenceState& seq, int pos, int head, float* k, float* v) const;

  // out[qh][:] = softmax(q[qh] . K^T * scale) V over the sequence's tokens,
  // for q_heads query heads sharing the KV heads in groups
  // (q_heads / kv_heads each). scale 0 means 1/sqrt(head_dim).
  // REQUIRES: q_heads a multiple of kv_heads; seq.length > 0.
  void Attend(const float* q, int q_heads, const KvSequenceState& seq, float* out,
              float scale = 0) const;

  // Bytes of K/V the last-written layout makes Attend read for `tokens`
  // tokens (data and parameters): what throughput figures divide by.
  uint64_t BytesReadFor(int tokens) const;

 private:
  explicit KvCache(const KvCacheOptions& options);
  size_t KRowOffset(int block, int head, int slot) const;
  size_t KParamOffset(int block, int head, int slot) const;  // per token or per channel group
  size_t VRowOffset(int block, int head, int slot) const;
  size_t VParamOffset(int block, int head, int slot) const;
  void LoadChannelParams(int block, int head, int group_index, float* scale, float* zero) const;

  KvCacheOptions options_;
  const internal::KvKernels* kernels_;
  bool per_channel_keys_;
  int row_bytes_;       // bytes of one row of head_dim elements
  int row_params_;      // fp16 words of per-token parameters of one row
  int channel_params_;  // fp16 words of one per-channel group (head_dim x per_group)
  std::vector<uint8_t> k_data_, v_data_;
  std::vector<uint16_t> k_params_, v_params_;
};

// The exact attention of the same query against unquantised keys and values
// ([tokens][kv_heads][head_dim], float), accumulated in float64: the reference
// quantised attention is measured against.
void ReferenceAttention(const float* q, int q_heads, const float* keys, const float* values,
                        int tokens, int kv_heads, int head_dim, float* out, float scale = 0);

}  // namespace anxin::kv

#endif  // ANXIN_KV_KV_CACHE_H_
