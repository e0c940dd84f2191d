// KV-cache element formats: fp16, and int8 / int4 in groups (symmetric with an
// fp16 scale, q4_0-style, or asymmetric with an fp16 scale and an fp16 zero
// point), with keys grouped per token or per channel (KIVI-style).
//
//   ANXIN_ASSIGN_OR_RETURN(KvFormat f, ParseKvFormat("int4"));      // q4_0-style
//   double bits = f.BitsPerValue();                                 // 4.5
//   ANXIN_ASSIGN_OR_RETURN(KvFormat g, ParseKvFormat("int4-asym:kivi:g64"));
//   uint64_t b = BytesPerToken(ModelKvShape{.layers = 32, .kv_heads = 8, .head_dim = 128}, f);
//
// Names: "fp16", "int8", "int8-asym", "int4", "int4-asym", each optionally
// followed by ":gN" (group size N, default 32) and ":kivi" (keys quantised per
// channel over groups of N tokens; values are always per token).
//
// Value encodings, per group of N values with absolute maximum a, minimum m
// and maximum M:
//   int8 symmetric:  q in [-127, 127],  x = q * d,        d = a / 127
//   int4 symmetric:  q in [-8, 7],      x = q * d,        d = (value of largest
//                    magnitude) / -8 (q4_0: the extreme lands exactly on -8)
//   asymmetric:      q in [0, 2^b - 1], x = q * d + z,    z = m, d = (M - m) / (2^b - 1)
// d and z are stored as fp16; d is rounded away from zero and z towards
// minus infinity so that every value of the group stays representable.
//
// Thread safety: plain values.
#ifndef ANXIN_KV_KV_FORMAT_H_
#define ANXIN_KV_KV_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::kv {

enum class KvDType : uint8_t { kFp16, kInt8, kInt4 };
enum class KvScheme : uint8_t { kSymmetric, kAsymmetric };
enum class KeyAxis : uint8_t { kPerToken, kPerChannel };

struct KvFormat {
  KvDType dtype = KvDType::kFp16;
  KvScheme scheme = KvScheme::kSymmetric;
  KeyAxis key_axis = KeyAxis::kPerToken;
  int group_size = 32;

  bool quantized() const { return dtype != KvDType::kFp16; }
  // Bits of one stored element: 16, 8 or 4.
  int ElementBits() const;
  // fp16 words of group parameters: 0 (fp16), 1 (scale) or 2 (scale, zero point).
  int ParamsPerGroup() const;
  // Average bits per cached value, parameters included: 16, 8.5, 9, 4.5, 5.
  double BitsPerValue() const;
  // Canonical name: "int4-asym:kivi:g64"; the defaults are left out ("int4").
  std::string Name() const;
  friend bool operator==(const KvFormat&, const KvFormat&) = default;
};

// Parses a format name (above). Errors name the text and list the choices.
[[nodiscard]] Result<KvFormat> ParseKvFormat(std::string_view name);
// Comma-separated names ("fp16,int8,int4"), in order; the first bad one is
// the error.
[[nodiscard]] Result<std::vector<KvFormat>> ParseKvFormatList(std::string_view names);

// The attention-relevant shape of a model (per device when tensor-parallel).
struct ModelKvShape {
  int layers = 32;
  int kv_heads = 8;
  int head_dim = 128;
};

// Bytes of K and V for one token across all layers and KV heads:
// 2 x layers x kv_heads x head_dim x BitsPerValue / 8.
double BytesPerToken(const ModelKvShape& shape, const KvFormat& format);

// Checks that a format fits a head dimension and block size: group size a
// multiple of 16 and a divisor of head_dim (per-token groups) or of
// block_tokens (per-channel key groups); head_dim a multiple of 16.
[[nodiscard]] Status ValidateKvLayout(const KvFormat& format, int head_dim, int block_tokens);

}  // namespace anxin::kv

#endif  // ANXIN_KV_KV_FORMAT_H_
