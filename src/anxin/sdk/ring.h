// A bounded lock-free queue for many producers and one consumer: the SDK's
// in-process buffer between the calling threads and the sending thread.
// A push that finds the queue full fails at once (the caller counts a
// drop); nothing ever waits or allocates after construction.
//
//   uint64_t dropped = 0;                                // pushes that found it full
//   struct Event { uint64_t step = 0; };
//   EventRing<Event> ring(4096);                         // capacity: a power of two
//   if (!ring.TryPush([&](Event& e) { e.step = 7; })) ++dropped;
//   Event e;
//   while (ring.TryPop(e)) std::printf("step %llu\n", (unsigned long long)e.step);  // one consumer
//
// Dmitry Vyukov's bounded MPMC design: each cell carries a sequence number
// that says whose turn it is, so producers claim cells with one
// compare-and-swap on the shared tail and publish with a release store.
//
// Thread safety: TryPush from any number of threads; TryPop from one thread
// at a time.
#ifndef ANXIN_SDK_RING_H_
#define ANXIN_SDK_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace anxin::sdk {

template <typename T>
class EventRing {
 public:
  // REQUIRES: capacity is a power of two >= 2.
  explicit EventRing(size_t capacity) : mask_(capacity - 1), cells_(new Cell[capacity]) {
    for (size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  size_t capacity() const { return mask_ + 1; }

  // Claims a cell, lets fill(T&) write it, then publishes it. false when full.
  template <typename Fill>
  bool TryPush(Fill&& fill) {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      uint64_t seq = c.seq.load(std::memory_order_acquire);
      auto dif = static_cast<int64_t>(seq - pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          fill(c.value);
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;  // the consumer has not freed this cell: full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // Moves the oldest published value into out. false when there is none
  // (also when the oldest claimed cell is still being written).
  bool TryPop(T& out) {
    uint64_t pos = head_.load(std::memory_order_relaxed);
    Cell& c = cells_[pos & mask_];
    uint64_t seq = c.seq.load(std::memory_order_acquire);
    if (static_cast<int64_t>(seq - (pos + 1)) < 0) return false;
    out = c.value;
    c.seq.store(pos + mask_ + 1, std::memory_order_release);
    head_.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Values pushed (claimed) so far, and popped so far.
  uint64_t pushed() const { return tail_.load(std::memory_order_acquire); }
  uint64_t popped() const { return head_.load(std::memory_order_acquire); }

  // Forgets everything. REQUIRES: no other thread uses the ring (the SDK
  // calls it in a child after fork, where only the forking thread exists).
  void ResetUnsafe() {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
  }

 private:
  struct Cell {
    std::atomic<uint64_t> seq;
    T value;
  };
  const uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> tail_{0};  // producers
  alignas(64) std::atomic<uint64_t> head_{0};  // the consumer
};

}  // namespace anxin::sdk

#endif  // ANXIN_SDK_RING_H_
