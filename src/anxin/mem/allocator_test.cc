#include "anxin/mem/allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "anxin/base/testing.h"
#include "anxin/mem/alloc_config.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

std::unique_ptr<Allocator> Make(SimOptions sim, AllocatorOptions opt = {}) {
  auto a = Allocator::Create(MakeSimProvider(std::move(sim)), opt);
  EXPECT_THAT(a, IsOk());
  return std::move(*a);
}

SimOptions Backed(uint64_t capacity, bool vm = true) {
  SimOptions o;
  o.capacity = capacity;
  o.backed = true;
  o.virtual_memory = vm;
  return o;
}

TEST(AllocatorTest, AllocatesAlignedBlocksAndCountsThem) {
  auto a = Make(Backed(64 * kMiB));
  auto p = a->Allocate(1000);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(*p % 512, 0u);
  std::memset(reinterpret_cast<void*>(*p), 0xab, 1000);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_THAT(a->Free(*p), IsOk());
  s = a->Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 1024u);
  // The same size comes back from the cache without new memory.
  auto q = a->Allocate(900);
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(*q, *p);
  EXPECT_THAT(a->Free(*q), IsOk());
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

TEST(AllocatorTest, RejectsUnknownAndDoubleFree) {
  auto a = Make(Backed(64 * kMiB));
  EXPECT_THAT(a->Free(0x1234), HasCode(ErrorCode::kInvalidArgument, HasSubstr("0x1234")));
  auto p = a->Allocate(4096);
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(a->Free(*p), IsOk());
  EXPECT_THAT(a->Free(*p), HasCode(ErrorCode::kInvalidArgument, HasSubstr("already freed")));
}

TEST(AllocatorTest, RejectsBadOptions) {
  AllocatorOptions o;
  o.block_size = 3 * kMiB + 1;
  EXPECT_THAT(Allocator::Create(MakeSimProvider({}), o),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("granularity")));
  o = {};
  o.fragment_threshold = 2;
  EXPECT_THAT(Allocator::Create(MakeSimProvider({}), o), HasCode(ErrorCode::kInvalidArgument));
}

// Random alloc/free sequences keep blocks disjoint, aligned, intact (each
// block is filled with its own tag and checked on free) and the stats exact.
void RandomWorkout(Allocator& a, uint32_t seed, int steps, bool backed) {
  std::mt19937_64 rng(seed);
  std::map<uint64_t, std::pair<uint64_t, uint8_t>> live;  // addr -> size, tag
  uint64_t requested = 0;
  for (int i = 0; i < steps; ++i) {
    bool alloc = live.empty() || rng() % 100 < 55;
    if (alloc) {
      uint64_t size = rng() % 4 == 0 ? 1 + rng() % (6 * kMiB) : 1 + rng() % 8192;
      auto p = a.Allocate(size, rng() % 8 == 0 ? 1 : 0);
      ASSERT_THAT(p, IsOk());
      ASSERT_EQ(*p % 512, 0u);
      auto next = live.lower_bound(*p);
      if (next != live.end()) {
        ASSERT_LE(*p + size, next->first) << "overlap";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second.first, *p) << "overlap";
      }
      uint8_t tag = static_cast<uint8_t>(rng());
      if (backed) {
        auto* m = reinterpret_cast<uint8_t*>(*p);
        m[0] = tag;
        m[size - 1] = tag;
        m[size / 2] = tag;
      }
      live[*p] = {size, tag};
      requested += size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      auto [addr, st] = *it;
      if (backed) {
        auto* m = reinterpret_cast<uint8_t*>(addr);
        ASSERT_EQ(m[0], st.second);
        ASSERT_EQ(m[st.first - 1], st.second);
        ASSERT_EQ(m[st.first / 2], st.second);
      }
      ASSERT_THAT(a.Free(addr), IsOk());
      requested -= st.first;
      live.erase(it);
    }
    if (i % 97 == 0) {
      ASSERT_THAT(a.CheckInvariants(), IsOk()) << "step " << i;
      ASSERT_EQ(a.Stats().requested_bytes, requested);
    }
    if (i % 1000 == 999) {
      ASSERT_THAT(a.EmptyCache(), IsOk());
    }
  }
  for (auto& [addr, st] : live) ASSERT_THAT(a.Free(addr), IsOk());
  ASSERT_THAT(a.CheckInvariants(), IsOk());
  AllocatorStats s = a.Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.requested_bytes, 0u);
}

