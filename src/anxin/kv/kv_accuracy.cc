#include "anxin/kv/kv_accuracy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "anxin/compare/npy.h"
#include "anxin/compare/safetensors.h"
#include "anxin/kv/kv_cache.h"

namespace anxin::kv {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 26;  // 64 Mi floats (256 MiB) per tensor

float StudentT(std::mt19937_64& rng, float dof) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::chi_squared_distribution<float> c(dof);
  // Scaled to unit variance where it exists, so the bulk matches N(0, 1).
  const float scale = dof > 2 ? std::sqrt((dof - 2) / dof) : 0.5f;
  return n(rng) / std::sqrt(c(rng) / dof) * scale;
}

struct Loaded {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Result<Loaded> LoadTensor(const std::string& name, const std::string& safetensors) {
  compare::Tensor t;
  if (safetensors.empty()) {
    ANXIN_ASSIGN_OR_RETURN(t, compare::ReadNpyFile(name, {}));
  } else {
    ANXIN_ASSIGN_OR_RETURN(std::vector<compare::Tensor> all,
                           compare::ReadSafetensorsFile(safetensors));
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.name == name; });
    if (it == all.end()) {
      std::string names;
      for (size_t i = 0; i < all.size() && i < 8; ++i) names += (i ? ", " : "") + all[i].name;
      return NotFound(fmt::format("{}: no tensor named '{}' (it has: {}{})", safetensors, name,
                                  names, all.size() > 8 ? ", ..." : ""));
    }
    t = *it;
  }
  const std::string label = safetensors.empty() ? name : safetensors + ":" + name;
  if (!t.dtype || !compare::IsFloating(*t.dtype) || !t.HasData()) {
    return InvalidArgument(fmt::format("{}: K/V tensors must hold floating-point data (got {})",
                                       label, t.dtype_label.empty() ? "none" : t.dtype_label));
  }
  const uint64_t n = t.NumElements();
  if (n > kMaxElements) {
    return InvalidArgument(fmt::format(
        "{}: {} elements is more than the {} this check reads; dump one layer, or fewer tokens",
        label, n, kMaxElements));
  }
  Loaded out;
  out.shape = t.shape;
  out.data.resize(n);
  std::vector<double> buf(4096);
  for (uint64_t i = 0; i < n; i += buf.size()) {
    const size_t m = std::min<uint64_t>(buf.size(), n - i);
    t.ReadDoubles(i, m, buf.data());
    for (size_t j = 0; j < m; ++j) {
      if (!std::isfinite(buf[j])) {
        return InvalidArgument(
            fmt::format("{}: element {} is {}: a KV cache holds finite values; check the dump",
                        label, i + j, buf[j]));
      }
      out.data[i + j] = static_cast<float>(buf[j]);
    }
  }
  return out;
}

// Reorders to [tokens][heads][dim].
Result<std::vector<float>> ToThd(const Loaded& t, const std::string& label, std::string layout,
                                 int* tokens, int* heads, int* dim) {
  const auto& s = t.shape;
  if (layout.empty()) layout = s.size() == 2 ? "td" : s.size() == 3 ? "thd" : "bhtd";
  const size_t rank = layout.size();
  if (s.size() != rank ||
      (layout != "td" && layout != "thd" && layout != "htd" && layout != "bhtd")) {
    return InvalidArgument(fmt::format(
        "{}: shape {} does not fit layout '{}': use [tokens, head_dim], [tokens, kv_heads, "
        "head_dim] (thd), [kv_heads, tokens, head_dim] (htd) or [1, kv_heads, tokens, head_dim] "
        "(bhtd)",
        label, compare::ShapeString(s), layout));
  }
  if (layout == "bhtd" && s[0] != 1) {
    return InvalidArgument(
        fmt::format("{}: batch dimension is {}; dump one sequence (batch 1)", label, s[0]));
  }
  int t_ = 0, h = 1, d = static_cast<int>(s.back());
  bool head_major = false;
  if (layout == "td") {
    t_ = static_cast<int>(s[0]);
  } else if (layout == "thd") {
    t_ = static_cast<int>(s[0]);
    h = static_cast<int>(s[1]);
  } else {
    h = static_cast<int>(s[rank - 3]);
    t_ = static_cast<int>(s[rank - 2]);
    head_major = true;
  }
  if (t_ <= 0 || h <= 0 || d <= 0) {
    return InvalidArgument(
        fmt::format("{}: shape {} has an empty dimension", label, compare::ShapeString(s)));
  }
  *tokens = t_;
  *heads = h;
  *dim = d;
  if (!head_major) return t.data;
  std::vector<float> out(t.data.size());
  for (int hh = 0; hh < h; ++hh)
    for (int tt = 0; tt < t_; ++tt)
      std::copy_n(t.data.data() + (static_cast<size_t>(hh) * t_ + tt) * d, d,
                  out.data() + (static_cast<size_t>(tt) * h + hh) * d);
  return out;
}

