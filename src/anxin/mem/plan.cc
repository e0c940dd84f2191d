#include "anxin/mem/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "anxin/mem/replay.h"

namespace anxin::mem {
namespace {

using Action = TraceEvent::Action;

class TraceBuilder {
 public:
  explicit TraceBuilder(Trace& t) : t_(t) {}
  uint64_t Alloc(uint64_t bytes) {
    uint64_t id = next_;
    // Distinct, never-overlapping ids; a trace whose ids would wrap is refused.
    if (__builtin_add_overflow(next_, std::max<uint64_t>(bytes, 1) + 4096, &next_)) wrapped_ = true;
    t_.events.push_back({Action::kAlloc, id, std::max<uint64_t>(bytes, 1), 0});
    size_[id] = std::max<uint64_t>(bytes, 1);
    return id;
  }
  void Free(uint64_t id) {
    t_.events.push_back({Action::kFree, id, size_[id], 0});
    size_.erase(id);
  }
  void EmptyCache() { t_.events.push_back({Action::kEmptyCache, 0, 0, 0}); }
  bool wrapped() const { return wrapped_; }

 private:
  Trace& t_;
  bool wrapped_ = false;
  uint64_t next_ = uint64_t{1} << 40;
  std::unordered_map<uint64_t, uint64_t> size_;
};

int BytesFor(std::string_view dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp8") return 1;
  return 0;
}

// What the plan can model: no single tensor past 16 TiB (no device holds one)
// and a trace of at most 10 M events (replayed once per candidate setting,
// about a minute in all). A shape past either is refused before anything is
// built; sizes are computed in 128 bits so that nothing wraps on the way.
constexpr uint64_t kMaxTensorBytes = uint64_t{16} << 40;
constexpr uint64_t kMaxEvents = 10'000'000;

Status CheckSize(const ModelShape& s) {
  using U = unsigned __int128;
  const U h = static_cast<U>(s.hidden), heads = static_cast<U>(s.heads),
          vocab = static_cast<U>(s.vocab), mb = static_cast<U>(s.micro_batch),
          act = static_cast<U>(s.act_bytes),
          param = static_cast<U>(std::max({s.param_bytes, s.master_bytes, s.grad_bytes, 4})),
          seq = static_cast<U>(*std::max_element(s.seq_buckets.begin(), s.seq_buckets.end()));
  const struct {
    const char* what;
    U bytes;
  } largest[] = {
      {"the attention scores of one layer (micro-batch x heads x seq^2)",
       mb * heads * seq * seq * act},
      {"the float32 logits (micro-batch x seq x vocab)", mb * seq * vocab * 4},
      {"the MLP weight of one layer (4 x hidden^2)", 4 * h * h * param},
      {"the embedding (vocab x hidden)", vocab * h * param},
      {"the MLP activation of one layer (4 x micro-batch x seq x hidden)", 4 * mb * seq * h * act},
  };
  for (const auto& t : largest) {
    if (t.bytes > kMaxTensorBytes) {
      return InvalidArgument(fmt::format(
          "model shape: {} would take {}; the plan models tensors up to 16 TiB", t.what,
          t.bytes >> 64 ? std::string("more than 2^64 bytes")
                        : fmt::format("{:.1f} TiB", static_cast<double>(t.bytes) / (U{1} << 40))));
    }
  }
  // An upper bound on the events: per layer and micro-batch at most 100
  // (forward and backward with gathers, recomputation and full gradients),
  // a few per parameter tensor and embedding shard per step.
  const U emb_bytes = vocab * h * static_cast<U>(s.param_bytes);
  const U shards = s.embedding_shard ? emb_bytes / s.embedding_shard + 1 : 1;
  const U tensors = 8 * static_cast<U>(s.layers) + shards + 1;
  const U events =
      static_cast<U>(s.steps) *
          (static_cast<U>(s.micro_batches) * (static_cast<U>(s.layers) * 100 + 10) + tensors * 4) +
      tensors * 6;
  if (events > kMaxEvents) {
    return InvalidArgument(fmt::format(
        "model shape: the synthetic trace would hold up to {} M allocator events, more than the "
        "10 M the plan replays; lower --layers or --micro-batches",
        events >> 64 ? std::string("2^64")
                     : fmt::format("{}", static_cast<uint64_t>(events / 1000000))));
  }
  return Ok();
}

}  // namespace

Status ApplyPrecision(const std::string& policy, ModelShape& s) {
  std::stringstream ss(policy);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t dash = item.find('-');
    std::string dtype = item.substr(0, dash);
    std::string role = dash == std::string::npos ? "" : item.substr(dash + 1);
    int bytes = BytesFor(dtype);
    if (bytes == 0 && !(dtype == "no" && role == "master")) {
      return InvalidArgument(
          fmt::format("precision '{}': unknown type '{}' (use fp32, bf16, fp16 or fp8, as in "
                      "fp32-master,bf16-params,bf16-grads,fp16-acts)",
                      item, dtype));
    }
    if (role == "master") {
      s.master_bytes = bytes;
    } else if (role == "params" || role == "weights") {
      s.param_bytes = bytes;
    } else if (role == "grads") {
      s.grad_bytes = bytes;
    } else if (role == "acts" || role == "activations") {
      s.act_bytes = bytes;
    } else {
      return InvalidArgument(fmt::format(
          "precision '{}': unknown role '{}' (use master, params, grads or acts)", item, role));
    }
  }
  return Ok();
}

