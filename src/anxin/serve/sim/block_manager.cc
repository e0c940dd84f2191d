#include "anxin/serve/sim/block_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace anxin::serve::sim {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64 finaliser over the running hash and the next value.
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t BlockHash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix(0x6b76636163686521ull, parent);
  for (int32_t t : tokens) h = Mix(h, static_cast<uint32_t>(t));
  return h;
}

constexpr uint64_t kRootHash = 0;

}  // namespace

BlockManager::BlockManager(const BlockManagerOptions& options)
    : options_(options), blocks_(std::max(0, options.num_blocks)) {
  free_.reserve(blocks_.size());
  // Hand out low block numbers first.
  for (int b = static_cast<int>(blocks_.size()) - 1; b >= 0; --b) free_.push_back(b);
  for (Block& b : blocks_) b.tokens.reserve(options_.block_tokens);
}

int BlockManager::MatchPrefix(std::span<const int32_t> tokens, std::vector<int>* hits) const {
  if (!options_.prefix_caching || tokens.empty()) return 0;
  const size_t b = options_.block_tokens;
  uint64_t parent = kRootHash;
  int n = 0;
  // Full blocks only, and never the last token: it must be computed to
  // produce the next one.
  for (size_t i = 0; (i + 1) * b <= tokens.size() - 1; ++i) {
    auto chunk = tokens.subspan(i * b, b);
    const uint64_t h = BlockHash(parent, chunk);
    auto it = prefix_.find(h);
    if (it == prefix_.end()) break;
    const Block& blk = blocks_[it->second];
    if (blk.parent_hash != parent || !std::equal(chunk.begin(), chunk.end(), blk.tokens.begin())) {
      break;
    }
    if (hits) hits->push_back(it->second);
    parent = h;
    ++n;
  }
  return n;
}

int BlockManager::BlocksNeeded(std::span<const int32_t> tokens) const {
  const int total =
      static_cast<int>((tokens.size() + options_.block_tokens - 1) / options_.block_tokens);
  return total - MatchPrefix(tokens, nullptr);
}

bool BlockManager::CanAllocate(std::span<const int32_t> tokens, int reserve_blocks) const {
  std::vector<int> hits;
  MatchPrefix(tokens, &hits);
  const int total =
      static_cast<int>((tokens.size() + options_.block_tokens - 1) / options_.block_tokens);
  int available = AvailableBlocks();
  for (int h : hits) {
    if (blocks_[h].in_lru) --available;  // reused, so not available for the rest
  }
  return total - static_cast<int>(hits.size()) + reserve_blocks <= available;
}

int BlockManager::AvailableBlocks() const { return static_cast<int>(free_.size() + lru_.size()); }

int BlockManager::TakeBlock() {
  int b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_.front();
    lru_.pop_front();
    Block& e = blocks_[b];
    e.in_lru = false;
    auto it = prefix_.find(e.hash);
    if (it != prefix_.end() && it->second == b) prefix_.erase(it);
    e.registered = false;
    ++evictions_;
  }
  Block& blk = blocks_[b];
  blk.ref = 1;
  blk.filled = 0;
  blk.tokens.clear();
  blk.hash = blk.parent_hash = 0;
  ++allocated_;
  return b;
}

void BlockManager::WriteToken(int block, uint64_t parent_hash, int32_t token) {
  Block& blk = blocks_[block];
  blk.tokens.push_back(token);
  ++blk.filled;
  if (blk.filled == options_.block_tokens && options_.prefix_caching) {
    blk.parent_hash = parent_hash;
    blk.hash = BlockHash(parent_hash, blk.tokens);
    if (prefix_.emplace(blk.hash, block).second) blk.registered = true;
  }
}

