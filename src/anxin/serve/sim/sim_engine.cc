#include "anxin/serve/sim/sim_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "anxin/serve/sim/sim_text.h"

namespace anxin::serve::sim {

Engine::Engine(EngineOptions options)
    : options_(std::move(options)),
      blocks_({.num_blocks = options_.num_blocks,
               .block_tokens = options_.block_tokens,
               .prefix_caching = options_.prefix_caching}),
      bytes_per_token_(kv::BytesPerToken(options_.shape, options_.format)),
      watermark_blocks_(static_cast<int>(std::floor(options_.watermark * options_.num_blocks))) {}

std::vector<int32_t> Engine::AllTokens(const Seq& s) const {
  std::vector<int32_t> t = s.prompt;
  t.insert(t.end(), s.generated.begin(), s.generated.end());
  return t;
}

Result<RequestId> Engine::Submit(EngineRequest req) {
  if (req.prompt.empty()) {
    ++stats_.refused_invalid;
    return InvalidArgument("the prompt is empty");
  }
  if (req.max_tokens < 1) {
    ++stats_.refused_invalid;
    return InvalidArgument(fmt::format("max_tokens {} must be at least 1", req.max_tokens));
  }
  const int64_t total = static_cast<int64_t>(req.prompt.size()) + req.max_tokens;
  if (total > options_.max_model_len) {
    ++stats_.refused_invalid;
    return InvalidArgument(fmt::format(
        "this request needs {} tokens ({} in the prompt + max_tokens {}), more than the "
        "model's context of {}",
        total, req.prompt.size(), req.max_tokens, options_.max_model_len));
  }
  const int64_t blocks_needed = (total + options_.block_tokens - 1) / options_.block_tokens;
  if (blocks_needed > options_.num_blocks - watermark_blocks_) {
    ++stats_.refused_invalid;
    return InvalidArgument(fmt::format(
        "this request needs {} KV blocks of {} tokens and the cache has {}: it could never run",
        blocks_needed, options_.block_tokens, options_.num_blocks - watermark_blocks_));
  }
  if (static_cast<int>(waiting_.size()) >= options_.max_waiting) {
    ++stats_.refused_queue_full;
    return ResourceExhausted(
        fmt::format("the queue holds {} requests already (max_waiting)", waiting_.size()));
  }
  if (auto s = ValidateSampling(req.sampling); !s) {
    ++stats_.refused_invalid;
    return std::unexpected(s.error());
  }
  const RequestId id = next_id_++;
  Seq seq;
  seq.prompt = std::move(req.prompt);
  seq.max_tokens = req.max_tokens;
  seq.sampler = std::make_unique<PreparedSampler>(SimLogits(), req.sampling);
  seq.rng.seed(req.seed ^ (id * 0x9e3779b97f4a7c15ull));
  stats_.prompt_tokens += seq.prompt.size();
  seqs_.emplace(id, std::move(seq));
  waiting_.push_back(id);
  ++stats_.submitted;
  return id;
}

void Engine::Cancel(RequestId id) {
  if (!seqs_.contains(id)) return;
  if (auto it = std::find(waiting_.begin(), waiting_.end(), id); it != waiting_.end()) {
    waiting_.erase(it);
  }
  if (auto it = std::find(running_.begin(), running_.end(), id); it != running_.end()) {
    running_.erase(it);
  }
  blocks_.Free(id);
  seqs_.erase(id);
  ++stats_.cancelled;
}

void Engine::Preempt(RequestId id, StepResult& r) {
  blocks_.Free(id);
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  r.preempted.push_back(id);
  ++stats_.preemptions;
}

void Engine::Finish(RequestId id) {
  blocks_.Free(id);
  running_.erase(std::find(running_.begin(), running_.end(), id));
  seqs_.erase(id);
  ++stats_.completed;
}

StepResult Engine::Step() {
  StepResult r;
  // 1. A slot for every running sequence's next token; preempt from the
  // back (the most recently admitted) until it fits.
  std::vector<RequestId> decode;
  for (size_t i = 0; i < running_.size();) {
    const RequestId id = running_[i];
    Seq& s = seqs_.at(id);
    bool placed = false;
    for (;;) {
      auto a = blocks_.Append(id, s.generated.back());
      if (a) {
        placed = true;
        break;
      }
      const RequestId victim = running_.back();
      Preempt(victim, r);
      if (victim == id) break;
    }
    if (!placed) break;  // it was the last one running
    decode.push_back(id);
    ++i;
  }
  // 2. Admission, first come first served, unless this step had to preempt.
  std::vector<RequestId> prefill;
  if (r.preempted.empty()) {
    int budget = options_.max_batched_tokens - static_cast<int>(decode.size());
    while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_num_seqs) {
      const RequestId id = waiting_.front();
      Seq& s = seqs_.at(id);
      const std::vector<int32_t> tokens = AllTokens(s);
      if (!blocks_.CanAllocate(tokens, watermark_blocks_)) break;
      const int total_blocks =
          static_cast<int>((tokens.size() + options_.block_tokens - 1) / options_.block_tokens);
      const int cached = (total_blocks - blocks_.BlocksNeeded(tokens)) * options_.block_tokens;
      const int compute = static_cast<int>(tokens.size()) - cached;
      if (compute > budget && (!prefill.empty() || !decode.empty())) break;
      auto hit = blocks_.Allocate(id, tokens);
      if (!hit) break;  // cannot happen after CanAllocate; stop admitting
      waiting_.pop_front();
      running_.push_back(id);
      prefill.push_back(id);
      budget -= static_cast<int>(tokens.size()) - *hit;
      r.prefill_tokens += static_cast<int>(tokens.size()) - *hit;
      stats_.prefix_cached_tokens += *hit;
      if (s.ever_ran) stats_.recomputed_tokens += tokens.size() - *hit;
      s.ever_ran = true;
    }
  }
  if (decode.empty() && prefill.empty()) {
    stats_.running = static_cast<int>(running_.size());
    stats_.waiting = static_cast<int>(waiting_.size());
    return r;
  }
  r.idle = false;
  r.decode_batch = static_cast<int>(decode.size());
  r.prefilled = static_cast<int>(prefill.size());
  for (RequestId id : decode) r.kv_bytes_read += blocks_.Length(id) * bytes_per_token_;
  r.seconds = options_.time_model.StepSeconds({.prefill_tokens = r.prefill_tokens,
                                               .decode_batch = r.decode_batch,
                                               .kv_bytes_read = r.kv_bytes_read});
  // 3. Every scheduled sequence yields one token.
  auto emit = [&](RequestId id) {
    Seq& s = seqs_.at(id);
    const int32_t token = s.sampler->Draw(s.rng);
    s.generated.push_back(token);
    const bool finished = static_cast<int>(s.generated.size()) >= s.max_tokens;
    r.outputs.push_back({id, token, s.generated.size() == 1, finished});
    ++stats_.generated_tokens;
    if (finished) Finish(id);
  };
  for (RequestId id : decode) emit(id);
  for (RequestId id : prefill) emit(id);
  ++stats_.steps;
  stats_.prefill_tokens += r.prefill_tokens;
  stats_.simulated_seconds += r.seconds;
  stats_.max_running = std::max(stats_.max_running, r.decode_batch + r.prefilled);
  stats_.running = static_cast<int>(running_.size());
  stats_.waiting = static_cast<int>(waiting_.size());
  return r;
}

EngineStats Engine::Stats() const {
  EngineStats s = stats_;
  s.running = static_cast<int>(running_.size());
  s.waiting = static_cast<int>(waiting_.size());
  s.blocks = blocks_.Stats();
  return s;
}

}  // namespace anxin::serve::sim