TEST(AllocatorTest, RandomSequencesVirtualMemoryBacked) {
  for (double threshold : {0.0, 0.15}) {
    AllocatorOptions o;
    o.fragment_threshold = threshold;
    auto a = Make(Backed(512 * kMiB), o);
    RandomWorkout(*a, 7, 3000, true);
    EXPECT_GT(a->Stats().maps, 0u);
  }
}

TEST(AllocatorTest, RandomSequencesPlainSegments) {
  auto a = Make(Backed(512 * kMiB, /*vm=*/false));
  RandomWorkout(*a, 11, 3000, true);
  EXPECT_FALSE(a->Stats().virtual_memory);
}

TEST(AllocatorTest, RandomSequencesUnbackedFewChunks) {
  AllocatorOptions o;
  o.fragment_threshold = 0;
  SimOptions sim;
  sim.capacity = 1 * kGiB;
  auto a = Make(sim, o);
  RandomWorkout(*a, 13, 3000, false);
}

// Free space in many small holes is remapped into one large block instead of
// growing: reserved stays where it was.
TEST(AllocatorTest, RemapsIdleChunksInsteadOfGrowing) {
  AllocatorOptions o;
  o.fragment_threshold = 0;
  auto a = Make(Backed(512 * kMiB), o);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 32; ++i) {
    auto p = a->Allocate(4 * kMiB);
    ASSERT_THAT(p, IsOk());
    blocks.push_back(*p);
  }
  uint64_t reserved = a->Stats().reserved_bytes;
  for (size_t i = 1; i < blocks.size(); i += 2) {
    std::memset(reinterpret_cast<void*>(blocks[i]), static_cast<int>(i), 4 * kMiB);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) ASSERT_THAT(a->Free(blocks[i]), IsOk());
  // 16 holes of 4 MiB cannot hold 48 MiB, but their 32 chunks can.
  auto big = a->Allocate(48 * kMiB);
  ASSERT_THAT(big, IsOk());
  std::memset(reinterpret_cast<void*>(*big), 1, 48 * kMiB);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.reserved_bytes, reserved);
  EXPECT_GT(s.unmaps, 0u);
  EXPECT_GE(s.retries, 1u);
  // The blocks that stayed live kept their contents across the remapping.
  for (size_t i = 1; i < blocks.size(); i += 2) {
    const auto* m = reinterpret_cast<const uint8_t*>(blocks[i]);
    ASSERT_EQ(m[0], i);
    ASSERT_EQ(m[4 * kMiB - 1], i);
  }
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

// Unmapping never races kernels in flight: within each allocator call, every
// Unmap comes after a Synchronize, and a reclaim pass synchronises once, not
// once per chunk. Also for empty_cache and teardown.
TEST(AllocatorTest, SynchronizesOnceBeforeEachBatchOfUnmaps) {
  bool synced = false;
  int syncs = 0, unmaps = 0, unsynced_unmaps = 0;
  SimOptions sim = Backed(512 * kMiB);
  sim.observe = [&](std::string_view op) {
    if (op == "synchronize") {
      synced = true;
      ++syncs;
    } else if (op == "unmap") {
      ++unmaps;
      if (!synced) ++unsynced_unmaps;
    }
  };
  AllocatorOptions o;
  o.fragment_threshold = 0;
  auto a = Make(sim, o);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 32; ++i) {
    synced = false;
    auto p = a->Allocate(4 * kMiB);
    ASSERT_THAT(p, IsOk());
    blocks.push_back(*p);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) {
    synced = false;
    ASSERT_THAT(a->Free(blocks[i]), IsOk());
  }
  EXPECT_EQ(unmaps, 0);
  synced = false;
  ASSERT_THAT(a->Allocate(48 * kMiB), IsOk());  // 24 chunks remapped in one pass
  EXPECT_GE(unmaps, 2);
  EXPECT_EQ(syncs, 1);
  EXPECT_EQ(unsynced_unmaps, 0);
  ASSERT_THAT(a->Free(blocks[1]), IsOk());
  synced = false;
  ASSERT_THAT(a->EmptyCache(), IsOk());
  EXPECT_EQ(unsynced_unmaps, 0);
  synced = false;
  const int before = unmaps;
  a.reset();
  EXPECT_GT(unmaps, before);
  EXPECT_EQ(unsynced_unmaps, 0);
}