Result<Trace> GenerateStepTrace(const ModelShape& s) {
  if (s.layers <= 0 || s.hidden <= 0 || s.heads <= 0 || s.vocab <= 0 || s.micro_batch <= 0 ||
      s.micro_batches <= 0 || s.seq_buckets.empty() || s.dp <= 0 || s.steps <= 0) {
    return InvalidArgument(
        "model shape: layers, hidden, heads, vocab, micro-batch sizes, "
        "sequence buckets, dp and steps must all be positive");
  }
  if (s.zero_stage < 0 || s.zero_stage > 3) {
    return InvalidArgument(fmt::format("ZeRO stage {} is not 0, 1, 2 or 3", s.zero_stage));
  }
  if (s.hidden % s.heads != 0) {
    return InvalidArgument(
        fmt::format("hidden size {} is not a multiple of {} heads", s.hidden, s.heads));
  }
  for (int seq : s.seq_buckets)
    if (seq <= 0) return InvalidArgument(fmt::format("sequence bucket {} is not positive", seq));
  ANXIN_TRY(CheckSize(s));
  Trace t;
  t.source = "synthetic training step";
  TraceBuilder b(t);
  const uint64_t h = static_cast<uint64_t>(s.hidden), dp = static_cast<uint64_t>(s.dp);
  const uint64_t zero_opt = s.zero_stage >= 1 ? dp : 1, zero_grad = s.zero_stage >= 2 ? dp : 1,
                 zero_param = s.zero_stage >= 3 ? dp : 1;
  // Parameter tensors (elements): per layer, then the embedding.
  std::vector<uint64_t> layer_tensors = {3 * h * h, h * h, 4 * h * h, 4 * h * h,
                                         h,         h,     3 * h,     4 * h};
  std::vector<uint64_t> tensors;
  for (int l = 0; l < s.layers; ++l)
    tensors.insert(tensors.end(), layer_tensors.begin(), layer_tensors.end());
  uint64_t emb = static_cast<uint64_t>(s.vocab) * h;
  uint64_t shard_elems =
      s.embedding_shard
          ? std::max<uint64_t>(1, s.embedding_shard / static_cast<uint64_t>(s.param_bytes))
          : emb;
  for (uint64_t done = 0; done < emb; done += shard_elems)
    tensors.push_back(std::min(shard_elems, emb - done));
  tensors.push_back(h);  // final norm

  auto P = [&](uint64_t elems) {
    return elems * static_cast<uint64_t>(s.param_bytes) / zero_param;
  };
  for (uint64_t e : tensors) b.Alloc(P(e));
  for (uint64_t e : tensors) {
    if (s.master_bytes) b.Alloc(e * static_cast<uint64_t>(s.master_bytes) / zero_opt);
    b.Alloc(e * 4 / zero_opt);  // Adam m
    b.Alloc(e * 4 / zero_opt);  // Adam v
  }

  const uint64_t A = static_cast<uint64_t>(s.act_bytes);
  const uint64_t heads = static_cast<uint64_t>(s.heads);
  for (int step = 0; step < s.steps; ++step) {
    std::vector<uint64_t> grads;
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      uint64_t seq = static_cast<uint64_t>(s.seq_buckets[mb % s.seq_buckets.size()]);
      uint64_t tok = static_cast<uint64_t>(s.micro_batch) * seq;
      uint64_t scores = static_cast<uint64_t>(s.micro_batch) * heads * seq * seq * A;
      // What one layer keeps for backward (Korthikanti et al.), as tensors.
      std::vector<uint64_t> saved = {tok * h * A,     3 * tok * h * A, scores,
                                     tok * h * A,     tok * h * A,     4 * tok * h * A,
                                     4 * tok * h * A, tok * h,         tok * h};
      std::vector<std::vector<uint64_t>> kept(static_cast<size_t>(s.layers));
      uint64_t x = b.Alloc(tok * h * A);  // embedding output
      for (int l = 0; l < s.layers; ++l) {
        std::vector<uint64_t> gathered;
        if (s.zero_stage >= 3) {
          for (uint64_t e : layer_tensors)
            gathered.push_back(b.Alloc(e * static_cast<uint64_t>(s.param_bytes)));
        }
        uint64_t tmp = b.Alloc(scores);  // pre-softmax scores
        std::vector<uint64_t> ids;
        for (uint64_t bytes : saved) ids.push_back(b.Alloc(bytes));
        b.Free(tmp);
        uint64_t y = b.Alloc(tok * h * A);
        if (s.recompute) {
          for (uint64_t id : ids) b.Free(id);
          ids.clear();
        }
        ids.push_back(x);  // the layer input is kept either way
        kept[static_cast<size_t>(l)] = std::move(ids);
        x = y;
        for (uint64_t g : gathered) b.Free(g);
      }
      uint64_t logits = b.Alloc(tok * static_cast<uint64_t>(s.vocab) * A);
      uint64_t logits32 = b.Alloc(tok * static_cast<uint64_t>(s.vocab) * 4);
      b.Free(logits32);
      uint64_t dlogits = b.Alloc(tok * static_cast<uint64_t>(s.vocab) * A);
      b.Free(logits);
      uint64_t dx = b.Alloc(tok * h * A);
      b.Free(dlogits);
      b.Free(x);
      if (grads.empty()) {
        for (uint64_t e : tensors)
          grads.push_back(b.Alloc(e * static_cast<uint64_t>(s.grad_bytes) / zero_grad));
      }
      for (int l = s.layers - 1; l >= 0; --l) {
        std::vector<uint64_t> gathered, redo;
        if (s.zero_stage >= 3) {
          for (uint64_t e : layer_tensors)
            gathered.push_back(b.Alloc(e * static_cast<uint64_t>(s.param_bytes)));
        }
        if (s.recompute) {
          for (uint64_t bytes : saved) redo.push_back(b.Alloc(bytes));
        }
        std::vector<uint64_t> full_grads;
        if (s.zero_stage >= 2) {
          // Full gradients before the reduce-scatter into the shard.
          for (uint64_t e : layer_tensors)
            full_grads.push_back(b.Alloc(e * static_cast<uint64_t>(s.grad_bytes)));
        }
        uint64_t dscores = b.Alloc(scores);
        uint64_t dnext = b.Alloc(tok * h * A);
        b.Free(dscores);
        for (uint64_t g : full_grads) b.Free(g);
        for (uint64_t id : redo) b.Free(id);
        for (uint64_t id : kept[static_cast<size_t>(l)]) b.Free(id);
        b.Free(dx);
        dx = dnext;
        for (uint64_t g : gathered) b.Free(g);
      }
      b.Free(dx);
      if (s.empty_cache_per_micro_batch) b.EmptyCache();
    }
    // Optimizer step: a temporary per tensor, then gradients are dropped.
    for (uint64_t e : tensors) {
      uint64_t tmp = b.Alloc(e * 4 / zero_opt);
      b.Free(tmp);
    }
    for (uint64_t g : grads) b.Free(g);
  }
  if (b.wrapped()) return InvalidArgument("model shape: the trace's addresses pass 2^64 bytes");
  return t;
}

