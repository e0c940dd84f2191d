// Holds a node's ranks to the lease by which a multi-node coordinator keeps
// the node's place in the job (docs/recovery.md, "Fencing"). The coordinator
// says, after each renewal, until when the ranks may run (RunUntil: the
// renewal's send time + TTL - margin); when that time passes without another
// renewal, every guarded process group is stopped with SIGSTOP, before the
// lease can expire at the store and the other nodes relaunch without this
// one. The stop comes from a guard process forked by the supervisor, so it
// also happens while the supervisor itself stalls (SIGSTOP, swapped out, a
// debugger): the supervisor's threads stop with it, the guard does not.
//
// A tripped fence stays tripped until Reset: stopped ranks are never
// continued (their generation is gone; the supervisor kills them and the
// node rejoins), and a process guarded while it is tripped is stopped at
// once. Tripped() also compares the monotonic clock with the fence time
// itself, so a supervisor that wakes after a stall longer than its lease
// sees it before it lets a rank run on, guard or no guard.
//
//   #include "anxin/base/subprocess.h"
//
//   RankFence fence;
//   ANXIN_TRY(fence.StartGuard());                 // else: in-process checks only
//   SubprocessOptions opts;
//   opts.argv = {"python3", "train.py"};
//   ANXIN_ASSIGN_OR_RETURN(auto child, Subprocess::Start(std::move(opts)));
//   fence.Guard(child->pgid());
//   const auto sent = std::chrono::steady_clock::now();   // a lease renewal is sent ...
//   fence.RunUntil({.renewed = sent, .fence_at = sent + std::chrono::seconds(4),
//                   .expires_at = sent + std::chrono::seconds(5),
//                   .holder = "node-1's etcd lease (TTL 5 s)"});
//   if (auto trip = fence.Tripped()) spdlog::error("anxin run: {}", trip->why);
//   fence.Release(child->pgid());                 // before the group is reaped
//   fence.Reset();                                // before the next launch
//
// Thread safety: every method may be called from any thread.
#ifndef ANXIN_RUN_RANK_FENCE_H_
#define ANXIN_RUN_RANK_FENCE_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "anxin/base/error.h"

namespace anxin::run {

// The fault class of a node whose ranks the fence stopped.
inline constexpr const char* kFaultLeaseLost = "lease_lost";

// What the coordinator knows about the lease that lets the ranks run.
struct RunLease {
  std::chrono::steady_clock::time_point renewed{};     // the last renewal that succeeded was sent
  std::chrono::steady_clock::time_point fence_at{};    // renewed + TTL - margin
  std::chrono::steady_clock::time_point expires_at{};  // renewed + TTL: the store may drop it
  std::string holder{};                                // "node-1's etcd lease (TTL 5 s)"
};

// The coordinator's side (Coordinator::AttachGate).
class RankGate {
 public:
  virtual ~RankGate() = default;
  // The ranks may run until lease.fence_at; a later call extends it. A call
  // that comes after the previous fence time has passed trips the fence
  // first: the lease went unrenewed that long (a stalled process).
  virtual void RunUntil(RunLease lease) = 0;
  // Stops the ranks now (the lease is known to be gone).
  virtual void Fence(std::string why) = 0;
};

class RankFence final : public RankGate {
 public:
  struct Trip {
    std::string why;
    std::chrono::system_clock::time_point when{};
  };

  RankFence();
  ~RankFence() override;  // ends the guard
  RankFence(const RankFence&) = delete;
  RankFence& operator=(const RankFence&) = delete;

  // Forks the guard process. Without it (an error here) the fence still
  // stops the ranks, from Tripped() and Fence(), but not while this process
  // is stalled.
  Status StartGuard();

  void RunUntil(RunLease lease) override;
  void Fence(std::string why) override;

  // The process group pgid is one of the ranks: stopped when the fence trips.
  void Guard(pid_t pgid);
  // Its group is about to be reaped.
  void Release(pid_t pgid);

  // The trip since the last Reset, if the fence tripped (the guard's report,
  // or the fence time passed by the monotonic clock).
  std::optional<Trip> Tripped();
  // Clears the trip (the stopped ranks are gone). If the fence time has
  // passed, the fence trips again at once.
  void Reset();

 private:
  void Send(int32_t op, int64_t value);
  void TripLocked(std::string why);                                      // REQUIRES: mu_ held
  std::string LateWhy(std::chrono::steady_clock::time_point now) const;  // REQUIRES: mu_ held

  std::mutex mu_;
  std::optional<RunLease> lease_;
  std::optional<Trip> trip_;
  int64_t epoch_ = 0;
  std::set<pid_t> groups_;
  pid_t guard_ = -1;
  int socket_ = -1;  // to and from the guard (SOCK_SEQPACKET)
};

}  // namespace anxin::run

#endif  // ANXIN_RUN_RANK_FENCE_H_