// Cached blocks that, once returned and merged, hold the request over chunks
// that are still mapped: the allocator places it there instead of remapping
// those chunks under fresh address space.
TEST(AllocatorTest, ReclaimPlacesTheBlockOverStillMappedChunks) {
  AllocatorOptions o;
  o.fragment_threshold = 0;
  auto a = Make(Backed(64 * kMiB), o);
  auto first = a->Allocate(6 * kMiB);
  auto second = a->Allocate(6 * kMiB);
  auto guard = a->Allocate(6 * kMiB);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  ASSERT_THAT(guard, IsOk());
  std::memset(reinterpret_cast<void*>(*guard), 7, 6 * kMiB);
  ASSERT_EQ(*second, *first + 6 * kMiB);
  ASSERT_THAT(a->Free(*first), IsOk());
  ASSERT_THAT(a->Free(*second), IsOk());
  AllocatorStats before = a->Stats();
  auto big = a->Allocate(12 * kMiB);
  ASSERT_THAT(big, IsOk());
  EXPECT_EQ(*big, *first);
  std::memset(reinterpret_cast<void*>(*big), 1, 12 * kMiB);
  AllocatorStats after = a->Stats();
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.unmaps, before.unmaps);
  EXPECT_EQ(after.maps, before.maps);
  EXPECT_EQ(after.retries, before.retries + 1);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(*guard)[6 * kMiB - 1], 7);
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

TEST(AllocatorTest, StreamsDoNotShareFreedBlocks) {
  auto a = Make(Backed(64 * kMiB));
  auto p = a->Allocate(8192, 1);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT(a->Free(*p), IsOk());
  auto q = a->Allocate(8192, 2);
  ASSERT_THAT(q, IsOk());
  EXPECT_NE(*p, *q);
  auto r = a->Allocate(8192, 1);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(*p, *r);
}

TEST(AllocatorTest, RequestsNoDeviceCanHoldAreOomsNotCrashes) {
  // 2^64 - 1 bytes once wrapped to 0 when rounded up and crashed the process
  // (PyTorch hands the allocator whatever size a bad shape asks for).
  for (bool vm : {true, false}) {
    auto a = Make(Backed(64 * kMiB, vm));
    for (uint64_t size : {~uint64_t{0}, ~uint64_t{0} - 511, uint64_t{1} << 62, 64 * kMiB + 1}) {
      EXPECT_THAT(a->Allocate(size),
                  HasCode(ErrorCode::kResourceExhausted, HasSubstr("larger than the device")))
          << size;
    }
    EXPECT_EQ(a->Stats().ooms, 4u);
    auto p = a->Allocate(4096);  // and it still serves what fits
    ASSERT_THAT(p, IsOk());
    EXPECT_THAT(a->Free(*p), IsOk());
    EXPECT_THAT(a->CheckInvariants(), IsOk());
  }
}

TEST(AllocatorTest, PoolLimitWithoutExpandIsAnOomCarryingStats) {
  AllocatorOptions o;
  o.pool_bytes = 8 * kMiB;
  o.expand = false;
  auto a = Make(Backed(64 * kMiB), o);
  auto p = a->Allocate(6 * kMiB);
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(a->Allocate(4 * kMiB),
              HasCode(ErrorCode::kResourceExhausted,
                      AllOf(HasSubstr("reserved 6291456 of pool 8388608"), HasSubstr("expand"))));
  EXPECT_EQ(a->Stats().ooms, 1u);
  o.expand = true;
  auto b = Make(Backed(64 * kMiB), o);
  ASSERT_THAT(b->Allocate(6 * kMiB), IsOk());
  ASSERT_THAT(b->Allocate(4 * kMiB), IsOk());
  EXPECT_EQ(b->Stats().expansions, 1u);
  EXPECT_THAT(b->CheckInvariants(), IsOk());
}

TEST(AllocatorTest, FailedPhysicalCreateReclaimsThenReportsOom) {
  std::atomic<bool> fail_create{false};
  SimOptions sim = Backed(64 * kMiB);
  sim.fail = [&](std::string_view op) { return op == "create" && fail_create.load(); };
  AllocatorOptions o;
  o.fragment_threshold = 0.5;  // would otherwise keep idle memory and grow
  auto a = Make(sim, o);
  auto p = a->Allocate(8 * kMiB);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT(a->Free(*p), IsOk());
  fail_create = true;
  // The device refuses new memory: the cached 8 MiB are reclaimed and remapped.
  auto q = a->Allocate(6 * kMiB + 1);
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(a->Stats().retries, 1u);
  // Nothing left to reclaim: a clear OOM with the stats.
  EXPECT_THAT(a->Allocate(16 * kMiB), HasCode(ErrorCode::kResourceExhausted,
                                              AllOf(HasSubstr("out of memory allocating 16777216"),
                                                    HasSubstr("reserved 8388608"))));
  EXPECT_THAT(a->CheckInvariants(), IsOk());
  fail_create = false;
  EXPECT_THAT(a->Allocate(16 * kMiB), IsOk());
}