Result<int> BlockManager::Allocate(SeqId id, std::span<const int32_t> tokens) {
  if (seqs_.contains(id)) {
    return FailedPrecondition(fmt::format("sequence {} already has blocks", id));
  }
  if (!CanAllocate(tokens)) {
    return ResourceExhausted(
        fmt::format("sequence {}: {} tokens need {} more blocks of {} tokens, {} available", id,
                    tokens.size(), BlocksNeeded(tokens), options_.block_tokens, AvailableBlocks()));
  }
  std::vector<int> hits;
  MatchPrefix(tokens, &hits);
  const int b = options_.block_tokens;
  prefix_queried_ += options_.prefix_caching && !tokens.empty() ? (tokens.size() - 1) / b : 0;
  prefix_hit_ += hits.size();
  Seq seq;
  for (int h : hits) {
    Block& blk = blocks_[h];
    if (blk.in_lru) {
      lru_.erase(blk.lru_pos);
      blk.in_lru = false;
    }
    ++blk.ref;
    seq.blocks.push_back(h);
  }
  size_t pos = hits.size() * b;
  while (pos < tokens.size()) {
    const uint64_t parent = seq.blocks.empty() ? kRootHash : blocks_[seq.blocks.back()].hash;
    const int blk = TakeBlock();
    seq.blocks.push_back(blk);
    for (int i = 0; i < b && pos < tokens.size(); ++i, ++pos) WriteToken(blk, parent, tokens[pos]);
  }
  seq.length = static_cast<int>(tokens.size());
  seqs_.emplace(id, std::move(seq));
  return static_cast<int>(hits.size()) * b;
}

Result<std::optional<CopyOp>> BlockManager::Append(SeqId id, int32_t token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return NotFound(fmt::format("no sequence {}", id));
  Seq& seq = it->second;
  const int b = options_.block_tokens;
  std::optional<CopyOp> copy;
  const bool needs_block = seq.length % b == 0;
  const bool shared_last = !needs_block && blocks_[seq.blocks.back()].ref > 1;
  if ((needs_block || shared_last) && AvailableBlocks() == 0) {
    return ResourceExhausted(
        fmt::format("sequence {}: no free or evictable block for token {} ({} blocks, all in use)",
                    id, seq.length, options_.num_blocks));
  }
  if (needs_block) {
    seq.blocks.push_back(TakeBlock());
  } else if (shared_last) {
    const int src = seq.blocks.back();
    const int dst = TakeBlock();
    blocks_[dst].tokens = blocks_[src].tokens;
    blocks_[dst].filled = blocks_[src].filled;
    --blocks_[src].ref;
    seq.blocks.back() = dst;
    copy = CopyOp{src, dst};
    ++cow_;
  }
  const uint64_t parent =
      seq.blocks.size() >= 2 ? blocks_[seq.blocks[seq.blocks.size() - 2]].hash : kRootHash;
  WriteToken(seq.blocks.back(), parent, token);
  ++seq.length;
  return copy;
}

Status BlockManager::Fork(SeqId parent, SeqId child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end()) return NotFound(fmt::format("no sequence {} to fork", parent));
  if (seqs_.contains(child)) {
    return FailedPrecondition(fmt::format("sequence {} already has blocks", child));
  }
  Seq copy = it->second;
  for (int b : copy.blocks) ++blocks_[b].ref;
  seqs_.emplace(child, std::move(copy));
  return Ok();
}

void BlockManager::Release(int block) {
  Block& blk = blocks_[block];
  if (--blk.ref > 0) return;
  if (blk.registered) {
    blk.lru_pos = lru_.insert(lru_.end(), block);
    blk.in_lru = true;
  } else {
    blk.filled = 0;
    blk.tokens.clear();
    free_.push_back(block);
  }
}

void BlockManager::Free(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  // Last blocks first, so that a prefix's later blocks are evicted before
  // its first ones.
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) Release(*b);
  seqs_.erase(it);
}

std::span<const int> BlockManager::BlockTable(SeqId id) const { return seqs_.at(id).blocks; }
int BlockManager::Length(SeqId id) const { return seqs_.at(id).length; }

