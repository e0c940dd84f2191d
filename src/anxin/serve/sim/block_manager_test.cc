#include "anxin/serve/sim/block_manager.h"

#include <map>
#include <numeric>
#include <random>

#include "anxin/base/testing.h"

namespace anxin::serve::sim {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

std::vector<int32_t> Tokens(int n, int32_t start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(BlockManager, AllocatesWholeBlocksAndCountsWaste) {
  BlockManager bm({.num_blocks = 10, .block_tokens = 16});
  ASSERT_THAT(bm.Allocate(1, Tokens(20)), IsOk());
  EXPECT_EQ(bm.BlockTable(1).size(), 2u);
  BlockStats s = bm.Stats();
  EXPECT_EQ(s.used_blocks, 2);
  EXPECT_EQ(s.tokens_stored, 20);
  EXPECT_EQ(s.slots_in_use, 32);
  EXPECT_DOUBLE_EQ(s.internal_fragmentation, 12.0 / 32);
  EXPECT_THAT(bm.CheckInvariants(), IsOk());
}

TEST(BlockManager, AppendTakesANewBlockAtTheBoundary) {
  BlockManager bm({.num_blocks = 3, .block_tokens = 4});
  ASSERT_THAT(bm.Allocate(1, Tokens(4)), IsOk());
  auto r = bm.Append(1, 99);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(bm.BlockTable(1).size(), 2u);
  EXPECT_EQ(bm.Length(1), 5);
}

TEST(BlockManager, OutOfBlocksChangesNothing) {
  BlockManager bm({.num_blocks = 2, .block_tokens = 4, .prefix_caching = false});
  ASSERT_THAT(bm.Allocate(1, Tokens(8)), IsOk());
  EXPECT_THAT(bm.Append(1, 5), HasCode(ErrorCode::kResourceExhausted));
  EXPECT_EQ(bm.Length(1), 8);
  EXPECT_THAT(bm.Allocate(2, Tokens(1)), HasCode(ErrorCode::kResourceExhausted));
  EXPECT_FALSE(bm.Contains(2));
  EXPECT_THAT(bm.CheckInvariants(), IsOk());
}

TEST(BlockManager, ForkSharesAndWritingCopies) {
  BlockManager bm({.num_blocks = 8, .block_tokens = 4});
  ASSERT_THAT(bm.Allocate(1, Tokens(6)), IsOk());
  ASSERT_THAT(bm.Fork(1, 2), IsOk());
  EXPECT_EQ(bm.Stats().shared_blocks, 2);
  EXPECT_EQ(bm.Stats().shared_tokens_saved, 6);
  const int shared_last = bm.BlockTable(1)[1];
  auto cow = bm.Append(2, 7);
  ASSERT_THAT(cow, IsOk());
  ASSERT_TRUE(cow->has_value());
  EXPECT_EQ((*cow)->src, shared_last);
  EXPECT_NE(bm.BlockTable(2)[1], shared_last);
  EXPECT_EQ(bm.BlockTable(2)[0], bm.BlockTable(1)[0]);  // the full first block stays shared
  // The parent's block is now its own: writing it copies nothing.
  auto parent = bm.Append(1, 8);
  ASSERT_THAT(parent, IsOk());
  EXPECT_FALSE(parent->has_value());
  EXPECT_EQ(bm.Stats().cow_copies, 1u);
  EXPECT_THAT(bm.CheckInvariants(), IsOk());
}

TEST(BlockManager, FreedPrefixesAreFoundAgainThenEvicted) {
  BlockManager bm({.num_blocks = 4, .block_tokens = 4});
  std::vector<int32_t> prompt = Tokens(9);  // two full blocks + one token
  ASSERT_THAT(bm.Allocate(1, prompt), IsOk());
  bm.Free(1);
  EXPECT_EQ(bm.Stats().cached_blocks, 2);
  EXPECT_EQ(bm.AvailableBlocks(), 4);
  auto hit = bm.Allocate(2, prompt);
  ASSERT_THAT(hit, IsOk());
  EXPECT_EQ(*hit, 8);
  EXPECT_EQ(bm.Stats().prefix_blocks_hit, 2u);
  // A prompt that equals a cached prefix exactly reuses all but the last block.
  bm.Free(2);
  auto exact = bm.Allocate(3, Tokens(8));
  ASSERT_THAT(exact, IsOk());
  EXPECT_EQ(*exact, 4);
  bm.Free(3);
  // Other prompts take the free blocks, then evict the cached ones.
  ASSERT_THAT(bm.Allocate(4, Tokens(16, 1000)), IsOk());
  EXPECT_GT(bm.Stats().evictions, 0u);
  EXPECT_EQ(*bm.Allocate(5, Tokens(0)), 0);
  EXPECT_THAT(bm.CheckInvariants(), IsOk());
}

TEST(BlockManager, SamePrefixDifferentHistoryIsNotShared) {
  BlockManager bm({.num_blocks = 8, .block_tokens = 2});
  std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {9, 9, 3, 4, 5};
  ASSERT_THAT(bm.Allocate(1, a), IsOk());
  auto r = bm.Allocate(2, b);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(*r, 0);  // block [3,4] follows different tokens
}

TEST(BlockManager, RejectsDuplicateAndUnknownIds) {
  BlockManager bm({.num_blocks = 4, .block_tokens = 4});
  ASSERT_THAT(bm.Allocate(1, Tokens(3)), IsOk());
  EXPECT_THAT(bm.Allocate(1, Tokens(3)), HasCode(ErrorCode::kFailedPrecondition));
  EXPECT_THAT(bm.Append(7, 1), HasCode(ErrorCode::kNotFound));
  EXPECT_THAT(bm.Fork(7, 8), HasCode(ErrorCode::kNotFound));
  EXPECT_THAT(bm.Fork(1, 1), HasCode(ErrorCode::kFailedPrecondition));
}

// Random allocate / append / fork / free, with a model of every sequence's
// tokens; after each step the recount must agree and every sequence must
// still see its own tokens through its block table.
TEST(BlockManager, InvariantsHoldUnderRandomOperations) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    const int block = 2 + static_cast<int>(seed % 5);  // 1 could never share a partial block
    BlockManager bm({.num_blocks = 40, .block_tokens = block, .prefix_caching = seed % 2 == 0});
    std::map<SeqId, std::vector<int32_t>> model;
    // What each physical block holds, as the KV cache would (copied on CoW).
    std::vector<std::vector<int32_t>> content(40, std::vector<int32_t>(block, -1));
    SeqId next = 1;
    int exhausted = 0, cows = 0;
    for (int step = 0; step < 3000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 3 || model.empty()) {
        // Prompts from a few shared prefixes, so that the cache hits.
        std::vector<int32_t> prompt;
        const int prefix = static_cast<int>(rng() % 3);
        for (int i = 0; i < static_cast<int>(rng() % 12); ++i) prompt.push_back(prefix * 100 + i);
        for (int i = 0; i < static_cast<int>(rng() % 6); ++i)
          prompt.push_back(static_cast<int32_t>(rng() % 1000));
        const bool could = bm.CanAllocate(prompt);
        auto r = bm.Allocate(next, prompt);
        ASSERT_EQ(r.has_value(), could) << "CanAllocate disagrees with Allocate";
        if (r) {
          const auto table = bm.BlockTable(next);
          for (size_t i = static_cast<size_t>(*r); i < prompt.size(); ++i) {
            content[table[i / block]][i % block] = prompt[i];
          }
          model[next] = prompt;
          ++next;
        } else {
          ASSERT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
          ++exhausted;
        }
      } else if (op < 7) {
        auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
        const int32_t tok = static_cast<int32_t>(rng() % 1000);
        auto r = bm.Append(it->first, tok);
        if (!r) {
          ASSERT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
          ++exhausted;
        } else {
          if (r->has_value()) {
            content[(*r)->dst] = content[(*r)->src];
            ++cows;
          }
          const auto table = bm.BlockTable(it->first);
          const size_t pos = it->second.size();
          content[table[pos / block]][pos % block] = tok;
          it->second.push_back(tok);
        }
      } else if (op < 8) {
        auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
        ASSERT_THAT(bm.Fork(it->first, next), IsOk());
        model[next] = it->second;
        ++next;
      } else {
        auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
        bm.Free(it->first);
        model.erase(it);
      }
      ASSERT_THAT(bm.CheckInvariants(), IsOk()) << "seed " << seed << " step " << step;
      for (const auto& [id, toks] : model) {
        ASSERT_EQ(bm.Length(id), static_cast<int>(toks.size()));
        const auto table = bm.BlockTable(id);
        for (size_t i = 0; i < toks.size(); ++i) {
          ASSERT_EQ(content[table[i / block]][i % block], toks[i])
              << "seed " << seed << " step " << step << " seq " << id << " token " << i;
        }
      }
      const BlockStats s = bm.Stats();
      ASSERT_EQ(s.free_blocks + s.cached_blocks + s.used_blocks, 40);
    }
    EXPECT_GT(exhausted, 0) << "the pool never ran out: the test is too gentle";
    EXPECT_GT(cows, 0) << "no copy-on-write happened";
  }
}

}  // namespace
}  // namespace anxin::serve::sim