TEST(AllocatorTest, FailedMapLeavesConsistentState) {
  std::atomic<bool> fail_map{false};
  SimOptions sim = Backed(64 * kMiB);
  sim.fail = [&](std::string_view op) { return op == "map" && fail_map.load(); };
  auto a = Make(sim);
  fail_map = true;
  EXPECT_THAT(a->Allocate(4 * kMiB),
              HasCode(ErrorCode::kResourceExhausted, HasSubstr("mapping chunk")));
  EXPECT_THAT(a->CheckInvariants(), IsOk());
  fail_map = false;
  EXPECT_THAT(a->Allocate(4 * kMiB), IsOk());
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

// Every way the device can refuse a step of Allocate: the call fails, nothing
// is lost (the block it took goes back to the free index, the chunks it had
// unmapped stay accounted), the invariants hold, the live blocks keep their
// data, and once the device recovers the same call works.
struct FaultCase {
  const char* name;
  std::string op;  // fails from its nth call (from 1) on
  int nth;
  std::string also;  // a second op that fails from the start, or ""
  // 0: the free memory left by the freed blocks triggers a reclaim at once;
  // 1: it does not, and only a failed create leads to one.
  double threshold;
  ErrorCode code;
  const char* message;
};

// Fails `op` from its nth call on, and `also` always, while armed.
std::function<bool(std::string_view)> FailFrom(const std::atomic<bool>& armed, std::string op,
                                               int nth, std::string also = "") {
  auto calls = std::make_shared<int>(0);
  return [&armed, op, nth, also, calls](std::string_view what) {
    if (!armed) return false;
    if (what == also) return true;
    return what == op && ++*calls >= nth;
  };
}

class AllocatorFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(AllocatorFaultTest, FailedDeviceCallLosesNothing) {
  const FaultCase& c = GetParam();
  std::atomic<bool> armed{false};
  SimOptions sim = Backed(512 * kMiB);
  sim.fail = FailFrom(armed, c.op, c.nth, c.also);
  AllocatorOptions o;
  o.fragment_threshold = c.threshold;
  auto a = Make(sim, o);
  // 16 live 4 MiB blocks with their own data, and 16 freed ones between them:
  // a 48 MiB block is stitched from the freed blocks' 32 chunks.
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 32; ++i) {
    auto p = a->Allocate(4 * kMiB);
    ASSERT_THAT(p, IsOk());
    blocks.push_back(*p);
  }
  // Each chunk's first and last byte: enough to see a chunk lost or moved.
  auto fill = [](uint64_t addr, uint64_t size, uint8_t tag) {
    for (uint64_t at = 0; at < size; at += 2 * kMiB) {
      reinterpret_cast<uint8_t*>(addr)[at] = tag;
      reinterpret_cast<uint8_t*>(addr)[at + 2 * kMiB - 1] = tag;
    }
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 2) {
      fill(blocks[i], 4 * kMiB, static_cast<uint8_t>(i));
    } else {
      ASSERT_THAT(a->Free(blocks[i]), IsOk());
    }
  }
  AllocatorStats before = a->Stats();
  armed = true;
  EXPECT_THAT(a->Allocate(48 * kMiB), HasCode(c.code, HasSubstr(c.message)));
  armed = false;
  EXPECT_THAT(a->CheckInvariants(), IsOk());
  AllocatorStats after = a->Stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  EXPECT_EQ(after.allocs, before.allocs);
  auto big = a->Allocate(48 * kMiB);
  ASSERT_THAT(big, IsOk());
  fill(*big, 48 * kMiB, 1);
  EXPECT_THAT(a->CheckInvariants(), IsOk());
  for (size_t i = 1; i < blocks.size(); i += 2) {
    const auto* m = reinterpret_cast<const uint8_t*>(blocks[i]);
    for (uint64_t at : {uint64_t{0}, 2 * kMiB - 1, 2 * kMiB, 4 * kMiB - 1}) {
      ASSERT_EQ(m[at], i) << "block " << i << " byte " << at;
    }
  }
  EXPECT_LE(a->Stats().reserved_bytes, before.reserved_bytes + 48 * kMiB);
}

