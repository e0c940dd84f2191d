#include "anxin/mem/torch_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;

TEST(TorchModelTest, SegmentSizesFollowThePools) {
  TorchCachingModel m(0);
  ASSERT_THAT(m.Malloc(1000, 0), IsOk());  // small pool: 2 MiB segment
  EXPECT_EQ(m.reserved(), 2 * kMiB);
  EXPECT_EQ(m.allocated(), 1024u);
  ASSERT_THAT(m.Malloc(3 * kMiB, 0), IsOk());  // under 10 MiB: 20 MiB segment
  EXPECT_EQ(m.reserved(), 22 * kMiB);
  ASSERT_THAT(m.Malloc(18 * kMiB + 1, 0), IsOk());  // rounded up to 2 MiB
  EXPECT_EQ(m.reserved(), 42 * kMiB);
  EXPECT_EQ(m.segment_allocs(), 3u);
  // Best fit from the cached 17 MiB remainder: no new segment.
  ASSERT_THAT(m.Malloc(5 * kMiB, 0), IsOk());
  EXPECT_EQ(m.segment_allocs(), 3u);
}

TEST(TorchModelTest, LargeRemaindersOfOneMiBOrLessAreNotSplit) {
  TorchCachingModel m(0);
  auto a = m.Malloc(19 * kMiB, 0);  // 20 MiB segment, 1 MiB remainder stays in the block
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(m.allocated(), 20 * kMiB);
  EXPECT_EQ(m.InactiveSplitBytes(), 0u);
}

TEST(TorchModelTest, FreeSpaceNeverMergesAcrossSegments) {
  TorchCachingModel m(0);
  auto a = m.Malloc(12 * kMiB, 0);
  auto b = m.Malloc(12 * kMiB, 0);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  ASSERT_THAT(m.Free(*a), IsOk());
  ASSERT_THAT(m.Free(*b), IsOk());
  EXPECT_EQ(m.LargestFreeBlock(), 12 * kMiB);
  ASSERT_THAT(m.Malloc(20 * kMiB, 0), IsOk());
  EXPECT_EQ(m.segment_allocs(), 3u);
  EXPECT_EQ(m.reserved(), 44 * kMiB);
}

TEST(TorchModelTest, StreamsKeepTheirOwnBlocks) {
  TorchCachingModel m(0);
  auto a = m.Malloc(4096, 1);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(m.Free(*a), IsOk());
  ASSERT_THAT(m.Malloc(4096, 2), IsOk());
  EXPECT_EQ(m.segment_allocs(), 2u);
}

TEST(TorchModelTest, FullDeviceReleasesCachedSegmentsThenOoms) {
  TorchCachingModel m(40 * kMiB);
  auto a = m.Malloc(12 * kMiB, 0);
  auto b = m.Malloc(12 * kMiB, 0);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  ASSERT_THAT(m.Free(*a), IsOk());
  // 24 MiB reserved + 20 MiB does not fit: the cached 12 MiB segment goes first.
  ASSERT_THAT(m.Malloc(20 * kMiB, 0), IsOk());
  EXPECT_EQ(m.segment_frees(), 1u);
  EXPECT_EQ(m.reserved(), 32 * kMiB);
  EXPECT_THAT(m.Malloc(16 * kMiB, 0), HasCode(ErrorCode::kResourceExhausted));
  EXPECT_EQ(m.ooms(), 1u);
}

TEST(TorchModelTest, InitialStateFromASnapshot) {
  TorchCachingModel m(0);
  ASSERT_THAT(m.AddSegment(1 << 30, 20 * kMiB, 0, false), IsOk());
  ASSERT_THAT(m.PlaceLive((1 << 30) + 4 * kMiB, 3 * kMiB, 0), IsOk());
  EXPECT_EQ(m.allocated(), 3 * kMiB);
  EXPECT_EQ(m.InactiveSplitBytes(), 17 * kMiB);
  EXPECT_EQ(m.LargestFreeBlock(), 13 * kMiB);
  EXPECT_THAT(m.PlaceLive((1 << 30) + 5 * kMiB, 100, 0), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(m.PlaceLive(5, 100, 0), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(m.AddSegment((1 << 30) + kMiB, kMiB, 0, false), HasCode(ErrorCode::kDataLoss));
  ASSERT_THAT(m.Free((1 << 30) + 4 * kMiB), IsOk());
  m.EmptyCache();
  EXPECT_EQ(m.reserved(), 0u);
}

TEST(TorchModelTest, RequestsNoDeviceCanHoldAreOoms) {
  TorchCachingModel m(0);
  EXPECT_THAT(m.Malloc(~uint64_t{0}, 0), HasCode(ErrorCode::kResourceExhausted));
  EXPECT_THAT(m.Malloc((uint64_t{1} << 56) + 1, 0), HasCode(ErrorCode::kResourceExhausted));
  EXPECT_EQ(m.ooms(), 2u);
  EXPECT_EQ(m.reserved(), 0u);
  ASSERT_THAT(m.Malloc(4096, 0), IsOk());
}

TEST(TorchModelTest, KeptCountsMatchARecountThroughRandomWork) {
  // The split free bytes are kept as blocks enter and leave the pools (replay
  // reads them at every new peak); a recount over every block must agree
  // after each step of mixed small and large, multi-stream work with frees,
  // cache releases and a device that fills up.
  std::mt19937_64 rng(7);
  TorchCachingModel m(600 * kMiB);
  ASSERT_THAT(m.AddSegment(uint64_t{1} << 40, 40 * kMiB, 0, false), IsOk());
  ASSERT_THAT(m.PlaceLive((uint64_t{1} << 40) + 6 * kMiB, 3 * kMiB, 0), IsOk());
  ASSERT_THAT(m.CheckInvariants(), IsOk());
  std::vector<uint64_t> live;
  uint64_t largest_seen = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t r = rng() % 100;
    if (r < 55 || live.empty()) {
      const uint64_t size = rng() % 4 == 0 ? 1 + rng() % (30 * kMiB) : 1 + rng() % kMiB;
      auto a = m.Malloc(size, rng() % 3 == 0 ? 1 : 0);
      if (a) live.push_back(*a);
    } else if (r < 99) {
      const size_t i = rng() % live.size();
      ASSERT_THAT(m.Free(live[i]), IsOk());
      live[i] = live.back();
      live.pop_back();
    } else {
      m.EmptyCache();
    }
    ASSERT_THAT(m.CheckInvariants(), IsOk()) << "step " << step;
    largest_seen = std::max(largest_seen, m.LargestFreeBlock());
    ASSERT_LE(m.InactiveSplitBytes(), m.reserved() - m.allocated());
  }
  EXPECT_GT(m.InactiveSplitBytes(), 0u);
  EXPECT_GT(largest_seen, kMiB);
  EXPECT_GT(m.ooms(), 0u);
}

}  // namespace
}  // namespace anxin::mem