compare::Metrics Measure(const std::vector<float>& out, const std::vector<float>& ref) {
  const compare::MetricParams p =
      compare::MetricParams::For(compare::DType::kFloat32, compare::DType::kFloat32);
  compare::MetricAccumulator acc;
  acc.Add(p, compare::DType::kFloat32, out.data(), compare::DType::kFloat32, ref.data(),
          out.size());
  return acc.Finish(p);
}

}  // namespace

KvTensors SyntheticActivations(const ActivationProfile& p) {
  std::mt19937_64 rng(p.seed);
  KvTensors kv;
  kv.tokens = p.tokens;
  kv.kv_heads = p.kv_heads;
  kv.head_dim = p.head_dim;
  kv.source = fmt::format("synthetic: {} outlier channels per head at {}x, Student-t({}) tails",
                          p.outlier_channels, p.outlier_scale, p.tail_dof);
  const size_t n = static_cast<size_t>(p.tokens) * p.kv_heads * p.head_dim;
  // Per head: which channels are outliers, and each channel's fixed offset.
  std::vector<float> channel_scale(static_cast<size_t>(p.kv_heads) * p.head_dim, 1.0f);
  std::vector<float> channel_bias(channel_scale.size(), 0.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int h = 0; h < p.kv_heads; ++h) {
    std::vector<int> ch(p.head_dim);
    std::iota(ch.begin(), ch.end(), 0);
    std::shuffle(ch.begin(), ch.end(), rng);
    for (int i = 0; i < std::min(p.outlier_channels, p.head_dim); ++i) {
      channel_scale[h * p.head_dim + ch[i]] = p.outlier_scale;
      channel_bias[h * p.head_dim + ch[i]] = p.outlier_scale * (normal(rng) > 0 ? 1.0f : -1.0f);
    }
  }
  kv.keys.resize(n);
  kv.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = i % channel_scale.size();
    kv.keys[i] = StudentT(rng, p.tail_dof) * channel_scale[c] + channel_bias[c];
    kv.values[i] = StudentT(rng, p.tail_dof + 1);
  }
  kv.query_count = p.queries;
  kv.q_heads = p.q_heads;
  const int per_kv = std::max(1, p.q_heads / std::max(1, p.kv_heads));
  kv.queries.resize(static_cast<size_t>(p.queries) * p.q_heads * p.head_dim);
  for (int qi = 0; qi < p.queries; ++qi)
    for (int qh = 0; qh < p.q_heads; ++qh)
      for (int c = 0; c < p.head_dim; ++c) {
        const int h = std::min(qh / per_kv, p.kv_heads - 1);
        const float s = channel_scale[h * p.head_dim + c] > 1 ? 3.0f : 1.0f;
        kv.queries[(static_cast<size_t>(qi) * p.q_heads + qh) * p.head_dim + c] = normal(rng) * s;
      }
  return kv;
}

