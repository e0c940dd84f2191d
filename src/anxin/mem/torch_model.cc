#include "anxin/mem/torch_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "anxin/mem/allocator.h"

namespace anxin::mem {
namespace {

constexpr uint64_t kMinBlockSize = 512;
constexpr uint64_t kSmallSize = 1 << 20;
constexpr uint64_t kSmallBuffer = 2 << 20;
constexpr uint64_t kLargeBuffer = 20 << 20;
constexpr uint64_t kMinLargeAlloc = 10 << 20;
constexpr uint64_t kRoundLarge = 2 << 20;

uint64_t RoundUp(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }
uint64_t RoundSize(uint64_t size) {
  return size < kMinBlockSize ? kMinBlockSize : RoundUp(size, kMinBlockSize);
}
uint64_t AllocationSize(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(size, kRoundLarge);
}

}  // namespace

struct TorchCachingModel::Block {
  uint64_t addr = 0, size = 0, requested = 0, stream = 0;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
};

bool TorchCachingModel::Cmp::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->addr < b->addr;
}

TorchCachingModel::TorchCachingModel(uint64_t capacity) : capacity_(capacity) {}
TorchCachingModel::~TorchCachingModel() = default;

TorchCachingModel::Block* TorchCachingModel::NewSegment(uint64_t addr, uint64_t size,
                                                        uint64_t stream, bool small) {
  Block* b;
  if (!spare_.empty()) {
    b = spare_.back();
    spare_.pop_back();
    *b = Block();
  } else {
    storage_.push_back(std::make_unique<Block>());
    b = storage_.back().get();
  }
  b->addr = addr;
  b->size = size;
  b->stream = stream;
  b->small = small;
  segments_[addr] = b;
  reserved_ += size;
  return b;
}

Status TorchCachingModel::AddSegment(uint64_t addr, uint64_t size, uint64_t stream, bool small) {
  if (size == 0) return InvalidArgument(fmt::format("segment at {:#x} has size 0", addr));
  auto next = segments_.lower_bound(addr);
  if (next != segments_.end() && next->first < addr + size) {
    return DataLoss(fmt::format("segment at {:#x} overlaps the one at {:#x}", addr, next->first));
  }
  if (next != segments_.begin()) {
    const Block* prev = std::prev(next)->second;
    uint64_t end = prev->addr;
    for (const Block* b = prev; b; b = b->next) end = b->addr + b->size;
    if (end > addr) {
      return DataLoss(fmt::format("segment at {:#x} overlaps the one at {:#x}", addr, prev->addr));
    }
  }
  next_addr_ = std::max(next_addr_, RoundUp(addr + size + kRoundLarge, kRoundLarge));
  InsertFree(NewSegment(addr, size, stream, small));
  return Ok();
}

Status TorchCachingModel::PlaceLive(uint64_t addr, uint64_t requested, uint64_t block_size) {
  uint64_t size = block_size ? block_size : RoundSize(requested);
  auto it = segments_.upper_bound(addr);
  if (it == segments_.begin()) {
    return DataLoss(fmt::format("live block at {:#x} lies in no segment", addr));
  }
  Block* b = std::prev(it)->second;
  while (b && b->addr + b->size <= addr) b = b->next;
  if (!b || b->addr > addr || b->allocated || addr + size > b->addr + b->size) {
    return DataLoss(
        fmt::format("live block {:#x}+{} does not fit the free space of its segment", addr, size));
  }
  EraseFree(b);
  // Split off the free space before and after the live block.
  auto carve = [&](uint64_t at, uint64_t len, Block* after) {
    Block* n;
    if (!spare_.empty()) {
      n = spare_.back();
      spare_.pop_back();
      *n = Block();
    } else {
      storage_.push_back(std::make_unique<Block>());
      n = storage_.back().get();
    }
    n->addr = at;
    n->size = len;
    n->stream = after->stream;
    n->small = after->small;
    n->prev = after;
    n->next = after->next;
    if (after->next) after->next->prev = n;
    after->next = n;
    return n;
  };
  if (b->addr < addr) {
    uint64_t before = addr - b->addr;
    Block* live = carve(addr, b->size - before, b);
    b->size = before;
    InsertFree(b);
    b = live;
  }
  if (b->size > size) {
    Block* rest = carve(b->addr + size, b->size - size, b);
    b->size = size;
    InsertFree(rest);
  }
  b->allocated = true;
  b->requested = requested;
  allocated_blocks_[b->addr] = b;
  allocated_ += b->size;
  requested_ += requested;
  return Ok();
}

void TorchCachingModel::InsertFree(Block* b) {
  (b->small ? small_pool_ : large_pool_).insert(b);
  if (b->prev || b->next) free_split_bytes_ += b->size;
}

void TorchCachingModel::EraseFree(Block* b) {
  (b->small ? small_pool_ : large_pool_).erase(b);
  if (b->prev || b->next) free_split_bytes_ -= b->size;
}

