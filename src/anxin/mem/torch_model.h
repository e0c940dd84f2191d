// A model of PyTorch's CUDA caching allocator (CUDACachingAllocator.cpp,
// default settings), written from its documented rules, to replay traces as
// PyTorch would have served them:
//   - sizes rounded up to 512 B; requests up to 1 MiB use the small pool,
//     larger ones the large pool;
//   - a new segment is 2 MiB (small), 20 MiB (large requests under 10 MiB) or
//     the request rounded up to 2 MiB;
//   - best fit by (stream, size, address) among cached free blocks;
//   - a block is split when the remainder is at least 512 B (small pool) or
//     more than 1 MiB (large pool); the remainder stays in the pool;
//   - freed blocks merge with free neighbours of the same segment only;
//   - when the device is full: release wholly free segments, retry, then OOM.
//
//   TorchCachingModel m(/*capacity=*/80 * kGiB);
//   ANXIN_ASSIGN_OR_RETURN(uint64_t addr, m.Malloc(4096, /*stream=*/0));
//   ANXIN_TRY(m.Free(addr));
//
// Not thread-safe (replay is sequential).
#ifndef ANXIN_MEM_TORCH_MODEL_H_
#define ANXIN_MEM_TORCH_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::mem {

class TorchCachingModel {
 public:
  // capacity: device bytes available to the allocator (0 = unlimited).
  explicit TorchCachingModel(uint64_t capacity);
  ~TorchCachingModel();
  TorchCachingModel(const TorchCachingModel&) = delete;
  TorchCachingModel& operator=(const TorchCachingModel&) = delete;

  // The state at the start of a trace: a segment, then blocks live in it.
  Status AddSegment(uint64_t addr, uint64_t size, uint64_t stream, bool small);
  // block_size 0: the requested size rounded to 512 B.
  Status PlaceLive(uint64_t addr, uint64_t requested, uint64_t block_size);

  // kResourceExhausted when the device cannot hold another segment.
  Result<uint64_t> Malloc(uint64_t size, uint64_t stream);
  Status Free(uint64_t addr);
  void EmptyCache();

  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }  // block bytes
  uint64_t requested() const { return requested_; }
  uint64_t segment_allocs() const { return segment_allocs_; }
  uint64_t segment_frees() const { return segment_frees_; }
  uint64_t ooms() const { return ooms_; }
  // Free bytes inside segments that also hold allocated blocks (kept as the
  // pools change: replay reads it at every new peak).
  uint64_t InactiveSplitBytes() const { return free_split_bytes_; }
  // The largest cached free block, over every stream (one lookup per stream).
  uint64_t LargestFreeBlock() const;
  // Recounts from the blocks what the model keeps or looks up (the split free
  // bytes, the allocated bytes, the largest free block, each pool's
  // membership); kInternal on a difference. For tests: it walks every block.
  Status CheckInvariants() const;

  struct Block;

 private:
  struct Cmp {
    bool operator()(const Block* a, const Block* b) const;
  };
  // Every change to the pools goes through these two, which keep
  // free_split_bytes_. A block's size and neighbours change only while it is
  // out of its pool.
  void InsertFree(Block* b);
  void EraseFree(Block* b);
  Block* NewSegment(uint64_t addr, uint64_t size, uint64_t stream, bool small);

  uint64_t capacity_;
  uint64_t next_addr_ = uint64_t{1} << 45;
  std::set<Block*, Cmp> small_pool_, large_pool_;
  std::unordered_map<uint64_t, Block*> allocated_blocks_;
  std::map<uint64_t, Block*> segments_;  // base -> first block
  std::vector<std::unique_ptr<Block>> storage_;
  std::vector<Block*> spare_;
  uint64_t reserved_ = 0, allocated_ = 0, requested_ = 0, free_split_bytes_ = 0;
  uint64_t segment_allocs_ = 0, segment_frees_ = 0, ooms_ = 0;
};

}  // namespace anxin::mem

#endif  // ANXIN_MEM_TORCH_MODEL_H_
