// The serving simulator's engine: a continuous-batching scheduler over the
// paged block manager, stepping in simulated time. Each step decodes one
// token for every running sequence and prefills newly admitted ones;
// admission is first come, first served, by free KV blocks (keeping a
// watermark free), under a cap on running sequences and a prefill token
// budget per step. When a running sequence needs a block and none is free,
// the most recently admitted sequences are preempted by recompute: their
// blocks are freed (full ones stay in the prefix cache) and they go back to
// the front of the queue, to be prefilled again with what they had generated.
//
//   EngineOptions options;                  // shape, format, blocks, time model
//   Engine engine(options);
//   std::vector<int32_t> ids = {101, 2023, 2003};
//   ANXIN_ASSIGN_OR_RETURN(RequestId id, engine.Submit({.prompt = ids, .max_tokens = 128}));
//   StepResult step = engine.Step();        // step.seconds of simulated time
//   for (const StepOutput& o : step.outputs) {
//     if (o.id == id) std::printf("token %d\n", o.token);   // one token for request o.id
//   }
//
// Thread safety: none; one owner.
#ifndef ANXIN_SERVE_SIM_SIM_ENGINE_H_
#define ANXIN_SERVE_SIM_SIM_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/kv/kv_format.h"
#include "anxin/serve/sim/block_manager.h"
#include "anxin/serve/sim/sampling.h"
#include "anxin/serve/sim/time_model.h"

namespace anxin::serve::sim {

using RequestId = uint64_t;

struct EngineOptions {
  kv::ModelKvShape shape{};
  kv::KvFormat format{};
  int block_tokens = 16;
  int num_blocks = 0;
  int max_num_seqs = 256;         // the concurrency cap: sequences running at once
  int max_batched_tokens = 8192;  // prefill tokens per step (one longer prompt may run alone)
  int max_waiting = 100000;       // queued requests before new ones are refused
  int max_model_len = 32768;      // prompt + output tokens of one request
  double watermark = 0.01;        // share of blocks admission leaves free for decoding
  bool prefix_caching = true;
  TimeModel time_model = TimeModel::Default();
};

struct EngineRequest {
  std::vector<int32_t> prompt{};
  int max_tokens = 16;
  SamplingParams sampling{};
  uint64_t seed = 0;
};

struct StepOutput {
  RequestId id = 0;
  int32_t token = 0;
  bool first = false;  // the request's first generated token
  bool finished = false;
};

struct StepResult {
  bool idle = true;  // nothing to run
  double seconds = 0;
  int prefill_tokens = 0, prefilled = 0, decode_batch = 0;
  double kv_bytes_read = 0;
  std::vector<StepOutput> outputs;
  std::vector<RequestId> preempted;
};

struct EngineStats {
  uint64_t submitted = 0, refused_queue_full = 0, refused_invalid = 0, completed = 0, cancelled = 0,
           preemptions = 0, steps = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, prefill_tokens = 0, prefix_cached_tokens = 0,
           recomputed_tokens = 0;
  int running = 0, waiting = 0, max_running = 0;
  double simulated_seconds = 0;
  BlockStats blocks;
};

class Engine {
 public:
  // REQUIRES: options.num_blocks > 0.
  explicit Engine(EngineOptions options);

  // kInvalidArgument when the request can never run (empty prompt, longer
  // than max_model_len, or more blocks than the cache has, with its output);
  // kResourceExhausted when the queue is full.
  [[nodiscard]] Result<RequestId> Submit(EngineRequest request);
  // Drops a waiting or running request and frees its blocks.
  void Cancel(RequestId id);
  // Plans and runs one step.
  StepResult Step();

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  EngineStats Stats() const;
  const EngineOptions& options() const { return options_; }

 private:
  struct Seq {
    std::vector<int32_t> prompt;
    std::vector<int32_t> generated;
    int max_tokens = 0;
    std::unique_ptr<PreparedSampler> sampler;
    std::mt19937_64 rng;
    bool ever_ran = false;
  };
  std::vector<int32_t> AllTokens(const Seq& s) const;
  void Preempt(RequestId id, StepResult& r);
  void Finish(RequestId id);

  EngineOptions options_;
  BlockManager blocks_;
  double bytes_per_token_;
  int watermark_blocks_;
  RequestId next_id_ = 1;
  std::unordered_map<RequestId, Seq> seqs_;
  std::deque<RequestId> waiting_;
  std::vector<RequestId> running_;  // in admission order
  EngineStats stats_;
};

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_SIM_ENGINE_H_
