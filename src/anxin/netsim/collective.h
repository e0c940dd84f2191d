// Collectives decomposed into point-to-point messages the way NCCL and HCCL
// run them: ring (AllReduce = ReduceScatter + AllGather, 2(n-1) steps),
// NCCL's double binary tree (two trees, each carrying half of the data, up
// and down pipelined in chunks), recursive halving-doubling (log2 n steps
// each way) and pairwise AlltoAll.
//
// Each rank runs one or more channels; a channel is a list of steps, and a
// step waits for messages to have arrived (counted per channel and peer),
// then sends its messages. Steps are produced on demand, so memory grows
// with the messages in flight, not with the length of the schedule.
//
//   CollectiveSpec spec;                         // a ring AllReduce of 1 MiB
//   ANXIN_ASSIGN_OR_RETURN(auto plan, MakePlan(spec, /*ranks=*/8));
//   Step step;
//   plan->GetStep(/*rank=*/0, /*channel=*/0, /*index=*/0, step);
//   // step.sends[0] = {peer 1, 131072 bytes}
//   LinkModel model;                             // 200 Gbps, 1 us per link
//   double us = AlphaBetaSeconds(spec, 8, model) * 1e6;
//   (void)us;
//
// Thread safety: a Plan is immutable.
#ifndef ANXIN_NETSIM_COLLECTIVE_H_
#define ANXIN_NETSIM_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/netsim/scenario.h"

namespace anxin::netsim {

struct Wait {
  int channel = 0;
  int peer = 0;
  uint32_t count = 0;  // messages from peer on channel, cumulative
};
struct Send {
  int peer = 0;
  int channel = 0;  // the channel whose counter the receiver advances
  uint64_t bytes = 0;
  bool credit = false;  // flow control (a freed buffer slot), not data: no handshake
};
struct Step {
  std::vector<Wait> waits;
  std::vector<Send> sends;
  void Clear() {
    waits.clear();
    sends.clear();
  }
};

class Plan {
 public:
  virtual ~Plan() = default;
  virtual int Channels() const = 0;
  virtual int Steps(int rank, int channel) const = 0;
  virtual void GetStep(int rank, int channel, int index, Step& out) const = 0;
};

// Unsupported pairs (tree for AlltoAll, hd for a rank count that is not a
// power of two) are kInvalidArgument naming what works instead.
[[nodiscard]] Result<std::unique_ptr<Plan>> MakePlan(const CollectiveSpec& spec, int ranks);

// NCCL's flow control: a connection has kNcclSteps buffer slots, so a sender
// may be at most that many chunks ahead of what its receiver has consumed;
// the receiver frees a slot with a small message (kCreditBytes) once it has
// used the chunk (reduced and passed it on).
inline constexpr int kNcclSteps = 8;
inline constexpr uint64_t kCreditBytes = 64;

// The tree's chunk when the scenario leaves it to NCCL (chunk: auto): a
// slot of the 4 MiB default buffer (512 KiB), halved while the collective has
// fewer than depth x 8 chunks per tree (down to 128 KiB), depth x 4 (down to
// 64 KiB) and depth (down to 32 KiB), as NCCL's enqueue does for the Simple
// protocol; depth is the double binary tree's.
uint64_t NcclTreeChunk(uint64_t bytes, int ranks);

// NCCL's btree: parent and children of rank in tree 0 or 1 (-1: none).
struct TreeLinks {
  int parent = -1;
  int child[2] = {-1, -1};
};
TreeLinks DoubleBinaryTree(int ranks, int rank, int tree);

// The alpha-beta model of an uncongested run: each message of m bytes over
// h links costs h * delay + (h - 1) * packet / rate (store and forward) +
// wire(m) / rate, where wire adds the per-packet header. For ring the
// critical path is summed around the ring; for halving-doubling over its
// steps. The tree's schedule (its chunks, their dependencies and the credit
// window) is evaluated message by message: a NIC shares its line rate
// equally among the messages it is sending (one queue pair's in order), and
// a rank's incoming link forwards what all its senders send first come,
// first served, so two children sending to one parent take twice as long.
// The fabric between the NICs is taken as non-blocking, and nothing is
// paused (no PFC).
struct LinkModel {
  double gbps = 200;
  uint64_t delay_ps = 1'000'000;
  uint32_t mtu = 4096;
  uint32_t header_bytes = 62;
  std::function<int(int, int)> hops;  // links between two ranks
};
double AlphaBetaSeconds(const CollectiveSpec& spec, int ranks, const LinkModel& m);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_COLLECTIVE_H_