Result<uint64_t> TorchCachingModel::Malloc(uint64_t size, uint64_t stream) {
  // Larger than any device: cudaMalloc fails and PyTorch reports an OOM.
  // (Smaller sizes take the path below, which releases the cache before it
  // gives up, as PyTorch does.)
  if (size > kMaxRequestBytes) {
    ++ooms_;
    return ResourceExhausted(
        fmt::format("out of memory: {} bytes asked, more than any device holds", size));
  }
  uint64_t rs = RoundSize(size);
  bool small = rs <= kSmallSize;
  auto& pool = small ? small_pool_ : large_pool_;
  Block key;
  key.stream = stream;
  key.size = rs;
  Block* b = nullptr;
  auto it = pool.lower_bound(&key);
  if (it != pool.end() && (*it)->stream == stream) {
    b = *it;
    EraseFree(b);
  } else {
    uint64_t seg = AllocationSize(rs);
    if (capacity_ && reserved_ + seg > capacity_) {
      EmptyCache();  // release_cached_blocks(), then retry
      it = pool.lower_bound(&key);
      if (it != pool.end() && (*it)->stream == stream) {
        b = *it;
        EraseFree(b);
      } else if (reserved_ + seg > capacity_) {
        ++ooms_;
        return ResourceExhausted(fmt::format("out of memory: {} bytes asked, {} reserved of {}",
                                             size, reserved_, capacity_));
      }
    }
    if (!b) {
      b = NewSegment(next_addr_, seg, stream, small);
      next_addr_ += RoundUp(seg, kRoundLarge);
      ++segment_allocs_;
    }
  }
  uint64_t remaining = b->size - rs;
  if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
    Block* rest;
    if (!spare_.empty()) {
      rest = spare_.back();
      spare_.pop_back();
      *rest = Block();
    } else {
      storage_.push_back(std::make_unique<Block>());
      rest = storage_.back().get();
    }
    rest->addr = b->addr + rs;
    rest->size = remaining;
    rest->stream = b->stream;
    rest->small = b->small;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = rs;
    InsertFree(rest);
  }
  b->allocated = true;
  b->requested = size;
  allocated_blocks_[b->addr] = b;
  allocated_ += b->size;
  requested_ += size;
  return b->addr;
}

Status TorchCachingModel::Free(uint64_t addr) {
  auto it = allocated_blocks_.find(addr);
  if (it == allocated_blocks_.end()) {
    return InvalidArgument(fmt::format("free of {:#x}, which is not allocated", addr));
  }
  Block* b = it->second;
  allocated_blocks_.erase(it);
  allocated_ -= b->size;
  requested_ -= b->requested;
  b->allocated = false;
  if (b->prev && !b->prev->allocated) {
    Block* p = b->prev;
    EraseFree(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    spare_.push_back(b);
    b = p;
  }
  if (b->next && !b->next->allocated) {
    Block* n = b->next;
    EraseFree(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    spare_.push_back(n);
  }
  InsertFree(b);
  return Ok();
}

void TorchCachingModel::EmptyCache() {
  for (auto* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (!b->prev && !b->next) {
        // A whole free segment: not split, so not in free_split_bytes_.
        reserved_ -= b->size;
        ++segment_frees_;
        segments_.erase(b->addr);
        spare_.push_back(b);
        it = pool->erase(it);
      } else {
        ++it;
      }
    }
  }
}

uint64_t TorchCachingModel::LargestFreeBlock() const {
  // Pools are ordered by (stream, size, address): the last block of each
  // stream's run is its largest. Hop from run to run, last stream first.
  uint64_t largest = 0;
  for (const auto* pool : {&small_pool_, &large_pool_}) {
    auto end = pool->end();
    while (end != pool->begin()) {
      const Block* last = *std::prev(end);
      largest = std::max(largest, last->size);
      Block first;
      first.stream = last->stream;
      end = pool->lower_bound(&first);  // the stream's first block
    }
  }
  return largest;
}

Status TorchCachingModel::CheckInvariants() const {
  uint64_t split = 0, allocated = 0, pooled = 0, largest = 0;
  for (const auto& [base, first] : segments_) {
    if (first->prev) return Internal(fmt::format("segment {:#x} starts after a block", base));
    for (const Block* b = first; b; b = b->next) {
      if (b->next && b->next->prev != b)
        return Internal(fmt::format("block {:#x}: broken neighbour links", b->addr));
      if (b->allocated) {
        allocated += b->size;
        if (!allocated_blocks_.count(b->addr))
          return Internal(fmt::format("allocated block {:#x} is not indexed", b->addr));
        continue;
      }
      const auto& pool = b->small ? small_pool_ : large_pool_;
      if (!pool.count(const_cast<Block*>(b)))
        return Internal(fmt::format("free block {:#x} is in no pool", b->addr));
      ++pooled;
      largest = std::max(largest, b->size);
      if (b->prev || b->next) split += b->size;
    }
  }
  if (pooled != small_pool_.size() + large_pool_.size())
    return Internal("a pool holds a block that is in no segment");
  if (allocated != allocated_)
    return Internal(fmt::format("allocated bytes {} kept, {} counted", allocated_, allocated));
  if (largest != LargestFreeBlock())
    return Internal(
        fmt::format("largest free block {} found, {} counted", LargestFreeBlock(), largest));
  if (split != free_split_bytes_)
    return Internal(fmt::format("split free bytes {} kept, {} counted", free_split_bytes_, split));
  return Ok();
}

}  // namespace anxin::mem
