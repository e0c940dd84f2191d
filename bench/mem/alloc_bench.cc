// malloc+free pairs on the size mix of a real snapshot's allocations. Each
// iteration frees the oldest of 64 live blocks and allocates the next size, so
// that blocks are reused and split as in training, not just popped and pushed.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "anxin/mem/allocator.h"
#include "anxin/mem/torch_model.h"
#include "anxin/mem/trace.h"

namespace {

using namespace anxin::mem;

constexpr size_t kWindow = 64;

const std::vector<uint64_t>& Sizes() {
  static const std::vector<uint64_t> sizes = [] {
    std::vector<uint64_t> s;
    auto t = ReadTrace(std::string(ANXIN_SHARED_DIR) +
                       "/data/mem-traces/cs336-memory_ctx128_fullstep.pickle");
    if (t) {
      for (const auto& e : t->events) {
        if (e.action == TraceEvent::Action::kAlloc) s.push_back(e.size);
      }
    }
    if (s.empty()) {
      // No snapshot at hand: a mix of small and large sizes.
      for (uint64_t k = 0; k < 4096; ++k) s.push_back(k % 4 ? 512 * (1 + k % 61) : (k + 1) << 14);
    }
    return s;
  }();
  return sizes;
}

template <typename AllocFn, typename FreeFn>
void Pairs(benchmark::State& state, AllocFn alloc, FreeFn free) {
  const auto& sizes = Sizes();
  std::vector<uint64_t> ring(kWindow, 0);
  size_t i = 0;
  for (size_t k = 0; k < kWindow; ++k) ring[k] = alloc(sizes[i++ % sizes.size()]);
  size_t slot = 0;
  for (auto _ : state) {
    free(ring[slot]);
    ring[slot] = alloc(sizes[i++ % sizes.size()]);
    benchmark::DoNotOptimize(ring[slot]);
    slot = (slot + 1) % kWindow;
  }
  for (uint64_t p : ring) free(p);
  state.SetItemsProcessed(state.iterations());
}

void BM_Anxin(benchmark::State& state) {
  SimOptions sim;
  sim.capacity = uint64_t{1} << 40;
  auto a = std::move(*Allocator::Create(MakeSimProvider(sim), {}));
  Pairs(
      state, [&](uint64_t n) { return *a->Allocate(n, 0); }, [&](uint64_t p) { (void)a->Free(p); });
}

void BM_PyTorchModel(benchmark::State& state) {
  TorchCachingModel m(0);
  Pairs(
      state, [&](uint64_t n) { return *m.Malloc(n, 0); }, [&](uint64_t p) { (void)m.Free(p); });
}

void BM_GlibcMalloc(benchmark::State& state) {
  Pairs(
      state, [](uint64_t n) { return reinterpret_cast<uint64_t>(std::malloc(n)); },
      [](uint64_t p) { std::free(reinterpret_cast<void*>(p)); });
}

// The same size over and over: the cached-block path every allocator has.
template <typename AllocFn, typename FreeFn>
void SameSize(benchmark::State& state, AllocFn alloc, FreeFn free) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    uint64_t p = alloc(size);
    benchmark::DoNotOptimize(p);
    free(p);
  }
}

void BM_AnxinSameSize(benchmark::State& state) {
  SimOptions sim;
  sim.capacity = uint64_t{1} << 40;
  auto a = std::move(*Allocator::Create(MakeSimProvider(sim), {}));
  SameSize(
      state, [&](uint64_t n) { return *a->Allocate(n, 0); }, [&](uint64_t p) { (void)a->Free(p); });
}

void BM_PyTorchModelSameSize(benchmark::State& state) {
  TorchCachingModel m(0);
  SameSize(
      state, [&](uint64_t n) { return *m.Malloc(n, 0); }, [&](uint64_t p) { (void)m.Free(p); });
}

void BM_GlibcMallocSameSize(benchmark::State& state) {
  SameSize(
      state, [](uint64_t n) { return reinterpret_cast<uint64_t>(std::malloc(n)); },
      [](uint64_t p) { std::free(reinterpret_cast<void*>(p)); });
}

BENCHMARK(BM_Anxin);
BENCHMARK(BM_PyTorchModel);
BENCHMARK(BM_GlibcMalloc);
BENCHMARK(BM_AnxinSameSize)->Arg(4096)->Arg(8 << 20);
BENCHMARK(BM_PyTorchModelSameSize)->Arg(4096)->Arg(8 << 20);
BENCHMARK(BM_GlibcMallocSameSize)->Arg(4096)->Arg(8 << 20);

}  // namespace

BENCHMARK_MAIN();
