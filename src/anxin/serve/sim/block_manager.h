// The paged KV block manager: a pool of fixed-size blocks, a block table per
// sequence, reference counts so that sequences share blocks, copy-on-write
// when a shared block would be written, and a prefix cache: full blocks are
// keyed by a hash of their tokens and of every token before them, stay cached
// when their sequences end, and are found again by new sequences with the same
// prefix, or evicted (least recently freed first) when blocks run out.
//
//   #include "anxin/kv/kv_cache.h"
//
//   ANXIN_ASSIGN_OR_RETURN(kv::KvFormat f, kv::ParseKvFormat("int4"));
//   ANXIN_ASSIGN_OR_RETURN(kv::KvCache cache, kv::KvCache::Create({.kv_heads = 8, .head_dim = 128,
//                                                          .block_tokens = 16, .num_blocks = 1024,
//                                                          .format = f}));
//   SeqId id = 1, child = 2;
//   std::vector<int32_t> prompt = {101, 2023, 2003, 1037};
//   int32_t token = 3231;                            // the token just sampled
//   BlockManager bm({.num_blocks = 1024, .block_tokens = 16});
//   if (bm.CanAllocate(prompt)) {
//     ANXIN_ASSIGN_OR_RETURN(int cached, bm.Allocate(id, prompt));   // tokens found cached
//   }
//   ANXIN_ASSIGN_OR_RETURN(std::optional<CopyOp> cow, bm.Append(id, token));
//   if (cow) cache.CopyBlock(cow->src, cow->dst);   // the sequence got a private copy
//   ANXIN_TRY(bm.Fork(id, child));                   // child shares every block
//   bm.Free(id);
//   BlockStats s = bm.Stats();                       // fragmentation, sharing, evictions
//   ANXIN_TRY(bm.CheckInvariants());                 // recounts everything (tests)
//
// Blocks are numbered 0 .. num_blocks-1, the same numbers kv::KvCache uses.
// Thread safety: none; one owner (the scheduler) calls it.
#ifndef ANXIN_SERVE_SIM_BLOCK_MANAGER_H_
#define ANXIN_SERVE_SIM_BLOCK_MANAGER_H_

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::serve::sim {

using SeqId = uint64_t;

struct BlockManagerOptions {
  int num_blocks = 0;
  int block_tokens = 16;
  bool prefix_caching = true;
};

// A sequence must copy block src into dst before writing (copy-on-write).
struct CopyOp {
  int src = 0, dst = 0;
};

struct BlockStats {
  int total_blocks = 0;
  int free_blocks = 0;    // holding nothing
  int cached_blocks = 0;  // unreferenced full blocks kept for the prefix cache (evictable)
  int used_blocks = 0;    // referenced by at least one sequence
  int shared_blocks = 0;  // referenced by more than one
  int sequences = 0;
  int64_t tokens_stored = 0;   // tokens in used blocks, each shared block once
  int64_t slots_in_use = 0;    // used_blocks x block_tokens
  int64_t logical_tokens = 0;  // sum of sequence lengths
  // Share of the slots of used blocks that hold no token (the waste of the
  // partly filled last blocks): 1 - tokens_stored / slots_in_use.
  double internal_fragmentation = 0;
  // Tokens that sharing saved storing: logical_tokens - tokens_stored.
  int64_t shared_tokens_saved = 0;
  uint64_t prefix_blocks_queried = 0, prefix_blocks_hit = 0;
  uint64_t evictions = 0, cow_copies = 0, blocks_allocated = 0;
};

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions& options);

  const BlockManagerOptions& options() const { return options_; }

  // Blocks a new sequence of these tokens would take from the pool, prefix
  // hits counted, and whether they are there now (keeping reserve_blocks free).
  int BlocksNeeded(std::span<const int32_t> tokens) const;
  bool CanAllocate(std::span<const int32_t> tokens, int reserve_blocks = 0) const;
  // Starts sequence id holding tokens. Returns how many leading tokens were
  // found in cached blocks (their K/V need no computing; never the last
  // token). kResourceExhausted when the blocks are not there (nothing
  // changes); kFailedPrecondition when id exists.
  [[nodiscard]] Result<int> Allocate(SeqId id, std::span<const int32_t> tokens);
  // Adds one token to the sequence. Returns the copy to make when its last
  // block was shared. kResourceExhausted when a block is needed and none is
  // free or evictable (nothing changes); kNotFound for an unknown id.
  [[nodiscard]] Result<std::optional<CopyOp>> Append(SeqId id, int32_t token);
  // child gets parent's block table, sharing every block.
  [[nodiscard]] Status Fork(SeqId parent, SeqId child);
  // Releases the sequence's blocks; unknown ids are ignored.
  void Free(SeqId id);

  bool Contains(SeqId id) const { return seqs_.contains(id); }
  // REQUIRES: Contains(id).
  std::span<const int> BlockTable(SeqId id) const;
  int Length(SeqId id) const;

  // Blocks that can be handed out now: free plus evictable cached ones.
  int AvailableBlocks() const;
  BlockStats Stats() const;
  // Recounts reference counts from the block tables and checks that every
  // block is in exactly one state, the prefix index, and every table's
  // length. kInternal naming the first inconsistency.
  [[nodiscard]] Status CheckInvariants() const;

 private:
  struct Block {
    int ref = 0;
    int filled = 0;
    bool registered = false;  // in prefix_ (full, hashed)
    bool in_lru = false;
    uint64_t hash = 0, parent_hash = 0;
    std::vector<int32_t> tokens;
    std::list<int>::iterator lru_pos;
  };
  struct Seq {
    std::vector<int> blocks;
    int length = 0;
  };

  int TakeBlock();  // REQUIRES: AvailableBlocks() > 0
  void WriteToken(int block, uint64_t parent_hash, int32_t token);
  void Release(int block);
  int MatchPrefix(std::span<const int32_t> tokens, std::vector<int>* hits) const;

  BlockManagerOptions options_;
  std::vector<Block> blocks_;
  std::vector<int> free_;
  std::list<int> lru_;  // front: freed longest ago
  std::unordered_map<uint64_t, int> prefix_;
  std::unordered_map<SeqId, Seq> seqs_;
  uint64_t prefix_queried_ = 0, prefix_hit_ = 0, evictions_ = 0, cow_ = 0, allocated_ = 0;
};

}  // namespace anxin::serve::sim

#endif  // ANXIN_SERVE_SIM_BLOCK_MANAGER_H_
