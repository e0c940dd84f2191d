// Loads libanxin_alloc.so as PyTorch's CUDAPluggableAllocator does (dlopen,
// then the symbols by name) and drives it through the C ABI in
// include/anxin/alloc.h on the simulated device.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "anxin/alloc.h"

namespace {

struct Api {
  void* lib = nullptr;
  decltype(&anxin_alloc) alloc = nullptr;
  decltype(&anxin_free) free = nullptr;
  decltype(&anxin_empty_cache) empty_cache = nullptr;
  decltype(&anxin_alloc_get_stats) stats = nullptr;
  decltype(&anxin_alloc_last_error) last_error = nullptr;
};

Api Load() {
  Api a;
  a.lib = dlopen(ANXIN_ALLOC_SO, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(a.lib, nullptr) << dlerror();
  if (!a.lib) return a;
  a.alloc = reinterpret_cast<decltype(a.alloc)>(dlsym(a.lib, "anxin_alloc"));
  a.free = reinterpret_cast<decltype(a.free)>(dlsym(a.lib, "anxin_free"));
  a.empty_cache = reinterpret_cast<decltype(a.empty_cache)>(dlsym(a.lib, "anxin_empty_cache"));
  a.stats = reinterpret_cast<decltype(a.stats)>(dlsym(a.lib, "anxin_alloc_get_stats"));
  a.last_error = reinterpret_cast<decltype(a.last_error)>(dlsym(a.lib, "anxin_alloc_last_error"));
  return a;
}

// One process-wide library, as in PyTorch; the environment is read at the
// first call for each device.
class AllocSoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("ANXIN_ALLOC_CONF",
           "provider:sim,sim_capacity:256MiB,sim_backed:true,pool_size:0.5,block_size:2MiB,"
           "expand:false,fragment_threshold:0.02",
           1);
    api_ = new Api(Load());
  }
  static Api* api_;
};
Api* AllocSoTest::api_ = nullptr;

TEST_F(AllocSoTest, ExportsOnlyTheCAbi) {
  ASSERT_NE(api_->lib, nullptr);
  EXPECT_NE(api_->alloc, nullptr);
  EXPECT_NE(api_->free, nullptr);
  EXPECT_NE(api_->empty_cache, nullptr);
  EXPECT_NE(api_->stats, nullptr);
  EXPECT_NE(api_->last_error, nullptr);
  // The C++ core stays hidden, so it cannot clash with the host program's.
  EXPECT_EQ(dlsym(api_->lib, "_ZN5anxin3mem9Allocator8AllocateEmm"), nullptr);
}

TEST_F(AllocSoTest, AllocWriteFreeAndStats) {
  ASSERT_NE(api_->alloc, nullptr);
  void* stream = reinterpret_cast<void*>(0x10);
  void* p = api_->alloc(3 << 20, 0, stream);
  ASSERT_NE(p, nullptr) << api_->last_error();
  std::memset(p, 0x5a, 3 << 20);
  anxin_alloc_stats s{};
  ASSERT_EQ(api_->stats(0, &s), 0);
  EXPECT_EQ(s.allocated_bytes, uint64_t{3} << 20);
  EXPECT_EQ(s.reserved_bytes, uint64_t{4} << 20);
  EXPECT_EQ(s.pool_limit_bytes, uint64_t{128} << 20);
  api_->free(p, 3 << 20, 0, stream);
  ASSERT_EQ(api_->stats(0, &s), 0);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(api_->empty_cache(0), 0);
  ASSERT_EQ(api_->stats(0, &s), 0);
  EXPECT_EQ(s.reserved_bytes, 0u);
}

TEST_F(AllocSoTest, OomReturnsNullWithAReason) {
  ASSERT_NE(api_->alloc, nullptr);
  // The pool is half of 256 MiB and expand is off.
  void* p = api_->alloc(200 << 20, 0, nullptr);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(api_->last_error()).find("pool limit reached"), std::string::npos)
      << api_->last_error();
  anxin_alloc_stats s{};
  ASSERT_EQ(api_->stats(0, &s), 0);
  EXPECT_GE(s.ooms, 1u);
  EXPECT_EQ(api_->stats(0, nullptr), -1);
  EXPECT_EQ(api_->stats(7, &s), -1);  // no allocator on that device yet
}

TEST_F(AllocSoTest, ThreadsShareTheDeviceAllocator) {
  ASSERT_NE(api_->alloc, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        size_t n = 512 + static_cast<size_t>((i * 7919 + t) % 65536);
        void* p = api_->alloc(static_cast<ssize_t>(n), 0, reinterpret_cast<void*>(t % 2));
        if (!p) {
          ++bad;
          continue;
        }
        std::memset(p, t, n);
        api_->free(p, static_cast<ssize_t>(n), 0, reinterpret_cast<void*>(t % 2));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