Result<Plan> MakePlan(const ModelShape& shape, uint64_t device_memory) {
  Plan plan;
  plan.device_memory = device_memory;
  const uint64_t h = static_cast<uint64_t>(shape.hidden);
  plan.embedding_parameters = static_cast<uint64_t>(shape.vocab) * h;
  plan.parameters =
      static_cast<uint64_t>(shape.layers) * (12 * h * h + 9 * h) + plan.embedding_parameters + h;
  ANXIN_ASSIGN_OR_RETURN(Trace trace, GenerateStepTrace(shape));
  plan.events = trace.events.size();

  ReplayOptions base;
  base.plot_points = 2;
  ANXIN_ASSIGN_OR_RETURN(ReplayResult r, Replay(trace, base));
  plan.peak_live = r.peak_live;
  plan.pytorch_peak_reserved = r.Find("pytorch-model")->peak_reserved;

  // Knobs: the least memory; among near-ties (0.5%), the fewest remaps.
  for (uint64_t block : {2 * kMiB, 4 * kMiB, 8 * kMiB}) {
    for (double threshold : {0.0, 0.02, 0.05, 0.15}) {
      ReplayOptions o;
      o.run_model = false;
      o.plot_points = 2;
      o.anxin.block_size = block;
      o.anxin.fragment_threshold = threshold;
      ANXIN_ASSIGN_OR_RETURN(ReplayResult rr, Replay(trace, o));
      const PolicyResult* a = rr.Find("anxin");
      plan.candidates.push_back({block, threshold, a->peak_reserved, a->unmaps});
    }
  }
  uint64_t best = UINT64_MAX;
  for (const auto& c : plan.candidates) best = std::min(best, c.peak_reserved);
  const PlanCandidate* pick = nullptr;
  for (const auto& c : plan.candidates) {
    if (static_cast<double>(c.peak_reserved) > static_cast<double>(best) * 1.005) continue;
    if (!pick || c.remaps < pick->remaps ||
        (c.remaps == pick->remaps && c.block_size > pick->block_size)) {
      pick = &c;
    }
  }
  plan.block_size = pick->block_size;
  plan.threshold = pick->threshold;
  plan.anxin_peak_reserved = pick->peak_reserved;
  // 5% headroom over the replayed peak, in whole blocks.
  uint64_t pool = static_cast<uint64_t>(static_cast<double>(pick->peak_reserved) * 1.05);
  plan.pool_bytes = (pool + pick->block_size - 1) / pick->block_size * pick->block_size;
  plan.pool_fraction =
      device_memory ? static_cast<double>(plan.pool_bytes) / static_cast<double>(device_memory) : 0;
  plan.fits = device_memory == 0 || plan.pool_fraction <= kMaxPoolFraction;

  // Embedding shards: large single tensors need large contiguous blocks under
  // PyTorch's allocator; try shard sizes and keep the largest near the best.
  uint64_t emb_bytes = plan.embedding_parameters * static_cast<uint64_t>(shape.param_bytes);
  for (uint64_t shard : {uint64_t{0}, 1024 * kMiB, 512 * kMiB, 256 * kMiB, 128 * kMiB, 64 * kMiB}) {
    if (shard && shard >= emb_bytes) continue;
    ModelShape s = shape;
    s.embedding_shard = shard;
    s.steps = 1;
    ANXIN_ASSIGN_OR_RETURN(Trace st, GenerateStepTrace(s));
    ReplayOptions o;
    o.plot_points = 2;
    o.anxin.block_size = plan.block_size;
    o.anxin.fragment_threshold = plan.threshold;
    ANXIN_ASSIGN_OR_RETURN(ReplayResult rr, Replay(st, o));
    plan.shard_trials.push_back(
        {shard, rr.Find("pytorch-model")->peak_reserved, rr.Find("anxin")->peak_reserved});
  }
  uint64_t best_shard = UINT64_MAX;
  for (const auto& t : plan.shard_trials)
    best_shard = std::min(best_shard, t.pytorch_peak_reserved);
  plan.embedding_shard = 0;
  for (const auto& t : plan.shard_trials) {
    // Trials run from large to small shards: the first near the best wins.
    if (static_cast<double>(t.pytorch_peak_reserved) <= static_cast<double>(best_shard) * 1.005) {
      plan.embedding_shard = t.shard;
      break;
    }
  }
  return plan;
}

}  // namespace anxin::mem
