#include "anxin/kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "anxin/base/half.h"

namespace anxin::kv {

Result<KvCache> KvCache::Create(const KvCacheOptions& options) {
  ANXIN_TRY(ValidateKvLayout(options.format, options.head_dim, options.block_tokens));
  if (options.kv_heads <= 0) {
    return InvalidArgument("KV cache: kv_heads must be positive");
  }
  if (options.num_blocks < 0) {
    return InvalidArgument("KV cache: num_blocks must not be negative");
  }
  if (options.head_dim > 4096) {
    return InvalidArgument("KV cache: head dimension above 4096 is not supported");
  }
  return KvCache(options);
}

KvCache::KvCache(const KvCacheOptions& o)
    : options_(o),
      kernels_(&internal::KernelsFor(o.isa)),
      per_channel_keys_(o.format.quantized() && o.format.key_axis == KeyAxis::kPerChannel) {
  const int d = o.head_dim, g = o.format.group_size;
  row_bytes_ = d * o.format.ElementBits() / 8;
  row_params_ = o.format.quantized() ? (d / g) * o.format.ParamsPerGroup() : 0;
  channel_params_ = d * o.format.ParamsPerGroup();
  const size_t rows = static_cast<size_t>(o.num_blocks) * o.kv_heads * o.block_tokens;
  k_data_.assign(rows * row_bytes_, 0);
  v_data_.assign(rows * row_bytes_, 0);
  v_params_.assign(rows * row_params_, 0);
  if (per_channel_keys_) {
    k_params_.assign(
        static_cast<size_t>(o.num_blocks) * o.kv_heads * (o.block_tokens / g) * channel_params_, 0);
  } else {
    k_params_.assign(rows * row_params_, 0);
  }
}

uint64_t KvCache::bytes() const {
  return k_data_.size() + v_data_.size() + 2 * (k_params_.size() + v_params_.size());
}

uint64_t KvCache::block_bytes() const {
  return options_.num_blocks == 0 ? 0 : bytes() / options_.num_blocks;
}

size_t KvCache::KRowOffset(int block, int head, int slot) const {
  return ((static_cast<size_t>(block) * options_.kv_heads + head) * options_.block_tokens + slot) *
         row_bytes_;
}
size_t KvCache::VRowOffset(int block, int head, int slot) const {
  return KRowOffset(block, head, slot);
}
size_t KvCache::VParamOffset(int block, int head, int slot) const {
  return ((static_cast<size_t>(block) * options_.kv_heads + head) * options_.block_tokens + slot) *
         row_params_;
}
size_t KvCache::KParamOffset(int block, int head, int slot) const {
  if (!per_channel_keys_) return VParamOffset(block, head, slot);
  const int groups = options_.block_tokens / options_.format.group_size;
  return ((static_cast<size_t>(block) * options_.kv_heads + head) * groups +
          slot / options_.format.group_size) *
         channel_params_;
}

void KvCache::LoadChannelParams(int block, int head, int group_index, float* scale,
                                float* zero) const {
  const uint16_t* p =
      k_params_.data() + KParamOffset(block, head, group_index * options_.format.group_size);
  const int per = options_.format.ParamsPerGroup();
  for (int c = 0; c < options_.head_dim; ++c) {
    scale[c] = HalfToFloat(p[c * per]);
    zero[c] = per == 2 ? HalfToFloat(p[c * per + 1]) : 0.0f;
  }
}

void KvCache::AppendToken(KvSequenceState& seq, const float* k, const float* v) {
  const KvCacheOptions& o = options_;
  const int d = o.head_dim, g = o.format.group_size, b = o.block_tokens;
  const int pos = seq.length;
  const int block = seq.blocks[pos / b];
  const int slot = pos % b;
  for (int h = 0; h < o.kv_heads; ++h) {
    kernels_->quantize_row(v + h * d, d, g, o.format.dtype, o.format.scheme,
                           v_data_.data() + VRowOffset(block, h, slot),
                           v_params_.data() + VParamOffset(block, h, slot));
    if (!per_channel_keys_) {
      kernels_->quantize_row(k + h * d, d, g, o.format.dtype, o.format.scheme,
                             k_data_.data() + KRowOffset(block, h, slot),
                             k_params_.data() + KParamOffset(block, h, slot));
    }
  }
  if (per_channel_keys_) {
    const size_t token_words = static_cast<size_t>(o.kv_heads) * d;
    seq.key_residual.resize(static_cast<size_t>(g) * token_words);
    uint16_t* r = seq.key_residual.data() + (pos % g) * token_words;
    for (size_t i = 0; i < token_words; ++i) r[i] = FloatToHalf(k[i]);
    if (pos % g == g - 1) {
      const int first = slot - (g - 1);
      std::vector<float> rows(static_cast<size_t>(g) * d);
      for (int h = 0; h < o.kv_heads; ++h) {
        for (int t = 0; t < g; ++t) {
          const uint16_t* src = seq.key_residual.data() + t * token_words + h * d;
          for (int c = 0; c < d; ++c) rows[t * d + c] = HalfToFloat(src[c]);
        }
        kernels_->quantize_rows_per_channel(rows.data(), g, d, o.format.dtype, o.format.scheme,
                                            k_data_.data() + KRowOffset(block, h, first),
                                            k_params_.data() + KParamOffset(block, h, first));
      }
    }
  }
  seq.length = pos + 1;
}

void KvCache::CopyBlock(int src, int dst) {
  auto copy = [&](auto& vec, size_t per_block) {
    std::memcpy(vec.data() + dst * per_block, vec.data() + src * per_block,
                per_block * sizeof(vec[0]));
  };
  const size_t n = options_.num_blocks;
  if (n == 0) return;
  copy(k_data_, k_data_.size() / n);
  copy(v_data_, v_data_.size() / n);
  copy(k_params_, k_params_.size() / n);
  copy(v_params_, v_params_.size() / n);
}

void KvCache::ReadToken(const KvSequenceState& seq, int pos, int head, float* k, float* v) const {
  const KvCacheOptions& o = options_;
  const int d = o.head_dim, g = o.format.group_size, b = o.block_tokens;
  const int block = seq.blocks[pos / b], slot = pos % b;
  kernels_->dequant_row(v_data_.data() + VRowOffset(block, head, slot),
                        v_params_.data() + VParamOffset(block, head, slot), d, g, o.format.dtype,
                        o.format.scheme, v);
  if (!per_channel_keys_) {
    kernels_->dequant_row(k_data_.data() + KRowOffset(block, head, slot),
                          k_params_.data() + KParamOffset(block, head, slot), d, g, o.format.dtype,
                          o.format.scheme, k);
    return;
  }
  const int complete = seq.length / g * g;
  if (pos >= complete) {
    const uint16_t* src =
        seq.key_residual.data() + (static_cast<size_t>(pos % g) * o.kv_heads + head) * d;
    for (int c = 0; c < d; ++c) k[c] = HalfToFloat(src[c]);
    return;
  }
  std::vector<float> scale(d), zero(d);
  LoadChannelParams(block, head, slot / g, scale.data(), zero.data());
  kernels_->dequant_row_per_channel(k_data_.data() + KRowOffset(block, head, slot), scale.data(),
                                    zero.data(), d, o.format.dtype, o.format.scheme, k);
}

void KvCache::Attend(const float* q, int q_heads, const KvSequenceState& seq, float* out,
                     float scale) const {
  const KvCacheOptions& o = options_;
  const int d = o.head_dim, g = o.format.group_size, b = o.block_tokens, len = seq.length;
  const int per_kv = q_heads / o.kv_heads;
  if (scale == 0) scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int complete = per_channel_keys_ ? len / g * g : len;

  std::vector<float> row(d), ch_scale(d), ch_zero(d);
  std::vector<float> scores(static_cast<size_t>(per_kv) * b);
  std::vector<float> m(per_kv), l(per_kv);
  std::vector<float> qs(static_cast<size_t>(per_kv) * d);

  for (int h = 0; h < o.kv_heads; ++h) {
    float* acc = out + static_cast<size_t>(h) * per_kv * d;
    std::fill(acc, acc + static_cast<size_t>(per_kv) * d, 0.0f);
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(l.begin(), l.end(), 0.0f);
    for (int j = 0; j < per_kv; ++j) {
      const float* qj = q + (static_cast<size_t>(h) * per_kv + j) * d;
      for (int c = 0; c < d; ++c) qs[j * d + c] = qj[c] * scale;
    }
    for (int i = 0; i * b < len; ++i) {
      const int block = seq.blocks[i];
      const int n = std::min(b, len - i * b);
      // Scores of the block's tokens for every query head of this KV head.
      int loaded_group = -1;
      for (int t = 0; t < n; ++t) {
        const int pos = i * b + t;
        if (!per_channel_keys_) {
          kernels_->dequant_row(k_data_.data() + KRowOffset(block, h, t),
                                k_params_.data() + KParamOffset(block, h, t), d, g, o.format.dtype,
                                o.format.scheme, row.data());
        } else if (pos >= complete) {
          const uint16_t* src =
              seq.key_residual.data() + (static_cast<size_t>(pos % g) * o.kv_heads + h) * d;
          for (int c = 0; c < d; ++c) row[c] = HalfToFloat(src[c]);
        } else {
          if (t / g != loaded_group) {
            loaded_group = t / g;
            LoadChannelParams(block, h, loaded_group, ch_scale.data(), ch_zero.data());
          }
          kernels_->dequant_row_per_channel(k_data_.data() + KRowOffset(block, h, t),
                                            ch_scale.data(), ch_zero.data(), d, o.format.dtype,
                                            o.format.scheme, row.data());
        }
        for (int j = 0; j < per_kv; ++j) {
          scores[j * b + t] = kernels_->dot(qs.data() + j * d, row.data(), d);
        }
      }
      // Online softmax: rescale what was accumulated to the new maximum.
      for (int j = 0; j < per_kv; ++j) {
        float mb = m[j];
        for (int t = 0; t < n; ++t) mb = std::max(mb, scores[j * b + t]);
        if (mb != m[j]) {
          const float corr = std::exp(m[j] - mb);
          l[j] *= corr;
          kernels_->scale(corr, acc + j * d, d);
          m[j] = mb;
        }
        for (int t = 0; t < n; ++t) {
          const float p = std::exp(scores[j * b + t] - mb);
          scores[j * b + t] = p;
          l[j] += p;
        }
      }
      for (int t = 0; t < n; ++t) {
        kernels_->dequant_row(v_data_.data() + VRowOffset(block, h, t),
                              v_params_.data() + VParamOffset(block, h, t), d, g, o.format.dtype,
                              o.format.scheme, row.data());
        for (int j = 0; j < per_kv; ++j) {
          kernels_->axpy(scores[j * b + t], row.data(), acc + j * d, d);
        }
      }
    }
    for (int j = 0; j < per_kv; ++j) kernels_->scale(1.0f / l[j], acc + j * d, d);
  }
}

uint64_t KvCache::BytesReadFor(int tokens) const {
  const uint64_t t = static_cast<uint64_t>(tokens);
  const uint64_t v = t * (row_bytes_ + 2ull * row_params_);
  uint64_t k = v;
  if (per_channel_keys_) {
    const uint64_t g = options_.format.group_size;
    const uint64_t complete = t / g * g;
    k = complete * row_bytes_ + complete / g * 2ull * channel_params_ +
        (t - complete) * 2ull * options_.head_dim;
  }
  return (k + v) * options_.kv_heads;
}

void ReferenceAttention(const float* q, int q_heads, const float* keys, const float* values,
                        int tokens, int kv_heads, int head_dim, float* out, float scale) {
  const int per_kv = q_heads / kv_heads;
  const double s = scale == 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : scale;
  std::vector<double> scores(tokens), acc(head_dim);
  for (int qh = 0; qh < q_heads; ++qh) {
    const int h = qh / per_kv;
    const float* qv = q + static_cast<size_t>(qh) * head_dim;
    double mx = -std::numeric_limits<double>::infinity();
    for (int t = 0; t < tokens; ++t) {
      const float* k = keys + (static_cast<size_t>(t) * kv_heads + h) * head_dim;
      double dot = 0;
      for (int c = 0; c < head_dim; ++c) dot += static_cast<double>(qv[c]) * k[c];
      scores[t] = dot * s;
      mx = std::max(mx, scores[t]);
    }
    double sum = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int t = 0; t < tokens; ++t) {
      const double p = std::exp(scores[t] - mx);
      sum += p;
      const float* v = values + (static_cast<size_t>(t) * kv_heads + h) * head_dim;
      for (int c = 0; c < head_dim; ++c) acc[c] += p * v[c];
    }
    for (int c = 0; c < head_dim; ++c) {
      out[static_cast<size_t>(qh) * head_dim + c] = static_cast<float>(acc[c] / sum);
    }
  }
}

}  // namespace anxin::kv
