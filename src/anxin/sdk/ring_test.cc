#include "anxin/sdk/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace anxin::sdk {
namespace {

struct Item {
  uint32_t producer = 0;
  uint64_t n = 0;
};

TEST(EventRingTest, FullRingRefusesAndRecovers) {
  EventRing<Item> ring(8);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(ring.TryPush([&](Item& it) { it.n = i; }));
  EXPECT_FALSE(ring.TryPush([](Item&) { ADD_FAILURE() << "filled a cell of a full ring"; }));
  Item out;
  ASSERT_TRUE(ring.TryPop(out));
  EXPECT_EQ(out.n, 0u);
  EXPECT_TRUE(ring.TryPush([](Item& it) { it.n = 100; }));
  std::vector<uint64_t> rest;
  while (ring.TryPop(out)) rest.push_back(out.n);
  EXPECT_EQ(rest, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 100}));
  EXPECT_EQ(ring.pushed(), 9u);
  EXPECT_EQ(ring.popped(), 9u);
}

TEST(EventRingTest, ResetEmptiesIt) {
  EventRing<Item> ring(4);
  for (int i = 0; i < 4; ++i) ring.TryPush([](Item&) {});
  ring.ResetUnsafe();
  Item out;
  EXPECT_FALSE(ring.TryPop(out));
  EXPECT_EQ(ring.pushed(), 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.TryPush([](Item&) {}));
}

// Producers race each other and the consumer; every accepted item comes out
// exactly once, in each producer's order, and refused ones are only those
// that met a full ring.
TEST(EventRingTest, ManyProducersOneConsumer) {
  constexpr int kProducers = 4;
  constexpr uint64_t kPerProducer = 200000;
  EventRing<Item> ring(256);
  std::atomic<int> running{kProducers};
  std::vector<uint64_t> refused(kProducers, 0);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        if (!ring.TryPush([&](Item& it) {
              it.producer = static_cast<uint32_t>(p);
              it.n = i;
            }))
          ++refused[p];
      }
      running.fetch_sub(1);
    });
  }
  std::vector<int64_t> last(kProducers, -1);
  std::vector<uint64_t> got(kProducers, 0);
  Item it;
  for (;;) {
    bool done = running.load() == 0;
    bool any = false;
    while (ring.TryPop(it)) {
      any = true;
      ASSERT_LT(it.producer, static_cast<uint32_t>(kProducers));
      ASSERT_GT(static_cast<int64_t>(it.n), last[it.producer]) << "out of order";
      last[it.producer] = static_cast<int64_t>(it.n);
      ++got[it.producer];
    }
    if (done && !any) break;
  }
  for (auto& t : producers) t.join();
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(got[p] + refused[p], kPerProducer) << p;
  EXPECT_EQ(ring.pushed(), ring.popped());
}

}  // namespace
}  // namespace anxin::sdk