Result<KvTensors> LoadKvTensors(const KvFiles& f) {
  const std::string& st = f.safetensors;
  auto label = [&](const std::string& n) { return st.empty() ? n : st + ":" + n; };
  ANXIN_ASSIGN_OR_RETURN(Loaded k, LoadTensor(f.keys, st));
  ANXIN_ASSIGN_OR_RETURN(Loaded v, LoadTensor(f.values, st));
  KvTensors kv;
  int t2, h2, d2;
  ANXIN_ASSIGN_OR_RETURN(kv.keys,
                         ToThd(k, label(f.keys), f.layout, &kv.tokens, &kv.kv_heads, &kv.head_dim));
  ANXIN_ASSIGN_OR_RETURN(kv.values, ToThd(v, label(f.values), f.layout, &t2, &h2, &d2));
  if (t2 != kv.tokens || h2 != kv.kv_heads || d2 != kv.head_dim) {
    return InvalidArgument(fmt::format(
        "{} is [{} tokens, {} heads, {}] but {} is [{} tokens, {} heads, {}]: K and V must "
        "match",
        label(f.keys), kv.tokens, kv.kv_heads, kv.head_dim, label(f.values), t2, h2, d2));
  }
  kv.source = label(f.keys) + " + " + label(f.values);
  if (!f.queries.empty()) {
    ANXIN_ASSIGN_OR_RETURN(Loaded q, LoadTensor(f.queries, st));
    int n, qh, d;
    ANXIN_ASSIGN_OR_RETURN(kv.queries, ToThd(q, label(f.queries), "", &n, &qh, &d));
    if (d != kv.head_dim || qh % kv.kv_heads != 0) {
      return InvalidArgument(
          fmt::format("{}: queries [{}, {} heads, {}] need head_dim {} and a multiple of {} heads",
                      label(f.queries), n, qh, d, kv.head_dim, kv.kv_heads));
    }
    kv.query_count = n;
    kv.q_heads = qh;
  }
  return kv;
}

Result<AccuracyReport> MeasureAccuracy(const KvTensors& kv, const std::vector<KvFormat>& formats,
                                       const AccuracyOptions& options) {
  if (kv.tokens <= 0) return InvalidArgument("no tokens to measure");
  AccuracyReport report;
  report.source = kv.source;
  report.tokens = kv.tokens;
  report.kv_heads = kv.kv_heads;
  report.head_dim = kv.head_dim;
  // Queries: the given ones, or keys of evenly spaced tokens.
  std::vector<float> queries = kv.queries;
  int q_heads = kv.q_heads, nq = kv.query_count;
  if (queries.empty()) {
    nq = std::max(1, std::min(options.queries, kv.tokens));
    q_heads = kv.kv_heads;
    const size_t row = static_cast<size_t>(kv.kv_heads) * kv.head_dim;
    queries.resize(nq * row);
    for (int i = 0; i < nq; ++i) {
      const size_t t = static_cast<size_t>(kv.tokens - 1) * i / std::max(1, nq - 1);
      std::copy_n(kv.keys.data() + t * row, row, queries.data() + i * row);
    }
  }
  report.queries = nq;
  report.q_heads = q_heads;
  const size_t qrow = static_cast<size_t>(q_heads) * kv.head_dim;
  std::vector<float> ref(nq * qrow);
  for (int i = 0; i < nq; ++i) {
    ReferenceAttention(queries.data() + i * qrow, q_heads, kv.keys.data(), kv.values.data(),
                       kv.tokens, kv.kv_heads, kv.head_dim, ref.data() + i * qrow);
  }
  const int b = options.block_tokens;
  const int nblocks = (kv.tokens + b - 1) / b;
  for (const KvFormat& f : formats) {
    ANXIN_ASSIGN_OR_RETURN(KvCache cache, KvCache::Create({.kv_heads = kv.kv_heads,
                                                           .head_dim = kv.head_dim,
                                                           .block_tokens = b,
                                                           .num_blocks = nblocks,
                                                           .format = f}));
    KvSequenceState seq;
    seq.blocks.resize(nblocks);
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    // A scattered block table, as a block manager hands them out.
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), std::mt19937_64(7));
    const size_t row = static_cast<size_t>(kv.kv_heads) * kv.head_dim;
    for (int t = 0; t < kv.tokens; ++t) {
      cache.AppendToken(seq, kv.keys.data() + t * row, kv.values.data() + t * row);
    }
    std::vector<float> k_back(kv.keys.size()), v_back(kv.values.size());
    for (int t = 0; t < kv.tokens; ++t)
      for (int h = 0; h < kv.kv_heads; ++h)
        cache.ReadToken(seq, t, h, k_back.data() + t * row + h * kv.head_dim,
                        v_back.data() + t * row + h * kv.head_dim);
    std::vector<float> out(nq * qrow);
    for (int i = 0; i < nq; ++i) {
      cache.Attend(queries.data() + i * qrow, q_heads, seq, out.data() + i * qrow);
    }
    FormatAccuracy fa;
    fa.format = f;
    fa.bits_per_value = f.BitsPerValue();
    fa.attention = Measure(out, ref);
    fa.keys = Measure(k_back, kv.keys);
    fa.values = Measure(v_back, kv.values);
    report.rows.push_back(fa);
  }
  return report;
}