BlockStats BlockManager::Stats() const {
  BlockStats s;
  s.total_blocks = static_cast<int>(blocks_.size());
  s.free_blocks = static_cast<int>(free_.size());
  s.cached_blocks = static_cast<int>(lru_.size());
  for (const Block& b : blocks_) {
    if (b.ref > 0) {
      ++s.used_blocks;
      s.tokens_stored += b.filled;
    }
    if (b.ref > 1) ++s.shared_blocks;
  }
  s.sequences = static_cast<int>(seqs_.size());
  for (const auto& [id, seq] : seqs_) s.logical_tokens += seq.length;
  s.slots_in_use = static_cast<int64_t>(s.used_blocks) * options_.block_tokens;
  s.internal_fragmentation =
      s.slots_in_use == 0 ? 0 : 1.0 - static_cast<double>(s.tokens_stored) / s.slots_in_use;
  s.shared_tokens_saved = s.logical_tokens - s.tokens_stored;
  s.prefix_blocks_queried = prefix_queried_;
  s.prefix_blocks_hit = prefix_hit_;
  s.evictions = evictions_;
  s.cow_copies = cow_;
  s.blocks_allocated = allocated_;
  return s;
}

Status BlockManager::CheckInvariants() const {
  const int n = static_cast<int>(blocks_.size());
  const int bt = options_.block_tokens;
  std::vector<int> refs(n, 0);
  for (const auto& [id, seq] : seqs_) {
    const int want = (seq.length + bt - 1) / bt;
    if (static_cast<int>(seq.blocks.size()) != want) {
      return Internal(fmt::format("sequence {}: {} tokens in {} blocks, expected {}", id,
                                  seq.length, seq.blocks.size(), want));
    }
    for (size_t i = 0; i < seq.blocks.size(); ++i) {
      const int b = seq.blocks[i];
      if (b < 0 || b >= n)
        return Internal(fmt::format("sequence {}: block {} out of range", id, b));
      ++refs[b];
      const int filled = i + 1 < seq.blocks.size() ? bt : seq.length - static_cast<int>(i) * bt;
      if (blocks_[b].filled != filled) {
        return Internal(fmt::format("sequence {}: block {} holds {} tokens, the table says {}", id,
                                    b, blocks_[b].filled, filled));
      }
    }
  }
  std::vector<int> state(n, 0);  // 1 used, 2 free, 3 cached
  for (int b : free_) {
    if (state[b] != 0) return Internal(fmt::format("block {} is twice in the free list", b));
    state[b] = 2;
  }
  for (int b : lru_) {
    if (state[b] != 0) return Internal(fmt::format("block {} is free and cached at once", b));
    if (!blocks_[b].in_lru || !blocks_[b].registered) {
      return Internal(fmt::format("block {} is in the cache list but not marked cached", b));
    }
    state[b] = 3;
  }
  for (int b = 0; b < n; ++b) {
    const Block& blk = blocks_[b];
    if (blk.ref != refs[b]) {
      return Internal(fmt::format("block {}: reference count {} but {} block tables name it", b,
                                  blk.ref, refs[b]));
    }
    if (blk.ref > 0) {
      if (state[b] != 0) return Internal(fmt::format("block {} is in use and free at once", b));
      state[b] = 1;
    }
    if (state[b] == 0) return Internal(fmt::format("block {} is lost: unused and not free", b));
    if (blk.in_lru != (state[b] == 3)) {
      return Internal(fmt::format("block {}: cached mark disagrees with the cache list", b));
    }
    if (blk.registered) {
      auto it = prefix_.find(blk.hash);
      if (it == prefix_.end() || it->second != b || blk.filled != bt) {
        return Internal(fmt::format("block {}: marked in the prefix index but not there", b));
      }
    }
    if (static_cast<int>(blk.tokens.size()) != blk.filled) {
      return Internal(
          fmt::format("block {}: {} tokens kept, {} counted", b, blk.tokens.size(), blk.filled));
    }
  }
  for (const auto& [hash, b] : prefix_) {
    if (!blocks_[b].registered || blocks_[b].hash != hash) {
      return Internal(fmt::format("prefix index names block {} with another hash", b));
    }
  }
  return Ok();
}

}  // namespace anxin::serve::sim
