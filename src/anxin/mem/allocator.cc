#include "anxin/mem/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "anxin/mem/context.h"

namespace anxin::mem {
namespace {

constexpr uint64_t kAlign = 512;
constexpr PhysicalHandle kNoHandle = 0;

uint64_t RoundUp(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

// An open-addressing hash map from 512-byte-aligned keys (addresses, sizes) to
// pointers: linear probing in a power-of-two table, Fibonacci hashing, and
// backward-shift deletion (no tombstones). A lookup is a multiply and, almost
// always, one cache line; std::unordered_map's prime modulo costs a division.
// A cached 8 MiB malloc+free pair does three lookups: about 47 ns with
// std::unordered_map, 36 ns with this (bench/mem, BM_AnxinSameSize).
template <typename V>
class FlatMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // never a multiple of 512

  FlatMap() { Rehash(16); }

  V* Find(uint64_t key) const {
    if (key == kEmpty) return nullptr;
    for (size_t i = Slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return const_cast<V*>(&slots_[i].value);
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  // The value for `key`, inserted as V{} when absent.
  V& operator[](uint64_t key) {
    if (V* v = Find(key)) return *v;
    if ((size_ + 1) * 4 > slots_.size() * 3) Rehash(slots_.size() * 2);
    size_t i = Slot(key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i].key = key;
    slots_[i].value = V{};
    ++size_;
    return slots_[i].value;
  }

  bool Erase(uint64_t key) {
    if (key == kEmpty) return false;
    size_t i = Slot(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == kEmpty) return false;
      i = (i + 1) & mask_;
    }
    // Shift later members of the probe run back so that no lookup stops early.
    for (size_t j = (i + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
      size_t home = Slot(slots_[j].key);
      // Move j into the hole at i unless its home lies cyclically in (i, j].
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = kEmpty;
    --size_;
    return true;
  }

  size_t size() const { return size_; }

  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Entry& e : slots_) {
      if (e.key != kEmpty) fn(e.key, e.value);
    }
  }

 private:
  struct Entry {
    uint64_t key = kEmpty;
    V value{};
  };

  size_t Slot(uint64_t key) const {
    return static_cast<size_t>(((key >> 9) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void Rehash(size_t n) {
    std::vector<Entry> old = std::move(slots_);
    slots_.assign(n, Entry{});
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(n));
    size_ = 0;
    for (const Entry& e : old) {
      if (e.key == kEmpty) continue;
      size_t i = Slot(e.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = e;
      ++size_;
    }
  }

  std::vector<Entry> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

struct Region;
struct Pool;

enum class BlockState : uint8_t { kFree, kAllocated, kCached };

struct Block {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t requested = 0;
  Region* region = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  BlockState state = BlockState::kFree;
};

struct BySizeAddr {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->addr < b->addr;
  }
};

// A contiguous address range: a whole reserved range (virtual memory) or one
// segment (plain provider).
struct Region {
  uint64_t base = 0;
  uint64_t size = 0;
  Pool* pool = nullptr;
  bool small = false;
  // Virtual memory only, one entry per chunk.
  std::vector<PhysicalHandle> handle;
  std::vector<uint32_t> users;    // allocated or cached blocks touching the chunk
  std::vector<int32_t> idle_pos;  // index in State::idle, or -1
  // The block at `base`. Merges keep the lower block, so this never changes.
  Block* first = nullptr;
};

// Freed blocks of one size, kept whole for O(1) reuse.
struct QuickList {
  std::vector<Block*> blocks;
  bool listed = false;  // in State::quick_lists
};

struct Pool {
  uint64_t stream = 0;
  bool small = false;
  std::set<Block*, BySizeAddr> free;
  std::vector<QuickList> quick_small;  // by size / 512
  FlatMap<QuickList*> quick_large;     // by size; the lists live in quick_large_storage
  std::vector<std::unique_ptr<QuickList>> quick_large_storage;
  std::vector<Region*> regions;
};

}  // namespace

struct Allocator::State {
  AllocatorOptions opt;
  bool vm = false;
  uint64_t chunk = 0;
  uint64_t pool_limit = 0;
  // Larger requests can never be served: the device's memory, at most
  // kMaxRequestBytes.
  uint64_t max_request = 0;
  uint64_t va_region_size = 0;
  std::unordered_map<uint64_t, Pool*> pools;  // key: stream * 2 + small
  std::vector<std::unique_ptr<Pool>> pool_storage;
  std::vector<std::unique_ptr<Region>> regions;
  FlatMap<Block*> live;  // allocated or cached, by address
  std::vector<Block*> spare_blocks;
  std::vector<PhysicalHandle> cached_handles;      // created, unmapped
  std::vector<std::pair<Region*, uint32_t>> idle;  // mapped chunks no block uses
  uint64_t quick_bytes = 0;
  // Quick lists that may hold blocks, so that flushing does not scan all sizes.
  std::vector<QuickList*> quick_lists;
  Pool* last_pool[2] = {nullptr, nullptr};  // by small
  AllocatorStats st;

  ~State() {
    live.ForEach([](uint64_t, Block* b) { delete b; });
    for (Block* b : spare_blocks) delete b;
  }
};

namespace {

using State = Allocator::State;

Block* NewBlock(State& s) {
  if (s.spare_blocks.empty()) return new Block();
  Block* b = s.spare_blocks.back();
  s.spare_blocks.pop_back();
  *b = Block();
  return b;
}

void DropBlock(State& s, Block* b) { s.spare_blocks.push_back(b); }

std::pair<uint64_t, uint64_t> ChunkRange(const State& s, const Region& r, uint64_t addr,
                                         uint64_t size) {
  uint64_t first = (addr - r.base) / s.chunk;
  uint64_t last = (addr + size - 1 - r.base) / s.chunk;
  return {first, last + 1};
}

void MarkIdle(State& s, Region* r, uint32_t g) {
  r->idle_pos[g] = static_cast<int32_t>(s.idle.size());
  s.idle.emplace_back(r, g);
}

void UnmarkIdle(State& s, Region* r, uint32_t g) {
  int32_t pos = r->idle_pos[g];
  auto last = s.idle.back();
  s.idle[pos] = last;
  last.first->idle_pos[last.second] = pos;
  s.idle.pop_back();
  r->idle_pos[g] = -1;
}

// A block starts being used (allocated or cached): its chunks are not idle.
void AcquireChunks(State& s, Block* b) {
  if (!s.vm) return;
  Region* r = b->region;
  auto [lo, hi] = ChunkRange(s, *r, b->addr, b->size);
  for (uint64_t g = lo; g < hi; ++g) {
    if (r->users[g]++ == 0 && r->handle[g] != kNoHandle) UnmarkIdle(s, r, g);
  }
}

void ReleaseChunks(State& s, Block* b) {
  if (!s.vm) return;
  Region* r = b->region;
  auto [lo, hi] = ChunkRange(s, *r, b->addr, b->size);
  for (uint64_t g = lo; g < hi; ++g) {
    if (--r->users[g] == 0 && r->handle[g] != kNoHandle) MarkIdle(s, r, static_cast<uint32_t>(g));
  }
}

// Puts a no-longer-used block back into its pool's free index, merged with
// free neighbours of the same region.
void InsertFree(State& s, Block* b) {
  Pool* p = b->region->pool;
  b->state = BlockState::kFree;
  b->requested = 0;
  if (b->prev && b->prev->state == BlockState::kFree) {
    Block* prev = b->prev;
    p->free.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    DropBlock(s, b);
    b = prev;
  }
  if (b->next && b->next->state == BlockState::kFree) {
    Block* next = b->next;
    p->free.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    DropBlock(s, next);
  }
  p->free.insert(b);
}

void FlushQuick(State& s) {
  for (QuickList* list : s.quick_lists) {
    for (Block* b : list->blocks) {
      s.live.Erase(b->addr);
      ReleaseChunks(s, b);
      InsertFree(s, b);
    }
    list->blocks.clear();
    list->listed = false;
  }
  s.quick_lists.clear();
  s.quick_bytes = 0;
  s.st.cached_bytes = 0;
}

Status UnmapIdle(State& s, Provider& pv, uint64_t want_chunks) {
  // One synchronisation for the whole pass: the chunks may back blocks that
  // kernels in flight still use.
  if (want_chunks > 0 && !s.idle.empty()) {
    if (auto synced = pv.Synchronize(); !synced) {
      return std::unexpected(
          std::move(synced.error()).With("waiting for the device before unmapping idle chunks"));
    }
  }
  while (want_chunks > 0 && !s.idle.empty()) {
    auto [r, g] = s.idle.back();
    uint64_t va = r->base + uint64_t{g} * s.chunk;
    if (auto unmapped = pv.Unmap(va, s.chunk); !unmapped) {
      return std::unexpected(
          std::move(unmapped.error()).With(fmt::format("unmapping idle chunk at {:#x}", va)));
    }
    s.idle.pop_back();
    r->idle_pos[g] = -1;
    s.cached_handles.push_back(r->handle[g]);
    r->handle[g] = kNoHandle;
    ++s.st.unmaps;
    --want_chunks;
  }
  return Ok();
}

std::string DescribeStats(const State& s, uint64_t total) {
  return fmt::format(
      "reserved {} of pool {} (device {}), allocated {}, cached {}, idle chunks {}, "
      "ooms {}, expansions {}",
      s.st.reserved_bytes, s.pool_limit, total, s.st.allocated_bytes, s.st.cached_bytes,
      s.idle.size(), s.st.ooms + 1, s.st.expansions);
}

Error OomError(const State& s, const Provider& pv, uint64_t size, uint64_t stream,
               const std::string& why) {
  return Error(ErrorCode::kResourceExhausted,
               fmt::format("{}: out of memory allocating {} bytes on stream {} ({}): {}; raise "
                           "pool_size, set expand:true, or call empty_cache()",
                           pv.name(), size, stream, why, DescribeStats(s, pv.TotalMemory())));
}

Pool* FindOrAddPool(State& s, uint64_t stream, bool small);

Pool* GetPool(State& s, uint64_t stream, bool small) {
  // Most programs use one stream: skip the hash lookup for the last one.
  if (s.last_pool[small] && s.last_pool[small]->stream == stream) return s.last_pool[small];
  Pool* p = FindOrAddPool(s, stream, small);
  s.last_pool[small] = p;
  return p;
}

Pool* FindOrAddPool(State& s, uint64_t stream, bool small) {
  uint64_t key = stream * 2 + (small ? 1 : 0);
  auto it = s.pools.find(key);
  if (it != s.pools.end()) return it->second;
  auto p = std::make_unique<Pool>();
  p->stream = stream;
  p->small = small;
  p->quick_small.resize(s.opt.small_size / kAlign + 1);
  Pool* raw = p.get();
  s.pool_storage.push_back(std::move(p));
  s.pools[key] = raw;
  return raw;
}

Region* AddRegion(State& s, Pool* p, uint64_t base, uint64_t size) {
  auto r = std::make_unique<Region>();
  r->base = base;
  r->size = size;
  r->pool = p;
  r->small = p->small;
  if (s.vm) {
    uint64_t n = size / s.chunk;
    r->handle.assign(n, kNoHandle);
    r->users.assign(n, 0);
    r->idle_pos.assign(n, -1);
  }
  Block* b = NewBlock(s);
  b->addr = base;
  b->size = size;
  b->region = r.get();
  Region* raw = r.get();
  p->regions.push_back(raw);
  s.regions.push_back(std::move(r));
  raw->first = b;
  p->free.insert(b);
  return raw;
}

QuickList& LargeList(Pool* p, uint64_t size) {
  QuickList*& list = p->quick_large[size];
  if (!list) {
    p->quick_large_storage.push_back(std::make_unique<QuickList>());
    list = p->quick_large_storage.back().get();
  }
  return *list;
}

Block* FindFree(Pool* p, uint64_t size) {
  Block key;
  key.size = size;
  key.addr = 0;
  auto it = p->free.lower_bound(&key);
  return it == p->free.end() ? nullptr : *it;
}

// Plain providers: segments that are wholly free go back to the device.
Status ReleaseFreeSegments(State& s, Provider& pv) {
  for (auto& pool : s.pool_storage) {
    for (auto it = pool->regions.begin(); it != pool->regions.end();) {
      Region* r = *it;
      Block* b = r->first;
      if (b->state == BlockState::kFree && b->size == r->size) {
        ANXIN_TRY(pv.Free(r->base, r->size));
        pool->free.erase(b);
        DropBlock(s, b);
        s.st.reserved_bytes -= r->size;
        ++s.st.device_frees;
        it = pool->regions.erase(it);
        auto owned = std::find_if(s.regions.begin(), s.regions.end(),
                                  [r](const auto& u) { return u.get() == r; });
        s.regions.erase(owned);
      } else {
        ++it;
      }
    }
  }
  return Ok();
}

// Free memory the allocator holds beyond fragment_threshold of reserved:
// time to reuse it rather than create more.
bool FreeMemoryOverThreshold(const State& s) {
  uint64_t idle = s.idle.size() * s.chunk + s.quick_bytes +
                  (s.vm ? 0 : s.st.reserved_bytes - s.st.allocated_bytes - s.quick_bytes);
  return static_cast<double>(idle) >
         s.opt.fragment_threshold * static_cast<double>(s.st.reserved_bytes);
}

// Plain providers: cached blocks back to the index, wholly free segments back
// to the device.
Status ReclaimSegments(State& s, Provider& pv) {
  FlushQuick(s);
  ANXIN_TRY(ReleaseFreeSegments(s, pv));
  ++s.st.reclaims;
  return Ok();
}

}  // namespace

Allocator::Allocator(std::unique_ptr<Provider> provider, AllocatorOptions options)
    : provider_(std::move(provider)), state_(std::make_unique<State>()) {
  state_->opt = options;
}

Result<std::unique_ptr<Allocator>> Allocator::Create(std::unique_ptr<Provider> provider,
                                                     AllocatorOptions o) {
  if (!provider) return InvalidArgument("allocator needs a provider");
  uint64_t g = provider->Granularity();
  if (o.block_size == 0 || g == 0 || o.block_size % g != 0) {
    return InvalidArgument(fmt::format(
        "block_size {} is not a multiple of the {} provider's granularity {}; use a multiple "
        "such as 2MiB",
        o.block_size, provider->name(), g));
  }
  if (o.fragment_threshold < 0 || o.fragment_threshold > 1) {
    return InvalidArgument(
        fmt::format("fragment_threshold {} is outside [0, 1]", o.fragment_threshold));
  }
  if (o.pool_bytes == 0 && (o.pool_fraction <= 0 || o.pool_fraction > 1)) {
    return InvalidArgument(fmt::format(
        "pool_size {} is neither a fraction in (0, 1] nor a byte size", o.pool_fraction));
  }
  if (o.small_size < kAlign || o.small_size > 64 * kMiB) {
    return InvalidArgument(fmt::format("small_size {} is outside [512, 64MiB]", o.small_size));
  }
  std::unique_ptr<Allocator> a(new Allocator(std::move(provider), o));
  State& s = *a->state_;
  s.vm = a->provider_->SupportsVirtualMemory();
  s.chunk = o.block_size;
  uint64_t total = a->provider_->TotalMemory();
  s.pool_limit = o.pool_bytes > 0
                     ? o.pool_bytes
                     : static_cast<uint64_t>(o.pool_fraction * static_cast<double>(total));
  s.pool_limit = std::max(s.pool_limit / s.chunk * s.chunk, s.chunk);
  s.max_request = total ? std::min(total, kMaxRequestBytes) : kMaxRequestBytes;
  s.va_region_size = RoundUp(std::clamp<uint64_t>(2 * total, kGiB, uint64_t{1} << 40), s.chunk);
  s.st.pool_limit_bytes = s.pool_limit;
  s.st.virtual_memory = s.vm;
  return a;
}

Allocator::~Allocator() {
  State& s = *state_;
  Provider& pv = *provider_;
  if (s.vm && !s.regions.empty()) (void)pv.Synchronize();
  for (auto& r : s.regions) {
    if (s.vm) {
      for (size_t g = 0; g < r->handle.size(); ++g) {
        if (r->handle[g] == kNoHandle) continue;
        (void)pv.Unmap(r->base + g * s.chunk, s.chunk);
        (void)pv.ReleasePhysical(r->handle[g], s.chunk);
      }
      (void)pv.ReleaseAddress(r->base, r->size);
    } else {
      (void)pv.Free(r->base, r->size);
    }
  }
  for (PhysicalHandle h : s.cached_handles) (void)pv.ReleasePhysical(h, s.chunk);
  // Free blocks are owned by the pools' indexes; live ones by `live`.
  for (auto& p : s.pool_storage) {
    for (Block* b : p->free) delete b;
  }
}

// One Allocate call: what was asked, the block chosen for it, and (virtual
// memory) which of the block's chunks still lack physical memory.
struct Allocator::Request {
  uint64_t size = 0;  // as asked
  uint64_t stream = 0;
  uint64_t rounded = 0;  // size rounded up to kAlign
  bool small = false;
  Pool* pool = nullptr;
  Block* block = nullptr;
  bool reclaimed = false;  // cached or idle memory was reused for this call
  // The block's chunks [lo, hi) in its region; `need` of them are unmapped.
  uint64_t lo = 0, hi = 0, need = 0;

  void CountNeed(const State& s) {
    const Region& r = *block->region;
    std::tie(lo, hi) = ChunkRange(s, r, block->addr, block->size);
    need = 0;
    for (uint64_t g = lo; g < hi; ++g) need += r.handle[g] == kNoHandle;
  }
};

Result<uint64_t> Allocator::Allocate(uint64_t size, uint64_t stream) {
  std::lock_guard lock(mu_);
  State& s = *state_;
  Request q;
  q.size = size;
  q.stream = stream;
  // Larger than the device (or than any): an OOM at once.
  if (size > s.max_request) [[unlikely]] {
    return std::unexpected(Oom(q, "larger than the device"));
  }
  q.rounded = RoundUp(std::max<uint64_t>(size, 1), kAlign);
  q.small = q.rounded <= s.opt.small_size;
  q.pool = GetPool(s, stream, q.small);
  if (TakeCached(q)) return q.block->addr;
  ANXIN_TRY(s.vm ? FindInAddressSpace(q) : FindInSegments(q));
  TakeFromIndex(q);
  if (s.vm) {
    if (Status backed = BackWithChunks(q); !backed) {
      // Whatever failed (no memory, or a synchronize, unmap or map the
      // device refused), the block was never handed out: it goes back.
      ReturnToIndex(q);
      return std::unexpected(std::move(backed).error());
    }
  }
  return Commit(q);
}

bool Allocator::TakeCached(Request& q) {
  State& s = *state_;
  std::vector<Block*>* quick = nullptr;
  if (q.small) {
    quick = &q.pool->quick_small[q.rounded / kAlign].blocks;
  } else if (QuickList** list = q.pool->quick_large.Find(q.rounded)) {
    quick = &(*list)->blocks;
  }
  if (!quick || quick->empty()) return false;
  Block* b = quick->back();
  quick->pop_back();
  b->state = BlockState::kAllocated;
  b->requested = q.size;
  s.quick_bytes -= b->size;
  s.st.cached_bytes = s.quick_bytes;
  s.st.allocated_bytes += b->size;
  s.st.requested_bytes += q.size;
  s.st.peak_allocated_bytes = std::max(s.st.peak_allocated_bytes, s.st.allocated_bytes);
  ++s.st.allocs;
  q.block = b;
  return true;
}

Status Allocator::FindInSegments(Request& q) {
  State& s = *state_;
  Provider& pv = *provider_;
  q.block = FindFree(q.pool, q.rounded);
  if (q.block) return Ok();
  uint64_t seg = RoundUp(q.small ? std::max(q.rounded, 2 * kMiB) : q.rounded, s.chunk);
  seg = RoundUp(seg, pv.Granularity());
  if (FreeMemoryOverThreshold(s) || s.st.reserved_bytes + seg > s.pool_limit) {
    ANXIN_TRY(ReclaimSegments(s, pv));
    q.reclaimed = true;
    q.block = FindFree(q.pool, q.rounded);
    if (q.block) return Ok();
  }
  bool over = s.st.reserved_bytes + seg > s.pool_limit;
  if (over && !s.opt.expand) {
    return std::unexpected(Oom(q, "pool limit reached and expand is off"));
  }
  auto addr = pv.Allocate(seg);
  if (!addr && !q.reclaimed) {
    ANXIN_TRY(ReclaimSegments(s, pv));
    q.reclaimed = true;
    q.block = FindFree(q.pool, q.rounded);
    if (q.block) return Ok();
    addr = pv.Allocate(seg);
  }
  if (!addr) return std::unexpected(Oom(q, addr.error().Describe()));
  if (over) ++s.st.expansions;
  AddRegion(s, q.pool, *addr, seg);
  s.st.reserved_bytes += seg;
  ++s.st.device_allocs;
  q.block = FindFree(q.pool, q.rounded);
  return Ok();
}

Status Allocator::FindInAddressSpace(Request& q) {
  State& s = *state_;
  q.block = FindFree(q.pool, q.rounded);
  if (q.block) return Ok();
  uint64_t va_size = std::max(s.va_region_size, RoundUp(q.rounded, s.chunk));
  ANXIN_ASSIGN_OR_RETURN(uint64_t va, WithContext(provider_->ReserveAddress(va_size),
                                                  "reserving device address space"));
  AddRegion(s, q.pool, va, va_size);
  q.block = FindFree(q.pool, q.rounded);
  return Ok();
}

void Allocator::TakeFromIndex(Request& q) {
  State& s = *state_;
  Block* b = q.block;
  q.pool->free.erase(b);
  if (b->size > q.rounded) {
    Block* rest = NewBlock(s);
    rest->addr = b->addr + q.rounded;
    rest->size = b->size - q.rounded;
    rest->region = b->region;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = q.rounded;
    q.pool->free.insert(rest);
  }
  b->state = BlockState::kAllocated;
  b->requested = q.size;
  AcquireChunks(s, b);
}

void Allocator::ReturnToIndex(Request& q) {
  ReleaseChunks(*state_, q.block);
  InsertFree(*state_, q.block);
  q.block = nullptr;
}

Status Allocator::BackWithChunks(Request& q) {
  State& s = *state_;
  q.CountNeed(s);
  if (s.cached_handles.size() < q.need) {
    uint64_t shortfall = q.need - s.cached_handles.size();
    if (FreeMemoryOverThreshold(s) || s.st.reserved_bytes + shortfall * s.chunk > s.pool_limit) {
      ANXIN_TRY(ReclaimBeforeGrowing(q));
    }
  }
  auto shortfall = [&] { return q.need - std::min<uint64_t>(q.need, s.cached_handles.size()); };
  if (shortfall() > 0 && s.st.reserved_bytes + shortfall() * s.chunk > s.pool_limit) {
    if (!q.reclaimed) ANXIN_TRY(ReclaimAll(q));
    if (shortfall() > 0 && s.st.reserved_bytes + shortfall() * s.chunk > s.pool_limit) {
      if (!s.opt.expand) {
        return std::unexpected(Oom(q, "pool limit reached and expand is off"));
      }
      ++s.st.expansions;
    }
  }
  ANXIN_TRY(CreateChunks(q));
  return MapChunks(q);
}

// Idle chunks first; cached blocks only if they are not enough, so the
// per-size caches survive most reclaims. Then the cached blocks go back to the
// free index, where they merge, and the block is chosen again: the best fit
// now often lies over chunks that are still mapped, which saves remapping them.
Status Allocator::ReclaimBeforeGrowing(Request& q) {
  State& s = *state_;
  uint64_t shortfall = q.need - s.cached_handles.size();
  if (s.idle.size() < shortfall && s.quick_bytes > 0) {
    ReturnToIndex(q);
    FlushQuick(s);
    q.block = FindFree(q.pool, q.rounded);
    TakeFromIndex(q);
    q.CountNeed(s);
  }
  if (s.cached_handles.size() < q.need) {
    ANXIN_TRY(UnmapIdle(s, *provider_, q.need - s.cached_handles.size()));
  }
  ++s.st.reclaims;
  q.reclaimed = true;
  return Ok();
}

Status Allocator::ReclaimAll(Request& q) {
  State& s = *state_;
  FlushQuick(s);
  ANXIN_TRY(UnmapIdle(s, *provider_, q.need - s.cached_handles.size()));
  q.reclaimed = true;
  return Ok();
}

Status Allocator::CreateChunks(Request& q) {
  State& s = *state_;
  while (s.cached_handles.size() < q.need) {
    auto h = provider_->CreatePhysical(s.chunk);
    if (!h) {
      if (!q.reclaimed) {
        ANXIN_TRY(ReclaimAll(q));
        continue;
      }
      return std::unexpected(Oom(q, h.error().Describe()));
    }
    s.cached_handles.push_back(*h);
    s.st.reserved_bytes += s.chunk;
    ++s.st.device_allocs;
  }
  return Ok();
}

Status Allocator::MapChunks(Request& q) {
  State& s = *state_;
  Region* r = q.block->region;
  for (uint64_t g = q.lo; g < q.hi; ++g) {
    if (r->handle[g] != kNoHandle) continue;
    PhysicalHandle h = s.cached_handles.back();
    uint64_t va = r->base + g * s.chunk;
    if (auto mapped = provider_->Map(va, s.chunk, h); !mapped) {
      return std::unexpected(
          Oom(q, fmt::format("mapping chunk at {:#x}: {}", va, mapped.error().Describe())));
    }
    s.cached_handles.pop_back();
    r->handle[g] = h;
    ++s.st.maps;
  }
  return Ok();
}

Error Allocator::Oom(const Request& q, const std::string& why) {
  Error e = OomError(*state_, *provider_, q.size, q.stream, why);
  ++state_->st.ooms;
  return e;
}

uint64_t Allocator::Commit(Request& q) {
  State& s = *state_;
  Block* b = q.block;
  if (q.reclaimed) ++s.st.retries;
  s.live[b->addr] = b;
  s.st.allocated_bytes += b->size;
  s.st.requested_bytes += q.size;
  s.st.peak_allocated_bytes = std::max(s.st.peak_allocated_bytes, s.st.allocated_bytes);
  s.st.peak_reserved_bytes = std::max(s.st.peak_reserved_bytes, s.st.reserved_bytes);
  ++s.st.allocs;
  return b->addr;
}

Status Allocator::Free(uint64_t addr) {
  std::lock_guard lock(mu_);
  State& s = *state_;
  Block** found = s.live.Find(addr);
  if (!found || (*found)->state != BlockState::kAllocated) {
    return InvalidArgument(
        fmt::format("free of {:#x}, which this allocator did not hand out or already freed", addr));
  }
  Block* b = *found;
  s.st.allocated_bytes -= b->size;
  s.st.requested_bytes -= b->requested;
  ++s.st.frees;
  Pool* p = b->region->pool;
  b->state = BlockState::kCached;
  QuickList& list = p->small ? p->quick_small[b->size / kAlign] : LargeList(p, b->size);
  if (!list.listed) {
    list.listed = true;
    s.quick_lists.push_back(&list);
  }
  list.blocks.push_back(b);
  s.quick_bytes += b->size;
  s.st.cached_bytes = s.quick_bytes;
  return Ok();
}

Status Allocator::EmptyCache() {
  std::lock_guard lock(mu_);
  State& s = *state_;
  Provider& pv = *provider_;
  FlushQuick(s);
  if (!s.vm) return ReleaseFreeSegments(s, pv);
  ANXIN_TRY(UnmapIdle(s, pv, s.idle.size()));
  // One at a time, so that after a failed release the handles still listed
  // are exactly those the device still holds.
  while (!s.cached_handles.empty()) {
    ANXIN_TRY(pv.ReleasePhysical(s.cached_handles.back(), s.chunk));
    s.cached_handles.pop_back();
    s.st.reserved_bytes -= s.chunk;
    ++s.st.device_frees;
  }
  return Ok();
}

Status Allocator::SetIndexedForTesting(uint64_t addr, bool indexed) {
  std::lock_guard lock(mu_);
  State& s = *state_;
  Block** found = s.live.Find(addr);
  if (!found) return InvalidArgument(fmt::format("no block in use at {:#x}", addr));
  Pool* p = (*found)->region->pool;
  if (indexed) {
    p->free.insert(*found);
  } else {
    p->free.erase(*found);
  }
  return Ok();
}

AllocatorStats Allocator::Stats() const {
  std::lock_guard lock(mu_);
  const State& s = *state_;
  AllocatorStats st = s.st;
  uint64_t free_total = st.reserved_bytes - st.allocated_bytes;
  if (s.vm) {
    // Any free physical memory can be remapped into one contiguous range.
    st.largest_free_block = free_total;
  } else {
    uint64_t largest = 0;
    for (const auto& p : s.pool_storage) {
      if (!p->free.empty()) largest = std::max(largest, (*p->free.rbegin())->size);
    }
    for (const QuickList* list : s.quick_lists) {
      if (!list->blocks.empty()) largest = std::max(largest, list->blocks.back()->size);
    }
    st.largest_free_block = largest;
  }
  st.fragmentation = free_total == 0 ? 0.0
                                     : 1.0 - static_cast<double>(st.largest_free_block) /
                                                 static_cast<double>(free_total);
  return st;
}

Status Allocator::CheckInvariants() const {
  std::lock_guard lock(mu_);
  const State& s = *state_;
  uint64_t allocated = 0, cached = 0, free_in_index = 0, mapped = 0, idle = 0, segments = 0;
  size_t used_blocks = 0, free_blocks = 0;
  for (const auto& r : s.regions) {
    const Pool* p = r->pool;
    const Block* first = r->first;
    if (first->addr != r->base || first->region != r.get()) {
      return Internal(fmt::format("region {:#x} has no block at its base", r->base));
    }
    if (first->prev) return Internal("first block has a predecessor");
    std::vector<uint32_t> users(r->users.size(), 0);
    uint64_t end = r->base;
    for (const Block* b = first; b; b = b->next) {
      if (b->addr != end) return Internal(fmt::format("gap or overlap at {:#x}", b->addr));
      if (b->addr % kAlign || b->size % kAlign || b->size == 0) {
        return Internal(fmt::format("misaligned block {:#x}+{}", b->addr, b->size));
      }
      if (b->next && b->next->prev != b) return Internal("broken block links");
      end += b->size;
      if (b->state == BlockState::kFree) {
        if (!p->free.contains(const_cast<Block*>(b))) return Internal("free block not indexed");
        if (b->next && b->next->state == BlockState::kFree) return Internal("unmerged free blocks");
        free_in_index += b->size;
        ++free_blocks;
      } else {
        Block* const* it = s.live.Find(b->addr);
        if (!it || *it != b) return Internal("used block not in live map");
        ++used_blocks;
        (b->state == BlockState::kAllocated ? allocated : cached) += b->size;
        if (s.vm) {
          auto [lo, hi] = ChunkRange(s, *r, b->addr, b->size);
          for (uint64_t g = lo; g < hi; ++g) {
            ++users[g];
            if (r->handle[g] == kNoHandle) {
              return Internal(fmt::format("block {:#x} uses an unmapped chunk", b->addr));
            }
          }
        }
      }
    }
    if (end != r->base + r->size) return Internal("blocks do not cover the region");
    if (s.vm) {
      for (size_t g = 0; g < users.size(); ++g) {
        if (users[g] != r->users[g]) return Internal(fmt::format("chunk {} user count", g));
        if (r->handle[g] != kNoHandle) {
          ++mapped;
          if (users[g] == 0) {
            ++idle;
            if (r->idle_pos[g] < 0) return Internal("idle chunk not listed");
          }
        }
      }
    } else {
      segments += r->size;
    }
  }
  if (allocated != s.st.allocated_bytes) {
    return Internal(fmt::format("allocated {} != stats {}", allocated, s.st.allocated_bytes));
  }
  if (cached != s.quick_bytes) return Internal("cached bytes disagree");
  if (used_blocks != s.live.size()) {
    return Internal(
        fmt::format("live map holds {} blocks, regions {}", s.live.size(), used_blocks));
  }
  if (idle != s.idle.size()) return Internal("idle list size disagrees");
  uint64_t reserved = s.vm ? (mapped + s.cached_handles.size()) * s.chunk : segments;
  if (reserved != s.st.reserved_bytes) {
    return Internal(fmt::format("reserved {} != stats {}", reserved, s.st.reserved_bytes));
  }
  // The free indexes hold exactly the free blocks of the regions: a block
  // handed out but still indexed could be handed out twice.
  uint64_t indexed = 0;
  size_t indexed_blocks = 0;
  for (const auto& p : s.pool_storage) {
    for (const Block* b : p->free) {
      if (b->state != BlockState::kFree) {
        return Internal(
            fmt::format("block {:#x}+{} is in use but in the free index", b->addr, b->size));
      }
      indexed += b->size;
      ++indexed_blocks;
    }
  }
  if (indexed != free_in_index || indexed_blocks != free_blocks) {
    return Internal(fmt::format("free index holds {} bytes in {} blocks, regions {} in {}", indexed,
                                indexed_blocks, free_in_index, free_blocks));
  }
  return Ok();
}

}  // namespace anxin::mem
