// `anxin mem plan`: from a model's shape and training setup, a synthetic trace
// of training steps (parameters, optimizer state, gradients, activations per
// micro-batch, recompute, ZeRO sharding, precision policy), replayed through
// the PyTorch model and anxin's allocator to recommend pool size, block size,
// fragment threshold and an embedding shard size.
//
//   ModelShape shape;           // defaults: a 2.7B-parameter GPT-style model
//   shape.zero_stage = 1; shape.dp = 8;
//   ANXIN_ASSIGN_OR_RETURN(Plan plan, MakePlan(shape, 64 * kGiB));
//
// The trace is an estimate from the shapes, not a measurement: check the plan
// against `anxin mem replay` of a real snapshot when one is at hand.
#ifndef ANXIN_MEM_PLAN_H_
#define ANXIN_MEM_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/mem/trace.h"

namespace anxin::mem {

struct ModelShape {
  int layers = 32;
  int hidden = 2560;
  int heads = 32;
  int vocab = 50304;
  std::vector<int> seq_buckets = {512, 1024};
  int micro_batch = 4;    // sequences per micro-batch
  int micro_batches = 4;  // per optimizer step (gradient accumulation)
  bool recompute = false;
  int zero_stage = 0;  // 0..3
  int dp = 1;          // data-parallel ranks sharing ZeRO state
  // Precision policy, bytes per element: master weights (0 = none), working
  // parameters, gradients, activations; Adam keeps two fp32 states.
  int master_bytes = 4;
  int param_bytes = 2;
  int grad_bytes = 2;
  int act_bytes = 2;
  uint64_t embedding_shard = 0;  // bytes per embedding shard; 0 = one tensor
  bool empty_cache_per_micro_batch = false;
  int steps = 2;
};

// "fp32-master,bf16-params,bf16-grads,fp16-acts" and the like.
Status ApplyPrecision(const std::string& policy, ModelShape& shape);

Result<Trace> GenerateStepTrace(const ModelShape& shape);

struct PlanCandidate {
  uint64_t block_size = 0;
  double threshold = 0;
  uint64_t peak_reserved = 0;
  uint64_t remaps = 0;  // unmaps of idle chunks
};

struct ShardTrial {
  uint64_t shard = 0;  // 0 = unsharded
  uint64_t pytorch_peak_reserved = 0;
  uint64_t anxin_peak_reserved = 0;
};

// The most of the device a recommended pool may take: the rest is left to
// the framework's context, kernels' workspaces and other processes.
inline constexpr double kMaxPoolFraction = 0.95;

struct Plan {
  uint64_t parameters = 0;
  uint64_t embedding_parameters = 0;
  uint64_t events = 0;
  uint64_t peak_live = 0;
  uint64_t pytorch_peak_reserved = 0;
  uint64_t anxin_peak_reserved = 0;
  uint64_t device_memory = 0;
  // Recommendations. pool_bytes is what the pool needs (the replayed peak
  // plus 5%, in whole blocks); pool_fraction, that over device_memory.
  // fits: device_memory is 0 (unknown) or pool_fraction <= kMaxPoolFraction.
  uint64_t pool_bytes = 0;
  double pool_fraction = 0;
  bool fits = true;
  uint64_t block_size = 0;
  double threshold = 0;
  uint64_t embedding_shard = 0;
  std::vector<PlanCandidate> candidates;
  std::vector<ShardTrial> shard_trials;
};

Result<Plan> MakePlan(const ModelShape& shape, uint64_t device_memory);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_PLAN_H_
