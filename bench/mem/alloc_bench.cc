// malloc+free pairs on the size mix of a real snapshot's allocations. Each
// iteration frees the oldest of 64 live blocks and allocates the next size, so
// that blocks are reused and split as in training, not just popped and pushed.
//
// Every allocation and free is checked: a run in which one fails is reported
// as an error instead of a time. Results go through the const overload of
// benchmark::DoNotOptimize: with g++ 12 the non-const one ("+m,r") can lose
// the store into the ring, which then frees stale addresses.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "anxin/mem/allocator.h"
#include "anxin/mem/torch_model.h"
#include "anxin/mem/trace.h"

namespace {

using namespace anxin::mem;
using anxin::kMiB;

constexpr size_t kWindow = 64;
constexpr const char* kSnapshot =
    ANXIN_SOURCE_DIR "/tests/fixtures/mem-traces/cs336-memory_ctx128_fullstep.pickle";

const std::vector<uint64_t>& Sizes() {
  static const std::vector<uint64_t> sizes = [] {
    std::vector<uint64_t> s;
    auto t = ReadTrace(kSnapshot);
    if (t) {
      for (const auto& e : t->events) {
        if (e.action == TraceEvent::Action::kAlloc) s.push_back(e.size);
      }
    }
    if (s.empty()) {
      // Timing a made-up size mix would print figures that look like the
      // snapshot's: refuse instead.
      std::fprintf(stderr, "error: no allocations read from the snapshot %s: %s\n", kSnapshot,
                   t ? "it holds none" : t.error().ToString().c_str());
      std::exit(2);
    }
    return s;
  }();
  return sizes;
}

// Failed calls; a benchmark with any is reported as an error.
struct Failures {
  uint64_t allocs = 0, frees = 0;
  void Report(benchmark::State& state) const {
    if (allocs || frees) {
      state.SkipWithError(fmt::format("{} allocations and {} frees failed", allocs, frees).c_str());
    }
  }
};

template <typename AllocFn, typename FreeFn>
void Pairs(benchmark::State& state, AllocFn alloc, FreeFn free) {
  const auto& sizes = Sizes();
  std::vector<uint64_t> ring(kWindow, 0);
  size_t i = 0;
  for (size_t k = 0; k < kWindow; ++k) ring[k] = alloc(sizes[i++ % sizes.size()]);
  size_t slot = 0;
  for (auto _ : state) {
    free(ring[slot]);
    const uint64_t p = alloc(sizes[i++ % sizes.size()]);
    benchmark::DoNotOptimize(p);
    ring[slot] = p;
    slot = (slot + 1) % kWindow;
  }
  for (uint64_t p : ring) free(p);
  state.SetItemsProcessed(state.iterations());
}

// The same size over and over: the cached-block path every allocator has.
template <typename AllocFn, typename FreeFn>
void SameSize(benchmark::State& state, AllocFn alloc, FreeFn free) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    const uint64_t p = alloc(size);
    benchmark::DoNotOptimize(p);
    free(p);
  }
}

// anxin's allocator on a simulated 1 TiB device (addresses only), default knobs.
template <typename Body>
void WithAnxin(benchmark::State& state, Body body) {
  SimOptions sim;
  sim.capacity = uint64_t{1} << 40;
  auto a = std::move(*Allocator::Create(MakeSimProvider(sim), {}));
  Failures f;
  auto alloc = [&](uint64_t n) -> uint64_t {
    auto p = a->Allocate(n, 0);
    if (!p) {
      ++f.allocs;
      return 0;
    }
    return *p;
  };
  auto free = [&](uint64_t p) {
    if (!a->Free(p)) ++f.frees;
  };
  body(alloc, free);
  // How often the policy unmaps a chunk to remap it, and what it holds.
  AllocatorStats s = a->Stats();
  state.counters["unmaps/pair"] =
      static_cast<double>(s.unmaps) / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.counters["peak_reserved_MiB"] = static_cast<double>(s.peak_reserved_bytes) / kMiB;
  f.Report(state);
}

template <typename Body>
void WithModel(benchmark::State& state, Body body) {
  TorchCachingModel m(0);
  Failures f;
  auto alloc = [&](uint64_t n) -> uint64_t {
    auto p = m.Malloc(n, 0);
    if (!p) {
      ++f.allocs;
      return 0;
    }
    return *p;
  };
  auto free = [&](uint64_t p) {
    if (!m.Free(p)) ++f.frees;
  };
  body(alloc, free);
  state.counters["peak_reserved_MiB"] = static_cast<double>(m.reserved()) / kMiB;
  f.Report(state);
}

template <typename Body>
void WithGlibc(benchmark::State& state, Body body) {
  Failures f;
  auto alloc = [&](uint64_t n) -> uint64_t {
    void* p = std::malloc(n);
    if (!p) ++f.allocs;
    return reinterpret_cast<uint64_t>(p);
  };
  auto free = [](uint64_t p) { std::free(reinterpret_cast<void*>(p)); };
  body(alloc, free);
  f.Report(state);
}

void BM_Anxin(benchmark::State& state) {
  WithAnxin(state, [&](auto alloc, auto free) { Pairs(state, alloc, free); });
}

void BM_PyTorchModel(benchmark::State& state) {
  WithModel(state, [&](auto alloc, auto free) { Pairs(state, alloc, free); });
}

void BM_GlibcMalloc(benchmark::State& state) {
  WithGlibc(state, [&](auto alloc, auto free) { Pairs(state, alloc, free); });
}

void BM_AnxinSameSize(benchmark::State& state) {
  WithAnxin(state, [&](auto alloc, auto free) { SameSize(state, alloc, free); });
}

void BM_PyTorchModelSameSize(benchmark::State& state) {
  WithModel(state, [&](auto alloc, auto free) { SameSize(state, alloc, free); });
}

void BM_GlibcMallocSameSize(benchmark::State& state) {
  WithGlibc(state, [&](auto alloc, auto free) { SameSize(state, alloc, free); });
}

BENCHMARK(BM_Anxin);
BENCHMARK(BM_PyTorchModel);
BENCHMARK(BM_GlibcMalloc);
BENCHMARK(BM_AnxinSameSize)->Arg(4096)->Arg(8 << 20);
BENCHMARK(BM_PyTorchModelSameSize)->Arg(4096)->Arg(8 << 20);
BENCHMARK(BM_GlibcMallocSameSize)->Arg(4096)->Arg(8 << 20);

}  // namespace

BENCHMARK_MAIN();
