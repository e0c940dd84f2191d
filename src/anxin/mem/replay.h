// Replays an allocation trace against allocation policies and measures them:
//   "pytorch-actual"  what the recording PyTorch allocator reserved (from the
//                     trace's segment events; snapshots only),
//   "pytorch-model"   the model of PyTorch's caching allocator (torch_model.h)
//                     starting from the recorded segments and live blocks,
//   "anxin"           anxin's allocator (allocator.h) on a simulated device,
//                     starting from the same live blocks.
//
//   std::string path = "snap.pickle";
//   ANXIN_ASSIGN_OR_RETURN(Trace t, ReadTrace(path));
//   ANXIN_ASSIGN_OR_RETURN(ReplayResult r, Replay(t, ReplayOptions{}));
//   for (const PolicyResult& p : r.policies) fmt::print("{} {}\n", p.name, p.peak_reserved);
//
// Fragmentation measures (docs/mem.md): 1 - peak live / peak reserved (GMLake;
// "peak live" is the trace's own peak of live bytes rounded to 512 B, the same
// for every policy), inactive split bytes / reserved and 1 - largest free
// block / total free at the moment of peak reserved, and rounding waste.
#ifndef ANXIN_MEM_REPLAY_H_
#define ANXIN_MEM_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/mem/allocator.h"
#include "anxin/mem/trace.h"

namespace anxin::mem {

struct ReplayOptions {
  // Device bytes for OOM counting; 0 = as much as the trace needs.
  uint64_t capacity = 0;
  AllocatorOptions anxin;
  // Where anxin's policy gets its memory: "sim" (addresses only, any size on
  // any machine) or a real device, "cuda" or "acl" (docs/mem.md, cuda-check).
  std::string provider = "sim";
  int device = 0;
  bool run_model = true;
  bool run_anxin = true;
  // Samples kept per policy for plots (each the maximum of its stretch).
  size_t plot_points = 1200;
};

struct Sample {
  uint64_t event = 0;
  uint64_t live = 0;  // requested bytes live
  uint64_t reserved = 0;
};

struct PolicyResult {
  std::string name;
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;  // the policy's own block bytes
  uint64_t device_allocs = 0;   // segments (PyTorch) or physical chunks (anxin)
  uint64_t device_frees = 0;
  uint64_t ooms = 0;
  uint64_t final_reserved = 0;
  double fragmentation = 0;                    // 1 - peak live / peak reserved
  double inactive_split = 0;                   // at peak reserved
  double largest_free_gap = 0;                 // 1 - largest free / total free, at peak reserved
  double rounding_waste = 0;                   // 1 - requested / allocated, at peak allocated
  uint64_t maps = 0, unmaps = 0, retries = 0;  // anxin only
  std::vector<Sample> series;
};

struct ReplayResult {
  std::string source;
  uint64_t events = 0, allocs = 0, frees = 0;
  uint64_t trace_segment_allocs = 0, trace_segment_frees = 0;
  uint64_t initial_live = 0, initial_blocks = 0, initial_reserved = 0;
  uint64_t peak_live = 0;  // requested bytes rounded to 512 B
  uint64_t capacity = 0;   // ReplayOptions::capacity
  std::vector<PolicyResult> policies;
  const PolicyResult* Find(const std::string& name) const;
};

Result<ReplayResult> Replay(const Trace& trace, const ReplayOptions& options);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_REPLAY_H_