INSTANTIATE_TEST_SUITE_P(
    EveryDeviceCall, AllocatorFaultTest,
    ::testing::Values(
        FaultCase{"Synchronize", "synchronize", 1, "", 0, ErrorCode::kUnavailable,
                  "waiting for the device before unmapping idle chunks"},
        FaultCase{"FirstUnmap", "unmap", 1, "", 0, ErrorCode::kUnavailable, "unmapping idle chunk"},
        FaultCase{"LaterUnmap", "unmap", 5, "", 0, ErrorCode::kUnavailable, "unmapping idle chunk"},
        FaultCase{"FirstMap", "map", 1, "", 0, ErrorCode::kResourceExhausted, "mapping chunk"},
        FaultCase{"LaterMap", "map", 3, "", 0, ErrorCode::kResourceExhausted, "mapping chunk"},
        FaultCase{"CreateThenSynchronize", "create", 1, "synchronize", 1, ErrorCode::kUnavailable,
                  "waiting for the device before unmapping idle chunks"},
        FaultCase{"CreateThenUnmap", "create", 1, "unmap", 1, ErrorCode::kUnavailable,
                  "unmapping idle chunk"},
        FaultCase{"CreateThenMap", "create", 1, "map", 1, ErrorCode::kResourceExhausted,
                  "mapping chunk"}),
    [](const auto& info) { return std::string(info.param.name); });

// empty_cache refused by the device part-way: what was not released stays
// accounted (and is not released twice), and a later call finishes the job.
TEST(AllocatorTest, FailedEmptyCacheLosesNothing) {
  for (auto [op, nth] : std::vector<std::pair<std::string, int>>{
           {"synchronize", 1}, {"unmap", 1}, {"unmap", 3}, {"release", 1}, {"release", 3}}) {
    SCOPED_TRACE(op + " from call " + std::to_string(nth));
    std::atomic<bool> armed{false};
    SimOptions sim = Backed(64 * kMiB);
    sim.fail = FailFrom(armed, op, nth);
    auto a = Make(sim);
    auto p = a->Allocate(10 * kMiB);
    auto q = a->Allocate(1 * kMiB);
    ASSERT_THAT(p, IsOk());
    ASSERT_THAT(q, IsOk());
    ASSERT_THAT(a->Free(*p), IsOk());
    armed = true;
    EXPECT_THAT(a->EmptyCache(), HasCode(ErrorCode::kUnavailable, HasSubstr("injected")));
    armed = false;
    EXPECT_THAT(a->CheckInvariants(), IsOk());
    ASSERT_THAT(a->EmptyCache(), IsOk());
    EXPECT_EQ(a->Stats().reserved_bytes, 2 * kMiB);
    EXPECT_THAT(a->CheckInvariants(), IsOk());
  }
}

// CheckInvariants reads the free indexes too: a block handed out that is
// still indexed (it could be handed out twice) is caught.
TEST(AllocatorTest, CheckInvariantsCatchesABlockInUseLeftInTheFreeIndex) {
  for (bool vm : {true, false}) {
    auto a = Make(Backed(64 * kMiB, vm));
    auto p = a->Allocate(6 * kMiB);
    ASSERT_THAT(p, IsOk());
    ASSERT_THAT(a->CheckInvariants(), IsOk());
    ASSERT_THAT(a->SetIndexedForTesting(*p, true), IsOk());
    EXPECT_THAT(a->CheckInvariants(),
                HasCode(ErrorCode::kInternal, HasSubstr("in use but in the free index")))
        << (vm ? "virtual memory" : "segments");
    ASSERT_THAT(a->SetIndexedForTesting(*p, false), IsOk());
    EXPECT_THAT(a->CheckInvariants(), IsOk());
  }
}

