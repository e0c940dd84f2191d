// Allocation traces: what a program allocated and freed, in order, plus the
// state at the start of the trace (recorders are ring buffers, so a trace
// usually begins mid-run with memory already live).
//
// Two inputs: PyTorch memory snapshots (pickles from
// torch.cuda.memory._snapshot(), read with the safe reader in pickle.h) and
// anxin's own JSONL, one object per line:
//   {"action":"segment","addr":4096,"size":20971520,"stream":0}  state at start
//   {"action":"live","addr":4096,"size":1000,"stream":0}         state at start
//   {"action":"alloc","addr":8192,"size":512,"stream":0}
//   {"action":"free","addr":8192}
//   {"action":"segment_alloc","addr":...,"size":...}   what the recording allocator did
//   {"action":"segment_free","addr":...,"size":...}
//   {"action":"empty_cache"}
//
//   ANXIN_ASSIGN_OR_RETURN(Trace t, ReadTrace("snap.pickle"));
//   for (const TraceEvent& e : t.events) {
//     if (e.action == TraceEvent::Action::kAlloc) {
//       std::printf("alloc %llu bytes\n", static_cast<unsigned long long>(e.size));
//     }
//   }
#ifndef ANXIN_MEM_TRACE_H_
#define ANXIN_MEM_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/mem/pickle.h"

namespace anxin::mem {

struct TraceEvent {
  enum class Action : uint8_t { kAlloc, kFree, kSegmentAlloc, kSegmentFree, kEmptyCache, kOom };
  Action action = Action::kAlloc;
  uint64_t addr = 0;
  uint64_t size = 0;  // requested bytes (alloc/free) or segment bytes
  uint64_t stream = 0;
};

// A block live when the trace starts.
struct LiveBlock {
  uint64_t addr = 0;
  uint64_t size = 0;        // requested
  uint64_t block_size = 0;  // as the recording allocator rounded it; 0 if unknown
  uint64_t stream = 0;
};

// A segment the recording allocator held when the trace starts.
struct TraceSegment {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  bool small = false;  // PyTorch's small pool (2 MiB segments)
};

struct Trace {
  std::string source;
  std::vector<TraceSegment> initial_segments;
  std::vector<LiveBlock> initial_live;
  std::vector<TraceEvent> events;
  // True when the trace records the recording allocator's own segment events,
  // so that its reserved memory over time can be reconstructed.
  bool has_segment_events = false;
  uint64_t InitialReserved() const;
  uint64_t InitialLive() const;  // requested bytes
};

// From a PyTorch snapshot: device_traces[device] in order, and the state at
// the first entry reconstructed backwards from the segments at dump time
// (blocks live at dump, minus those allocated during the trace, plus those
// freed during it; likewise segments). free_completed is the free;
// segment_free entries from torch.cuda.empty_cache() become kEmptyCache.
// device < 0 picks the device with the longest trace.
Result<Trace> TraceFromSnapshot(const PickleDoc& doc, int device = -1);
// An anxin JSONL trace; `path` names it in errors.
Result<Trace> ParseJsonlTrace(std::string_view text, const std::string& path);
Result<Trace> ReadJsonlTrace(const std::string& path);
// Either format, decided by content whatever the file's name: a pickle
// starts with byte 0x80, a JSONL trace with '{' or a '#' comment. Anything
// else, a directory, an empty or unreadable file, and a trace without events
// are kInvalidArgument naming the file (and, for content, the formats read).
Result<Trace> ReadTrace(const std::string& path, int device = -1);
Status WriteJsonlTrace(const Trace& trace, const std::string& path);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_TRACE_H_