Result<AccuracyRun> RunAccuracy(const AccuracyRequest& r) {
  auto formats = ParseKvFormatList(r.formats);
  if (!formats) return std::unexpected(formats.error().With("--format"));
  KvTensors tensors;
  if (r.files.keys.empty() != r.files.values.empty()) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument, "give both --keys and --values"));
  }
  if (!r.files.keys.empty()) {
    ANXIN_ASSIGN_OR_RETURN(tensors, LoadKvTensors(r.files));
  } else {
    if (r.tokens <= 0 || r.kv_heads <= 0 || r.head_dim <= 0 || r.head_dim % 16 != 0) {
      return std::unexpected(Error(ErrorCode::kInvalidArgument,
                                   "--tokens and --kv-heads must be positive and --head-dim a "
                                   "multiple of 16"));
    }
    tensors = SyntheticActivations({.tokens = r.tokens,
                                    .kv_heads = r.kv_heads,
                                    .head_dim = r.head_dim,
                                    .q_heads = r.kv_heads * 4,
                                    .queries = r.queries,
                                    .seed = r.seed});
  }
  AccuracyRun run;
  ANXIN_ASSIGN_OR_RETURN(
      run.report,
      MeasureAccuracy(tensors, *formats, {.block_tokens = r.block, .queries = r.queries}));
  run.min_cosine = r.min_cosine;
  for (const auto& row : run.report.rows)
    run.pass = run.pass && row.attention.cosine >= r.min_cosine;
  return run;
}

nlohmann::json AccuracyJson(const AccuracyRun& run) {
  const AccuracyReport& report = run.report;
  nlohmann::json j;
  j["source"] = report.source;
  j["tokens"] = report.tokens;
  j["kv_heads"] = report.kv_heads;
  j["head_dim"] = report.head_dim;
  j["queries"] = report.queries;
  j["q_heads"] = report.q_heads;
  j["min_cosine"] = run.min_cosine;
  j["pass"] = run.pass;
  for (const auto& r : report.rows) {
    j["formats"].push_back({{"format", r.format.Name()},
                            {"bits_per_value", r.bits_per_value},
                            {"attention_cosine", r.attention.cosine},
                            {"attention_max_abs_err", r.attention.max_abs_err},
                            {"attention_mean_abs_err", r.attention.mean_abs_err},
                            {"key_max_abs_err", r.keys.max_abs_err},
                            {"key_rmse", r.keys.rmse},
                            {"value_max_abs_err", r.values.max_abs_err},
                            {"value_rmse", r.values.rmse}});
  }
  return j;
}

std::string AccuracyText(const AccuracyRun& run) {
  const AccuracyReport& report = run.report;
  auto num = [](double v) { return fmt::format("{:.6g}", v); };
  std::string out = fmt::format(
      "K/V: {}\n{} tokens, {} KV heads, head dim {}; {} queries x {} heads against "
      "float64 attention\n\n",
      report.source, report.tokens, report.kv_heads, report.head_dim, report.queries,
      report.q_heads);
  out += fmt::format("{:<20} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "format", "bits",
                     "attn cosine", "attn maxabs", "attn meanabs", "K rmse", "V rmse");
  for (const auto& r : report.rows) {
    out += fmt::format("{:<20} {:>6.2f} {:>12} {:>12} {:>12} {:>12} {:>12}\n", r.format.Name(),
                       r.bits_per_value, fmt::format("{:.6f}", r.attention.cosine),
                       num(r.attention.max_abs_err), num(r.attention.mean_abs_err),
                       num(r.keys.rmse), num(r.values.rmse));
  }
  if (run.min_cosine > 0) {
    out += fmt::format("\n{}: attention cosine {} {:g} for every format\n",
                       run.pass ? "pass" : "fail", run.pass ? ">=" : "below", run.min_cosine);
  }
  return out;
}

}  // namespace anxin::kv