TEST(AllocatorTest, PlainProviderReleasesFreeSegmentsUnderPressure) {
  AllocatorOptions o;
  o.pool_bytes = 32 * kMiB;
  o.expand = false;
  auto a = Make(Backed(64 * kMiB, false), o);
  std::vector<uint64_t> small;
  for (int i = 0; i < 4; ++i) {
    auto p = a->Allocate(6 * kMiB);
    ASSERT_THAT(p, IsOk());
    small.push_back(*p);
  }
  for (uint64_t p : small) ASSERT_THAT(a->Free(p), IsOk());
  // 24 MiB of free 6 MiB segments cannot hold 20 MiB; they are released first.
  EXPECT_THAT(a->Allocate(20 * kMiB), IsOk());
  EXPECT_EQ(a->Stats().device_frees, 4u);
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

TEST(AllocatorTest, EmptyCacheReturnsIdleMemory) {
  auto a = Make(Backed(64 * kMiB));
  auto p = a->Allocate(10 * kMiB);
  auto q = a->Allocate(1 * kMiB);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT(q, IsOk());
  ASSERT_THAT(a->Free(*p), IsOk());
  ASSERT_THAT(a->EmptyCache(), IsOk());
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_THAT(a->CheckInvariants(), IsOk());
}

TEST(AllocatorTest, ConcurrentThreadsStress) {
  auto a = Make(Backed(1 * kGiB));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      std::vector<std::pair<uint64_t, uint64_t>> mine;
      for (int i = 0; i < 3000; ++i) {
        if (mine.empty() || rng() % 2) {
          uint64_t size = 1 + rng() % (rng() % 10 == 0 ? 3 * kMiB : 16384);
          auto p = a->Allocate(size, t % 2);
          if (!p) {
            ++failures;
            continue;
          }
          std::memset(reinterpret_cast<void*>(*p), t, size);
          mine.emplace_back(*p, size);
        } else {
          size_t k = rng() % mine.size();
          auto* m = reinterpret_cast<uint8_t*>(mine[k].first);
          if (m[0] != t || m[mine[k].second - 1] != t) ++failures;
          if (!a->Free(mine[k].first)) ++failures;
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (auto& [p, size] : mine) {
        if (!a->Free(p)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_THAT(a->CheckInvariants(), IsOk());
  EXPECT_EQ(a->Stats().allocated_bytes, 0u);
}

TEST(AllocConfigTest, ParsesTheFieldReportKnobs) {
  auto c = ParseAllocConf(
      "provider:sim, pool_size:0.85,block_size:4MiB,expand:false,fragment_threshold:0.15,"
      "sim_capacity:2GiB,sim_backed:true");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->provider, "sim");
  EXPECT_DOUBLE_EQ(c->options.pool_fraction, 0.85);
  EXPECT_EQ(c->options.block_size, 4 * kMiB);
  EXPECT_FALSE(c->options.expand);
  EXPECT_DOUBLE_EQ(c->options.fragment_threshold, 0.15);
  EXPECT_EQ(c->sim.capacity, 2 * kGiB);
  EXPECT_TRUE(c->sim.backed);
  auto bytes = ParseAllocConf("pool_size:60GiB");
  ASSERT_THAT(bytes, IsOk());
  EXPECT_EQ(bytes->options.pool_bytes, 60 * kGiB);
  // One meaning of a size everywhere (docs/configuration.md): M is MiB, as in
  // flags, the configuration file and scenario files; MB is refused as
  // ambiguous.
  for (const char* text :
       {"block_size:2MiB", "block_size:2M", "block_size:2 mib", "block_size:2097152"}) {
    auto c2 = ParseAllocConf(text);
    ASSERT_THAT(c2, IsOk()) << text;
    EXPECT_EQ(c2->options.block_size, 2 * kMiB) << text;
  }
  EXPECT_THAT(ParseAllocConf("block_size:2MB"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("ambiguous: write 2MiB")));
}

TEST(AllocConfigTest, BadInputNamesTheKey) {
  EXPECT_THAT(ParseAllocConf("pool_sise:0.8"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown key 'pool_sise'")));
  EXPECT_THAT(ParseAllocConf("block_size:2XB"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("block_size")));
  EXPECT_THAT(ParseAllocConf("expand:maybe"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("expected true or false")));
  EXPECT_THAT(ParseAllocConf("fragment_threshold:1.5"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("outside [0, 1]")));
  EXPECT_THAT(ParseAllocConf("provider:rocm"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("sim, cuda or acl")));
  EXPECT_THAT(ParseAllocConf("nocolon"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(ProviderTest, MissingVendorLibrariesAreUnavailableWithAdvice) {
  // This machine has neither libcuda nor libascendcl; where one exists the
  // provider must come up instead.
  auto cuda = MakeCudaProvider(0);
  if (!cuda) {
    EXPECT_THAT(cuda, HasCode(ErrorCode::kUnavailable, HasSubstr("provider:sim")));
  }
  auto acl = MakeAclProvider(0);
  if (!acl) {
    EXPECT_THAT(acl, HasCode(ErrorCode::kUnavailable, HasSubstr("CANN")));
  }
}

}  // namespace
}  // namespace anxin::mem
