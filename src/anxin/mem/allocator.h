// anxin's caching device-memory allocator.
//
// On a virtual-memory provider (sim, cuda, acl) each stream's pool is one large
// reserved address range carved best-fit into blocks (512-byte rounding);
// physical memory is created in `block_size` chunks and mapped only under
// blocks in use or cached. When a new block needs physical chunks, the
// allocator first takes chunks it already holds: unmapped ones, then idle
// mapped ones (under free address space) which it unmaps and maps where they
// are needed ("stitching", as in GMLake). So free memory never strands in
// pieces too small to use, and peak reserved stays near peak allocated.
// On a plain provider it falls back to segments, split and merged within one
// segment, released when wholly free.
//
//   ANXIN_ASSIGN_OR_RETURN(auto a, Allocator::Create(MakeSimProvider({}), {}));
//   ANXIN_ASSIGN_OR_RETURN(uint64_t p, a->Allocate(4096, /*stream=*/0));
//   ANXIN_TRY(a->Free(p));
//   AllocatorStats s = a->Stats();
//
// Freed blocks go to per-size caches (O(1) reuse); the best-fit index is a
// balanced tree (O(log n)). Thread safety: all methods may be called from any
// thread; one mutex guards the state.
#ifndef ANXIN_MEM_ALLOCATOR_H_
#define ANXIN_MEM_ALLOCATOR_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "anxin/base/error.h"
#include "anxin/base/strings.h"
#include "anxin/mem/provider.h"

namespace anxin::mem {

// More than any device holds: a larger request is an OOM at once (and
// rounding it up could wrap past 2^64).
inline constexpr uint64_t kMaxRequestBytes = uint64_t{1} << 56;

// The field report's knobs (ANXIN_ALLOC_CONF, alloc_config.h).
struct AllocatorOptions {
  // The pool: a fraction of device memory, or bytes when pool_bytes > 0.
  double pool_fraction = 0.85;
  uint64_t pool_bytes = 0;
  // Physical chunk (virtual-memory providers) or segment rounding (plain).
  // A multiple of the provider's granularity.
  uint64_t block_size = 2 * kMiB;
  // Grow beyond the pool when the device still has room (counted).
  bool expand = true;
  // Free memory the allocator tolerates holding (cached blocks and idle
  // mapped chunks, as a fraction of reserved) before it reclaims and remaps
  // instead of creating more physical memory.
  double fragment_threshold = 0.02;
  // Requests up to this size are "small": they have their own address range
  // (virtual memory) or 2 MiB segments (plain), so they do not pin chunks
  // between large blocks. 4 MiB measured best on the real snapshots
  // (docs/mem.md): blocks under two chunks pack tighter among themselves.
  uint64_t small_size = 4 * kMiB;
};

struct AllocatorStats {
  uint64_t reserved_bytes = 0;      // physical memory held
  uint64_t allocated_bytes = 0;     // in blocks handed out (rounded sizes)
  uint64_t requested_bytes = 0;     // as asked by callers
  uint64_t cached_bytes = 0;        // freed blocks kept for reuse by size
  uint64_t largest_free_block = 0;  // largest request servable without new memory
  uint64_t pool_limit_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  double fragmentation = 0;  // 1 - largest_free_block / (reserved - allocated)
  uint64_t allocs = 0, frees = 0;
  uint64_t device_allocs = 0;  // physical chunks or segments created
  uint64_t device_frees = 0;
  uint64_t maps = 0, unmaps = 0;  // chunk mappings (virtual-memory providers)
  uint64_t reclaims = 0;          // times cached or idle memory was reused to avoid growth
  uint64_t retries = 0;           // allocations that succeeded only after reclaiming
  uint64_t ooms = 0;
  uint64_t expansions = 0;  // allocations that grew beyond the pool
  bool virtual_memory = false;
};

class Allocator {
 public:
  // REQUIRES: provider != nullptr.
  static Result<std::unique_ptr<Allocator>> Create(std::unique_ptr<Provider> provider,
                                                   AllocatorOptions options);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // A block of at least `size` bytes, 512-byte aligned, usable on `stream`.
  // kResourceExhausted (message carries the stats) when neither the pool, the
  // reclaim path nor expansion can supply it.
  Result<uint64_t> Allocate(uint64_t size, uint64_t stream = 0);
  // kInvalidArgument for an address this allocator did not hand out.
  Status Free(uint64_t addr);
  // Returns every cached block and idle chunk to the device.
  Status EmptyCache();
  AllocatorStats Stats() const;
  // Checks the internal invariants (tests): contiguity, no overlap, merged
  // neighbours, free indexes holding exactly the free blocks, consistent
  // counters and mappings.
  Status CheckInvariants() const;
  // Tests only, to see CheckInvariants catch a broken free index: puts the
  // block in use at `addr` into its pool's free index (indexed) or takes it
  // out again. Undo it before the allocator is destroyed.
  Status SetIndexedForTesting(uint64_t addr, bool indexed);
  const Provider& provider() const { return *provider_; }

  struct State;  // the implementation (allocator.cc)

 private:
  struct Request;  // one Allocate call in progress (allocator.cc)

  Allocator(std::unique_ptr<Provider> provider, AllocatorOptions options);

  // The steps of Allocate, called with mu_ held. A step that fails leaves
  // q.block taken (Allocate returns it to the index) and the rest of the
  // state consistent, keeping what it reclaimed on the way.
  // The fast path: hands out a cached block of exactly the rounded size, if
  // there is one, and says whether it did.
  bool TakeCached(Request& q);
  // Plain provider: a free block in a segment, releasing wholly free segments
  // or adding a segment when needed.
  Status FindInSegments(Request& q);
  // Virtual memory: a free address block, reserving a new range when needed.
  Status FindInAddressSpace(Request& q);
  // Takes q.block out of its pool's free index, splitting off the remainder.
  void TakeFromIndex(Request& q);
  // Undoes TakeFromIndex: the block goes back into the free index.
  void ReturnToIndex(Request& q);
  // Virtual memory: gives each chunk under q.block physical memory, from
  // unmapped handles, idle chunks, cached blocks or the device, in that order.
  Status BackWithChunks(Request& q);
  Status ReclaimBeforeGrowing(Request& q);
  Status ReclaimAll(Request& q);
  Status CreateChunks(Request& q);
  Status MapChunks(Request& q);
  // Counts an OOM for q with the stats in its message.
  Error Oom(const Request& q, const std::string& why);
  // Hands q.block out: live map and counters.
  uint64_t Commit(Request& q);

  std::unique_ptr<Provider> provider_;
  std::unique_ptr<State> state_;
  mutable std::mutex mu_;
};

}  // namespace anxin::mem

#endif  // ANXIN_MEM_ALLOCATOR_H_
