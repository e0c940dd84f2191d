// Fused scaled-dot-product attention on the CPU: one pass over K and V per
// block of queries with an online softmax (FlashAttention's recurrence), the
// causal and padding masks applied inside the pass, float32, bfloat16 or
// float16 inputs with float32 accumulation, forward and backward. Memory is
// O(sequence): blocks of scores, never the whole score matrix
// (docs/kernels.md, "Fused attention").
//
//   AttentionArgs a;
//   a.shape = {.batch = 1, .heads = 8, .kv_heads = 8, .q_len = 4096, .kv_len = 4096,
//              .head_dim = 128};
//   a.dtype = ElementType::kBFloat16;
//   a.causal = true;
//   size_t n = a.shape.QElements();
//   std::vector<uint16_t> q(n), k(n), v(n), out(n);   // bfloat16 bits, [B, H, L, D]
//   std::vector<float> lse(a.shape.RowCount());
//   ANXIN_TRY(AttentionForward(a, q.data(), k.data(), v.data(), out.data(), lse.data()));
//
// Layout: Q and O are [batch, heads, q_len, head_dim], K and V [batch,
// kv_heads, kv_len, head_dim], row-major; heads is a multiple of kv_heads
// (grouped-query attention). Masks: with causal, query i sees keys
// j <= i + kv_len - q_len; kv_valid[b] keys of batch b are real, the rest
// padding. A query that sees no key gets zeros (and log-sum-exp -inf).
// The instruction set (AVX-512, AVX2 or the x86-64 baseline) is picked once,
// at the first call, from what the CPU supports.
//
// Thread safety: calls are independent; each may use `threads` threads.
#ifndef ANXIN_KERNELS_ATTENTION_H_
#define ANXIN_KERNELS_ATTENTION_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::kernels {

enum class ElementType : uint8_t { kFloat32, kBFloat16, kFloat16 };
std::string_view ElementTypeName(ElementType t);  // "float32", "bfloat16", "float16"
size_t ElementSize(ElementType t);

// Instruction set of the kernel. kAuto: the best this CPU supports.
enum class Isa : uint8_t { kAuto, kBaseline, kAvx2, kAvx512 };
std::string_view IsaName(Isa isa);
// What this CPU can run, baseline first; the last is kAuto's choice.
std::vector<Isa> AvailableIsas();

struct AttentionShape {
  int batch = 1, heads = 1, kv_heads = 1, q_len = 0, kv_len = 0, head_dim = 0;
  size_t QElements() const;   // batch * heads * q_len * head_dim
  size_t KvElements() const;  // batch * kv_heads * kv_len * head_dim
  size_t RowCount() const;    // batch * heads * q_len
  // Multiply-adds of QK^T and PV, counted as 2 flops each, unmasked.
  double Flops() const;
};

struct AttentionArgs {
  AttentionShape shape;
  ElementType dtype = ElementType::kFloat32;
  bool causal = false;
  std::span<const int> kv_valid;  // per batch; empty: every key is real
  float scale = 0;                // 0: 1 / sqrt(head_dim)
  int threads = 1;
  Isa isa = Isa::kAuto;  // tests force a path; one the CPU lacks is an error
};

// Checks shape, masks and threads: head_dim a multiple of 16 up to 256,
// lengths >= 1, heads a multiple of kv_heads, kv_valid of batch entries in
// [0, kv_len].
[[nodiscard]] Status ValidateAttention(const AttentionArgs& a);

// out (dtype, Q's layout) = softmax(Q K^T * scale + mask) V. lse, when not
// null, receives each row's natural log-sum-exp of the masked, scaled
// scores ([batch, heads, q_len] float32), what the backward pass needs.
[[nodiscard]] Status AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                      const void* v, void* out, float* lse);

// Gradients of the forward pass given dout (dtype) and the forward's out and
// lse: dq, dk, dv in float32 (Q's and K's layouts). Recomputes the scores
// block by block (no saved probabilities).
[[nodiscard]] Status AttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                       const void* v, const void* out, const void* dout,
                                       const float* lse, float* dq, float* dk, float* dv);

// The three-pass form for comparison: the whole score matrix of one head
// (q_len x kv_len float32), then softmax, then the product with V. Same
// masks and outputs as AttentionForward; memory O(sequence^2).
[[nodiscard]] Status NaiveAttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                           const void* v, void* out);

// Converts n elements of type t to float32 / from float32 (rounding to
// nearest even).
void ToFloat(ElementType t, const void* src, size_t n, float* dst);
void FromFloat(ElementType t, const float* src, size_t n, void* dst);

}  // namespace anxin::kernels

#endif  // ANXIN_KERNELS_ATTENTION_H_
