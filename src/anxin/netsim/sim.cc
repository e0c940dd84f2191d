#include "anxin/netsim/sim.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_map>

#include "anxin/comm/model.h"
#include "anxin/netsim/collective.h"
#include "anxin/netsim/report.h"
#include "anxin/netsim/topology.h"

namespace anxin::netsim {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kCnpBytes = 64;
constexpr uint32_t kPauseFrameBytes = 64;
constexpr size_t kTimelineBins = 240;

enum EventKind : uint32_t {
  kArrive,     // id: packet
  kTxDone,     // id: port
  kPause,      // id: port * 16 + priority * 2 + on
  kResend,     // id: flow; aux: bytes
  kNicWake,    // id: port
  kControl,    // id: generator
  kCollStart,  // id: collective instance
  kFlowStart,  // id: index in scenario.flows
};

// 24 bytes: the time, the order of scheduling (ties in time keep it, so a run
// is deterministic) and the payload: kind in the low 3 bits, then the id (32
// bits), then aux (29 bits: a port index or a resend's bytes).
struct Event {
  uint64_t t;
  uint64_t seq;
  uint64_t payload;
  uint32_t kind() const { return static_cast<uint32_t>(payload & 7); }
  uint32_t id() const { return static_cast<uint32_t>(payload >> 3); }
  uint32_t aux() const { return static_cast<uint32_t>(payload >> 35); }
};
constexpr uint64_t kMaxAux = (uint64_t{1} << 29) - 1;

// A 4-ary min-heap on (t, seq). (t, seq) is unique, so the order of pops does
// not depend on the heap's shape: any correct priority queue gives the same
// run. Four children per node halve the depth of a binary heap and keep the
// children of a node within two cache lines.
class QuadHeap {
 public:
  bool empty() const { return h_.empty(); }
  size_t size() const { return h_.size(); }
  size_t capacity() const { return h_.capacity(); }
  const Event& Top() const { return h_.front(); }
  void Push(const Event& e) {
    size_t i = h_.size();
    h_.push_back(e);
    Event* h = h_.data();
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!Less(e, h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = e;
  }
  // Floyd's pop: the hole at the root goes down to a leaf along the smaller
  // children (3 comparisons a level, no test against the last element), then
  // the last element rises from there, usually not far.
  Event Pop() {
    Event* h = h_.data();
    const Event top = h[0];
    const size_t n = h_.size() - 1;  // after the last element is taken out
    size_t i = 0;
    while (true) {
      const size_t first = 4 * i + 1;
      if (first + 4 <= n) {
        const size_t a = Less(h[first + 1], h[first]) ? first + 1 : first;
        const size_t b = Less(h[first + 3], h[first + 2]) ? first + 3 : first + 2;
        const size_t best = Less(h[b], h[a]) ? b : a;
        h[i] = h[best];
        i = best;
        continue;
      }
      if (first < n) {
        size_t best = first;
        for (size_t c = first + 1; c < n; ++c) best = Less(h[c], h[best]) ? c : best;
        h[i] = h[best];
        i = best;
      }
      break;
    }
    const Event last = h[n];
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!Less(last, h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = last;
    h_.pop_back();
    return top;
  }

 private:
  static unsigned __int128 Key(const Event& e) {
    return static_cast<unsigned __int128>(e.t) << 64 | e.seq;
  }
  static bool Less(const Event& a, const Event& b) { return Key(a) < Key(b); }
  std::vector<Event> h_;
};

// The pending events: a timing wheel for the near future, where almost every
// event of a fabric falls (a packet's serialization and propagation), and a
// heap for the rest. The wheel has kSlots buckets of 2^shift ps, each a list
// (linked through a pool of nodes, so memory follows the events pending) in
// the order of scheduling, which is already the (t, seq) order when the
// times it received did not go back (events scheduled together for the same
// time: a fabric running in lockstep); a bucket is sorted only when they did.
// The bucket being drained is `run_`; events scheduled into it meanwhile, and
// those that come from beyond the horizon (`later_`), wait in the small heap
// `extra_` and are merged. Pops come in (t, seq) order as from one heap, so
// the runs are the same.
// REQUIRES: every pushed t >= the t of the last pop (a discrete-event run).
class EventQueue {
 public:
  static constexpr uint64_t kSlots = 4096;
  explicit EventQueue(int shift) : shift_(shift) {
    head_.fill(kNone);
    tail_.fill(kNone);
  }

  bool empty() const {
    return run_i_ == run_.size() && extra_.empty() && in_wheel_ == 0 && later_.empty();
  }
  size_t capacity() const {
    return run_.capacity() + extra_.capacity() + later_.capacity() +
           pool_.capacity() * sizeof(Node) / sizeof(Event);
  }
  void Push(const Event& e) {
    const uint64_t b = e.t >> shift_;
    if (b == cur_) {
      extra_.Push(e);
    } else if (b - cur_ < kSlots) {
      const uint64_t i = b & (kSlots - 1);
      uint32_t n = free_;
      if (n != kNone) {
        free_ = pool_[n].next;
      } else {
        n = static_cast<uint32_t>(pool_.size());
        pool_.emplace_back();
      }
      pool_[n].e = e;
      pool_[n].next = kNone;
      if (head_[i] == kNone) {
        head_[i] = n;
        used_[i / 64] |= uint64_t{1} << (i % 64);
      } else {
        if (e.t < pool_[tail_[i]].e.t) unsorted_[i / 64] |= uint64_t{1} << (i % 64);
        pool_[tail_[i]].next = n;
      }
      tail_[i] = n;
      ++in_wheel_;
    } else {
      later_.Push(e);
    }
  }
  Event Pop() {
    if (run_i_ == run_.size() && extra_.empty()) Advance();
    if (run_i_ < run_.size() && (extra_.empty() || Key(run_[run_i_]) < Key(extra_.Top()))) {
      return run_[run_i_++];
    }
    return extra_.Pop();
  }

 private:
  static unsigned __int128 Key(const Event& e) {
    return static_cast<unsigned __int128>(e.t) << 64 | e.seq;
  }
  // Moves to the next bucket that holds events.
  void Advance() {
    run_.clear();
    run_i_ = 0;
    uint64_t next = std::numeric_limits<uint64_t>::max();
    if (in_wheel_ > 0) next = cur_ + NextSlotDistance();
    if (!later_.empty()) next = std::min(next, later_.Top().t >> shift_);
    cur_ = next;
    const uint64_t i = cur_ & (kSlots - 1);
    const uint64_t bit = uint64_t{1} << (i % 64);
    if (used_[i / 64] & bit) {
      for (uint32_t n = head_[i]; n != kNone;) {
        run_.push_back(pool_[n].e);
        const uint32_t next = pool_[n].next;
        pool_[n].next = free_;
        free_ = n;
        n = next;
      }
      head_[i] = tail_[i] = kNone;
      used_[i / 64] &= ~bit;
      in_wheel_ -= run_.size();
      if (unsorted_[i / 64] & bit) {
        std::sort(run_.begin(), run_.end(),
                  [](const Event& a, const Event& b) { return Key(a) < Key(b); });
        unsorted_[i / 64] &= ~bit;
      }
    }
    while (!later_.empty() && (later_.Top().t >> shift_) == cur_) extra_.Push(later_.Pop());
  }
  // Buckets from cur_ to the next one with events (1..kSlots-1).
  uint64_t NextSlotDistance() const {
    constexpr uint64_t kWords = kSlots / 64;
    const uint64_t start = (cur_ + 1) & (kSlots - 1);
    uint64_t w = start / 64;
    uint64_t word = used_[w] & (~uint64_t{0} << (start % 64));
    for (uint64_t n = 0; n <= kWords; ++n) {
      if (word != 0) {
        const uint64_t slot = w * 64 + static_cast<uint64_t>(std::countr_zero(word));
        return (slot - cur_) & (kSlots - 1);
      }
      w = (w + 1) % kWords;
      word = used_[w];
    }
    return kSlots;  // unreachable while in_wheel_ > 0
  }

  int shift_;
  uint64_t cur_ = 0;  // the bucket (t >> shift_) being drained
  std::vector<Event> run_;
  size_t run_i_ = 0;
  QuadHeap extra_;
  struct Node {
    Event e;
    uint32_t next;
  };
  std::vector<Node> pool_;
  uint32_t free_ = kNone;  // free nodes, linked through next
  std::array<uint32_t, kSlots> head_;
  std::array<uint32_t, kSlots> tail_;
  std::array<uint64_t, kSlots / 64> used_{};      // bit: the slot holds events
  std::array<uint64_t, kSlots / 64> unsorted_{};  // bit: its times went back
  size_t in_wheel_ = 0;
  QuadHeap later_;
};

// std::llround for 0 <= x < 2^53 (half away from zero), without the call
// into libm: x minus its integer part is exact in double precision.
inline uint64_t RoundPs(double x) {
  const auto i = static_cast<int64_t>(x);
  return static_cast<uint64_t>(x - static_cast<double>(i) >= 0.5 ? i + 1 : i);
}

enum PacketKind : uint8_t { kData, kCnp };

struct Packet {
  uint32_t flow = 0;
  uint32_t gen = 0;
  uint32_t next = kNone;
  uint32_t payload = 0;
  uint32_t wire = 0;
  uint32_t dst = 0;
  uint32_t in_port = kNone;
  uint32_t hash = 0;
  uint8_t prio = 0;
  uint8_t kind = kData;
  uint8_t ecn = 0;
};

enum FlowKind : uint8_t { kCollFlow, kControlFlow, kBackgroundFlow, kHandshakeFlow };

struct Flow {
  uint32_t src = 0, dst = 0;
  uint32_t gen = 0;
  uint32_t hash = 0;
  uint8_t prio = 0;
  uint8_t kind = kCollFlow;
  bool active = false;
  bool limited = false;
  uint64_t total = 0, to_send = 0, recv = 0;
  uint64_t start_ps = 0;
  uint32_t owner = 0;  // collective instance, control generator or flow index
  int32_t channel = 0;
  int32_t src_rank = 0;
  // DCQCN reaction point
  double rc = 0, rt = 0, alpha = 1;
  uint64_t last_alpha_ps = 0, last_incr_ps = 0;
  int stage = 0;
  uint64_t next_send_ps = 0;
  uint64_t last_cnp_ps = 0;  // notification point
  bool cnp_sent = false;
  uint64_t qp = 0;          // messages of one queue pair leave in order
  uint64_t then_bytes = 0;  // handshake: the data message it releases
};

// One priority of a port: its egress queue (a list of packets through
// Packet::next), DWRR deficit and, on switch ports, the bytes that came in on
// it (PFC's ingress accounting). One cache line.
struct alignas(64) PrioQueue {
  uint32_t head = kNone;
  uint32_t tail = kNone;
  uint64_t qbytes = 0;
  uint64_t in_bytes = 0;
  int64_t deficit = 0;
  uint64_t max_q = 0;
  uint64_t tx_bytes = 0;
};

// What every packet on the port touches is in the first cache line, each
// priority in one of its own: a run that uses one priority reads two lines
// per port instead of most of a kilobyte of arrays.
struct alignas(64) Port {
  uint32_t busy = kNone;
  uint32_t peer = 0;
  uint32_t node = 0;
  uint8_t queued = 0;        // bit p: q[p].head != kNone
  uint8_t paused_bits = 0;   // bit p: priority p is paused by the peer
  uint8_t xoff_bits = 0;     // bit p: this (ingress) port has sent XOFF for p
  uint8_t deficit_bits = 0;  // bit p: q[p].deficit != 0
  uint8_t rr = 0;
  bool wake_pending = false;
  uint64_t wake_at = 0;
  double ps_per_byte = 0;
  double gbps = 0;
  uint64_t delay_ps = 0;
  PrioQueue q[kPriorities];
  bool paused(int p) const { return (paused_bits >> p & 1) != 0; }
  void SetDeficit(int p, int64_t d) {
    q[p].deficit = d;
    if (d != 0) {
      deficit_bits |= static_cast<uint8_t>(1u << p);
    } else {
      deficit_bits &= static_cast<uint8_t>(~(1u << p));
    }
  }
};

// Pause bookkeeping, read at the end of a run.
struct PortPauses {
  uint64_t since[kPriorities] = {};
  uint64_t total[kPriorities] = {};
  uint64_t longest[kPriorities] = {};
};

struct HostNic {
  std::array<std::vector<uint32_t>, kPriorities> active;
  uint8_t active_bits = 0;  // bit p: active[p] is not empty
  std::array<size_t, kPriorities> rr{};
};

struct CollInstance {
  size_t spec_index = 0;
  int iteration = 0;
  int ranks = 0;
  int channels = 0;
  std::unique_ptr<Plan> plan;
  std::vector<int> next_step;  // [rank * channels + channel]
  std::vector<uint8_t> rank_done;
  int ranks_done = 0;
  uint64_t outstanding = 0;
  uint64_t flows = 0;
  std::unordered_map<uint64_t, uint32_t> received;  // (rank, channel, peer) -> messages
  uint64_t start_ps = 0;
  bool finished = false;
};

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The timing wheel's bucket: its horizon (kSlots buckets) spans about four
// times the longest hop of one packet train (serialization on the slowest
// link plus the longest delay), so most events land in the wheel.
int WheelShift(const Scenario& s) {
  const TopologySpec& t = s.topology;
  const double slowest = t.uplink_gbps > 0 ? std::min(t.link_gbps, t.uplink_gbps) : t.link_gbps;
  const double unit = static_cast<double>(uint64_t{s.mtu} + s.header_bytes) * s.train_packets;
  const double hop_ps = unit * 8000.0 / slowest + static_cast<double>(t.delay_ps);
  const double bucket = 4 * hop_ps / static_cast<double>(EventQueue::kSlots);
  int shift = 8;
  while (shift < 40 && std::ldexp(1.0, shift) < bucket) ++shift;
  return shift;
}

class Simulator {
 public:
  Simulator(const Scenario& s, Fabric f) : s_(s), f_(std::move(f)), rng_(Mix(s.seed)) {}

  Result<SimResult> Run();

 private:
  // Events
  void Schedule(uint64_t t, uint32_t kind, uint32_t id, uint64_t aux = 0) {
    events_q_.Push(Event{t, seq_++, kind | uint64_t{id} << 3 | aux << 35});
  }
  uint64_t Random() { return rng_ = Mix(rng_); }
  double Uniform() { return static_cast<double>(Random() >> 11) * 0x1.0p-53; }

  uint32_t NewPacket() {
    uint32_t id;
    if (!free_packets_.empty()) {
      id = free_packets_.back();
      free_packets_.pop_back();
      packets_[id] = Packet{};
    } else {
      id = static_cast<uint32_t>(packets_.size());
      packets_.emplace_back();
    }
    ++live_packets_;
    result_.peak_packets = std::max<uint64_t>(result_.peak_packets, live_packets_);
    return id;
  }
  void FreePacket(uint32_t id) {
    free_packets_.push_back(id);
    --live_packets_;
  }
  // qp: the queue pair; its messages are sent one after another (RDMA
  // ordering), while different queue pairs share the NIC round-robin.
  uint32_t NewFlow(uint32_t src, uint32_t dst, int prio, uint64_t bytes, uint8_t kind,
                   uint64_t qp) {
    uint32_t id;
    if (!free_flows_.empty()) {
      id = free_flows_.back();
      free_flows_.pop_back();
      const uint32_t gen = flows_[id].gen + 1;
      flows_[id] = Flow{};
      flows_[id].gen = gen;
    } else {
      id = static_cast<uint32_t>(flows_.size());
      flows_.emplace_back();
    }
    ++live_flows_;
    result_.peak_flows = std::max<uint64_t>(result_.peak_flows, live_flows_);
    Flow& fl = flows_[id];
    fl.src = src;
    fl.dst = dst;
    fl.prio = static_cast<uint8_t>(prio);
    fl.kind = kind;
    fl.total = fl.to_send = bytes;
    fl.start_ps = now_;
    fl.hash = static_cast<uint32_t>(
        Mix(s_.seed ^ (uint64_t{src} << 40) ^ (uint64_t{dst} << 20) ^ ++flow_serial_));
    fl.rc = fl.rt = ports_[f_.HostPort(static_cast<int>(src))].gbps;
    fl.qp = qp;
    auto [it, fresh] = qp_pending_.try_emplace(qp);
    if (fresh) {
      Activate(id);
    } else {
      it->second.push_back(id);
    }
    return id;
  }
  void Activate(uint32_t id) {
    Flow& fl = flows_[id];
    if (fl.active || fl.to_send == 0) return;
    fl.active = true;
    nics_[fl.src].active[fl.prio].push_back(id);
    nics_[fl.src].active_bits |= static_cast<uint8_t>(1u << fl.prio);
    StartTx(f_.HostPort(static_cast<int>(fl.src)));
  }

  void NextOnQp(uint64_t qp) {
    auto it = qp_pending_.find(qp);
    if (it == qp_pending_.end()) return;
    if (it->second.empty()) {
      qp_pending_.erase(it);
      return;
    }
    const uint32_t next = it->second.front();
    it->second.pop_front();
    // Activate may start the port; this runs inside StartTx's packet choice,
    // so only list the flow here.
    Flow& fl = flows_[next];
    fl.active = true;
    nics_[fl.src].active[fl.prio].push_back(next);
    nics_[fl.src].active_bits |= static_cast<uint8_t>(1u << fl.prio);
  }

  // Scheduling
  bool FlowReady(uint32_t host, int p, uint64_t* earliest) {
    bool any = false;
    for (uint32_t id : nics_[host].active[p]) {
      const Flow& fl = flows_[id];
      if (fl.next_send_ps <= now_) return true;
      *earliest = std::min(*earliest, fl.next_send_ps);
      any = true;
    }
    (void)any;
    return false;
  }
  // Strict priorities first (highest first), then DWRR from port.rr among the
  // others. A priority is eligible when it is not paused and has a packet
  // queued or (on a NIC) a flow allowed to send now; *earliest gets the next
  // time a rate-limited flow may send. The bit masks skip what is empty.
  int Pick(uint32_t port_id, bool host, uint64_t* earliest) {
    Port& port = ports_[port_id];
    const uint8_t flows = host ? nics_[port.node].active_bits : 0;
    const uint8_t candidates = static_cast<uint8_t>((port.queued | flows) & ~port.paused_bits);
    auto eligible = [&](int p) {
      const unsigned bit = 1u << p;
      if (!(candidates & bit)) return false;
      return (port.queued & bit) != 0 || FlowReady(port.node, p, earliest);
    };
    for (int p = kPriorities - 1; p >= 0; --p) {
      if ((strict_bits_ >> p & 1) && eligible(p)) return p;
    }
    // DWRR: a non-strict priority passed over has its deficit reset.
    for (int k = 0; k < kPriorities; ++k) {
      const int p = (port.rr + k) % kPriorities;
      if (strict_bits_ >> p & 1) continue;
      if (!eligible(p)) {
        if (port.deficit_bits >> p & 1) port.SetDeficit(p, 0);
        continue;
      }
      port.rr = static_cast<uint8_t>(p);
      if (port.q[p].deficit <= 0) {
        port.SetDeficit(p, port.q[p].deficit + quantum_[static_cast<size_t>(p)]);
      }
      return p;
    }
    return -1;
  }
  uint32_t PacketFromFlow(uint32_t host, int p) {
    HostNic& nic = nics_[host];
    auto& list = nic.active[p];
    const size_t n = list.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t idx = (nic.rr[p] + i) % n;
      const uint32_t fid = list[idx];
      Flow& fl = flows_[fid];
      if (fl.next_send_ps > now_) continue;
      const uint64_t unit = uint64_t{s_.mtu} * s_.train_packets;
      const uint32_t payload = static_cast<uint32_t>(std::min(fl.to_send, unit));
      const uint32_t npkts = (payload + s_.mtu - 1) / s_.mtu;
      const uint32_t pid = NewPacket();
      Packet& pk = packets_[pid];
      pk.flow = fid;
      pk.gen = fl.gen;
      pk.payload = payload;
      pk.wire = payload + npkts * s_.header_bytes;
      pk.dst = fl.dst;
      pk.hash = fl.hash;
      pk.prio = static_cast<uint8_t>(p);
      pk.kind = kData;
      fl.to_send -= payload;
      if (fl.limited) {
        CatchUp(fl);
        if (fl.limited) {
          fl.next_send_ps = now_ + RoundPs(pk.wire * 8000.0 / fl.rc);
        }
      }
      if (fl.to_send == 0) {
        fl.active = false;
        list.erase(list.begin() + static_cast<ptrdiff_t>(idx));
        if (list.empty()) nic.active_bits &= static_cast<uint8_t>(~(1u << p));
        nic.rr[p] = list.empty() ? 0 : idx % list.size();
        NextOnQp(fl.qp);
      } else {
        nic.rr[p] = (idx + 1) % n;
      }
      return pid;
    }
    return kNone;
  }
  void StartTx(uint32_t port_id) {
    Port& port = ports_[port_id];
    if (port.busy != kNone) return;
    const bool host = port.node < static_cast<uint32_t>(f_.hosts);
    uint64_t earliest = std::numeric_limits<uint64_t>::max();
    const int p = Pick(port_id, host, &earliest);
    if (p < 0) {
      if (host && earliest != std::numeric_limits<uint64_t>::max() &&
          (!port.wake_pending || earliest < port.wake_at)) {
        port.wake_pending = true;
        port.wake_at = earliest;
        Schedule(earliest, kNicWake, port_id);
      }
      return;
    }
    PrioQueue& q = port.q[p];
    uint32_t pid = q.head;
    if (pid != kNone) {
      Packet& pk = packets_[pid];
      q.head = pk.next;
      if (q.head == kNone) {
        q.tail = kNone;
        port.queued &= static_cast<uint8_t>(~(1u << p));
      }
      q.qbytes -= pk.wire;
    } else {
      pid = PacketFromFlow(port.node, p);
      if (pid == kNone) return;
    }
    Packet& pk = packets_[pid];
    if (!s_.queues[static_cast<size_t>(p)].strict) {
      port.SetDeficit(p, q.deficit - pk.wire);
      if (q.deficit <= 0) port.rr = static_cast<uint8_t>((p + 1) % kPriorities);
    }
    port.busy = pid;
    q.tx_bytes += pk.wire;
    const uint64_t ser = RoundPs(pk.wire * port.ps_per_byte);
    Schedule(now_ + ser, kTxDone, port_id);
    Schedule(now_ + ser + port.delay_ps, kArrive, pid, port.peer);
  }
  void Enqueue(uint32_t port_id, uint32_t pid) {
    Port& port = ports_[port_id];
    Packet& pk = packets_[pid];
    const int p = pk.prio;
    pk.next = kNone;
    PrioQueue& q = port.q[p];
    if (q.tail == kNone) {
      q.head = pid;
      port.queued |= static_cast<uint8_t>(1u << p);
    } else {
      packets_[q.tail].next = pid;
    }
    q.tail = pid;
    q.qbytes += pk.wire;
    if (port.node >= static_cast<uint32_t>(f_.hosts)) {
      if (q.qbytes > q.max_q) q.max_q = q.qbytes;
      TimelineQueue(p, q.qbytes);
    }
    StartTx(port_id);
  }

  // Timeline
  size_t Bin() {
    size_t b = static_cast<size_t>(now_ / bin_ps_);
    while (b >= kTimelineBins) {
      auto& q = result_.timeline.max_queue_bytes;
      auto& pz = result_.timeline.pauses;
      for (size_t i = 0; i < kTimelineBins / 2; ++i) {
        for (int p = 0; p < kPriorities; ++p) {
          q[i][p] = std::max(q[2 * i][p], q[2 * i + 1][p]);
          pz[i][p] = pz[2 * i][p] + pz[2 * i + 1][p];
        }
      }
      for (size_t i = kTimelineBins / 2; i < kTimelineBins; ++i) {
        q[i] = {};
        pz[i] = {};
      }
      bin_ps_ *= 2;
      b = static_cast<size_t>(now_ / bin_ps_);
    }
    return b;
  }
  void TimelineQueue(int p, uint64_t bytes) {
    auto& slot = result_.timeline.max_queue_bytes[Bin()][static_cast<size_t>(p)];
    slot = std::max(slot, bytes);
  }

  // PFC
  void SendPause(uint32_t ingress_port, int p, bool on) {
    const Port& in = ports_[ingress_port];
    const uint64_t ser = RoundPs(kPauseFrameBytes * in.ps_per_byte);
    Schedule(now_ + ser + in.delay_ps, kPause,
             in.peer * 16 + static_cast<uint32_t>(p) * 2 + (on ? 1 : 0));
    if (on) {
      ++result_.queues[static_cast<size_t>(p)].pauses_sent;
      ++result_.timeline.pauses[Bin()][static_cast<size_t>(p)];
    }
  }
  void OnPause(uint32_t port_id, int p, bool on) {
    Port& port = ports_[port_id];
    if (on == port.paused(p)) return;
    port.paused_bits ^= static_cast<uint8_t>(1u << p);
    PortPauses& pz = pauses_[port_id];
    if (on) {
      pz.since[p] = now_;
    } else {
      const uint64_t d = now_ - pz.since[p];
      pz.total[p] += d;
      pz.longest[p] = std::max(pz.longest[p], d);
      StartTx(port_id);
    }
  }

  // DCQCN reaction point: timers applied lazily, when the flow next sends
  // or receives a CNP.
  void CatchUp(Flow& fl) {
    const DcqcnSpec& d = s_.dcqcn;
    if (now_ > fl.last_alpha_ps + d.alpha_timer_ps) {
      const uint64_t k = (now_ - fl.last_alpha_ps) / d.alpha_timer_ps;
      fl.alpha *= std::pow(1 - d.g, static_cast<double>(k));
      fl.last_alpha_ps += k * d.alpha_timer_ps;
    }
    const double line = ports_[f_.HostPort(static_cast<int>(fl.src))].gbps;
    if (now_ >= fl.last_incr_ps + d.increase_timer_ps) {
      uint64_t k = (now_ - fl.last_incr_ps) / d.increase_timer_ps;
      fl.last_incr_ps += k * d.increase_timer_ps;
      for (; k > 0 && fl.limited; --k) {
        ++fl.stage;
        if (fl.stage > d.fast_recovery_steps) fl.rt = std::min(line, fl.rt + d.rai_gbps);
        fl.rc = (fl.rt + fl.rc) / 2;
        if (fl.rc >= line * 0.999) {
          fl.limited = false;
          fl.rc = fl.rt = line;
        }
      }
    }
  }
  void OnCnp(uint32_t fid, uint32_t gen) {
    Flow& fl = flows_[fid];
    if (fl.gen != gen || fl.total == 0) return;
    const DcqcnSpec& d = s_.dcqcn;
    if (!fl.limited) {
      fl.limited = true;
      fl.alpha = 1;
      fl.last_alpha_ps = fl.last_incr_ps = now_;
    } else {
      CatchUp(fl);
    }
    fl.rt = fl.rc;
    fl.rc = std::max(d.min_rate_gbps, fl.rc * (1 - fl.alpha / 2));
    fl.alpha = (1 - d.g) * fl.alpha + d.g;
    fl.last_alpha_ps = fl.last_incr_ps = now_;
    fl.stage = 0;
    fl.limited = true;
  }

  // Arrivals
  void OnArrive(uint32_t pid, uint32_t at) {
    Packet& pk = packets_[pid];
    const Port& in = ports_[at];
    const uint32_t node = in.node;
    if (node < static_cast<uint32_t>(f_.hosts)) {
      if (pk.kind == kCnp) {
        OnCnp(pk.flow, pk.gen);
      } else {
        ReceiveData(pk);
      }
      FreePacket(pid);
      return;
    }
    const auto hops = f_.NextHops(node, static_cast<int>(pk.dst));
    const uint32_t out = hops.size() == 1 ? hops[0] : hops[Mix(pk.hash ^ node) % hops.size()];
    const int p = pk.prio;
    const QueueSpec& q = s_.queues[static_cast<size_t>(p)];
    uint64_t& used = buffer_used_[node - static_cast<uint32_t>(f_.hosts)];
    if (used + pk.wire > s_.buffer_bytes) {
      ++result_.drops;
      ++result_.queues[static_cast<size_t>(p)].drops;
      if (q.pfc) ++result_.lossless_drops;
      if (pk.kind == kData) Schedule(now_ + s_.rto_ps, kResend, pk.flow, pk.payload);
      FreePacket(pid);
      return;
    }
    used += pk.wire;
    pk.in_port = at;
    Port& ingress = ports_[at];
    ingress.q[p].in_bytes += pk.wire;
    if (q.pfc && !(ingress.xoff_bits >> p & 1) && ingress.q[p].in_bytes > q.xoff_bytes) {
      ingress.xoff_bits |= static_cast<uint8_t>(1u << p);
      SendPause(at, p, true);
    }
    if (q.ecn && pk.kind == kData) {
      const uint64_t qlen = ports_[out].q[p].qbytes;
      if (qlen > q.kmin_bytes) {
        const double prob = qlen >= q.kmax_bytes
                                ? 1.0
                                : q.pmax * static_cast<double>(qlen - q.kmin_bytes) /
                                      static_cast<double>(q.kmax_bytes - q.kmin_bytes);
        if (!pk.ecn && Uniform() < prob) {
          pk.ecn = 1;
          ++result_.queues[static_cast<size_t>(p)].ecn_marks;
        }
      }
    }
    Enqueue(out, pid);
  }
  void OnTxDone(uint32_t port_id) {
    Port& port = ports_[port_id];
    const uint32_t pid = port.busy;
    port.busy = kNone;
    const Packet& pk = packets_[pid];
    if (port.node >= static_cast<uint32_t>(f_.hosts) && pk.in_port != kNone) {
      buffer_used_[port.node - static_cast<uint32_t>(f_.hosts)] -= pk.wire;
      Port& ingress = ports_[pk.in_port];
      const int p = pk.prio;
      ingress.q[p].in_bytes -= pk.wire;
      if ((ingress.xoff_bits >> p & 1) &&
          ingress.q[p].in_bytes <= s_.queues[static_cast<size_t>(p)].xon_bytes) {
        ingress.xoff_bits &= static_cast<uint8_t>(~(1u << p));
        SendPause(pk.in_port, p, false);
      }
    }
    StartTx(port_id);
  }
  void ReceiveData(const Packet& pk) {
    Flow& fl = flows_[pk.flow];
    if (fl.gen != pk.gen) return;
    fl.recv += pk.payload;
    if (pk.ecn && s_.dcqcn.enabled &&
        (!fl.cnp_sent || now_ >= fl.last_cnp_ps + s_.dcqcn.cnp_interval_ps)) {
      fl.cnp_sent = true;
      fl.last_cnp_ps = now_;
      ++result_.cnps;
      const uint32_t cid = NewPacket();
      Packet& c = packets_[cid];
      c.flow = pk.flow;
      c.gen = pk.gen;
      c.wire = kCnpBytes;
      c.dst = fl.src;
      c.hash = fl.hash;
      c.prio = static_cast<uint8_t>(cnp_prio_);
      c.kind = kCnp;
      Enqueue(f_.HostPort(static_cast<int>(fl.dst)), cid);
    }
    if (fl.recv >= fl.total) CompleteFlow(pk.flow);
  }
  void CompleteFlow(uint32_t fid) {
    Flow fl = flows_[fid];
    flows_[fid].total = 0;
    free_flows_.push_back(fid);
    --live_flows_;
    if (fl.kind == kControlFlow) {
      control_latency_ps_.push_back(now_ - fl.start_ps);
    } else if (fl.kind == kHandshakeFlow) {
      handshake_latency_ps_.push_back(now_ - fl.start_ps);
      StartCollFlow(fl.owner, fl.dst, fl.src, fl.channel, fl.then_bytes);
    } else if (fl.kind == kBackgroundFlow) {
      FlowResult& r = result_.flows[fl.owner];
      r.fct_us = static_cast<double>(now_ - fl.start_ps) / 1e6;
      --background_left_;
      MaybeFinish();
    } else {
      CollInstance& c = *colls_[fl.owner];
      --c.outstanding;
      const int dst_rank = static_cast<int>(fl.dst);  // ranks are the first hosts
      ++c.received[Key(c, dst_rank, fl.channel, fl.src_rank)];
      Advance(fl.owner, dst_rank);
    }
  }

  static uint64_t QpKey(uint64_t owner, uint32_t src, uint32_t dst, int channel) {
    return Mix(Mix(owner * 0x10001 + static_cast<uint64_t>(channel)) ^ (uint64_t{src} << 32 | dst));
  }

  // Collectives
  static uint64_t Key(const CollInstance& c, int rank, int channel, int peer) {
    return (static_cast<uint64_t>(rank) * static_cast<uint64_t>(c.channels) +
            static_cast<uint64_t>(channel)) *
               static_cast<uint64_t>(c.ranks) +
           static_cast<uint64_t>(peer);
  }
  void StartCollective(uint32_t index) {
    CollInstance& c = *colls_[index];
    c.start_ps = now_;
    c.next_step.assign(static_cast<size_t>(c.ranks * c.channels), 0);
    c.rank_done.assign(static_cast<size_t>(c.ranks), 0);
    for (int r = 0; r < c.ranks; ++r) Advance(index, r);
  }
  void Advance(uint32_t index, int rank) {
    CollInstance& c = *colls_[index];
    const CollectiveSpec& spec = s_.collectives[c.spec_index];
    bool all = true;
    for (int ch = 0; ch < c.channels; ++ch) {
      int& k = c.next_step[static_cast<size_t>(rank * c.channels + ch)];
      while (k < c.plan->Steps(rank, ch)) {
        c.plan->GetStep(rank, ch, k, step_);
        bool ready = true;
        for (const Wait& w : step_.waits) {
          auto it = c.received.find(Key(c, rank, w.channel, w.peer));
          if (it == c.received.end() || it->second < w.count) {
            ready = false;
            break;
          }
        }
        if (!ready) break;
        ++k;
        for (const Send& snd : step_.sends) {
          ++c.outstanding;
          ++c.flows;
          if (spec.handshake_bytes > 0 && !snd.credit) {
            // The receiver's ready notification comes first, on its own QP.
            const uint32_t hid =
                NewFlow(static_cast<uint32_t>(snd.peer), static_cast<uint32_t>(rank),
                        s_.PriorityOfDscp(spec.control_dscp), spec.handshake_bytes, kHandshakeFlow,
                        QpKey(0x10000 + index, static_cast<uint32_t>(snd.peer),
                              static_cast<uint32_t>(rank), snd.channel));
            Flow& h = flows_[hid];
            h.owner = index;
            h.channel = snd.channel;
            h.then_bytes = snd.bytes;
          } else {
            StartCollFlow(index, static_cast<uint32_t>(rank), static_cast<uint32_t>(snd.peer),
                          snd.channel, snd.bytes);
          }
        }
      }
      if (k < c.plan->Steps(rank, ch)) all = false;
    }
    if (all && !c.rank_done[static_cast<size_t>(rank)]) {
      c.rank_done[static_cast<size_t>(rank)] = 1;
      ++c.ranks_done;
    }
    if (c.ranks_done == c.ranks && c.outstanding == 0 && !c.finished) FinishCollective(index);
  }
  void StartCollFlow(uint32_t index, uint32_t src, uint32_t dst, int channel, uint64_t bytes) {
    const CollectiveSpec& spec = s_.collectives[colls_[index]->spec_index];
    const uint32_t fid = NewFlow(src, dst, s_.PriorityOfDscp(spec.dscp), bytes, kCollFlow,
                                 QpKey(1 + index, src, dst, channel));
    Flow& fl = flows_[fid];
    fl.owner = index;
    fl.channel = channel;
    fl.src_rank = static_cast<int32_t>(src);
  }
  void FinishCollective(uint32_t index) {
    CollInstance& c = *colls_[index];
    c.finished = true;
    const CollectiveSpec& spec = s_.collectives[c.spec_index];
    CollectiveResult r;
    r.name = spec.name;
    r.op = spec.op;
    r.algo = spec.algo;
    r.ranks = c.ranks;
    r.bytes = spec.bytes;
    r.iteration = c.iteration;
    r.start_us = static_cast<double>(c.start_ps) / 1e6;
    r.time_us = static_cast<double>(now_ - c.start_ps) / 1e6;
    r.algbw = comm::AlgBandwidth(spec.bytes, r.time_us);
    r.busbw = r.algbw * comm::BusBandwidthFactor(ToCommOp(spec.op), c.ranks);
    r.model_us = model_us_[c.spec_index];
    r.flows = c.flows;
    result_.collectives.push_back(r);
    c.received.clear();
    c.next_step.clear();
    if (c.iteration + 1 < spec.repeat) {
      c.iteration++;
      c.finished = false;
      c.ranks_done = 0;
      c.flows = 0;
      StartCollective(index);
    } else {
      --collectives_left_;
      if (s_.serial && index + 1 < colls_.size()) {
        Schedule(now_, kCollStart, index + 1);
      }
      MaybeFinish();
    }
  }
  void MaybeFinish() {
    if (collectives_left_ == 0 && background_left_ == 0) traffic_done_ = true;
  }
  void OnControl(uint32_t g) {
    const ControlSpec& spec = s_.control[g];
    if (traffic_done_ && spec.count == 0) return;
    if (spec.count > 0 && control_sent_[g] >= static_cast<uint64_t>(spec.count)) return;
    ++control_sent_[g];
    const uint32_t hosts = static_cast<uint32_t>(f_.hosts);
    const uint32_t src = static_cast<uint32_t>(Random() % hosts);
    const uint32_t dst = (src + 1 + static_cast<uint32_t>(Random() % (hosts - 1))) % hosts;
    // Each control message on a queue pair of its own (no head-of-line
    // blocking inside the NIC: what is measured is the fabric).
    const uint32_t fid = NewFlow(src, dst, s_.PriorityOfDscp(spec.dscp), spec.bytes, kControlFlow,
                                 QpKey(0xFFFF00 + g, src, dst, static_cast<int>(control_sent_[g])));
    flows_[fid].owner = g;
    Schedule(now_ + spec.interval_ps, kControl, g);
  }

  Status CheckLimits() {
    const uint64_t memory =
        f_.MemoryBytes() + packets_.capacity() * sizeof(Packet) + flows_.capacity() * sizeof(Flow) +
        events_q_.capacity() * sizeof(Event) + ports_.size() * (sizeof(Port) + sizeof(PortPauses)) +
        control_latency_ps_.capacity() * 8 + received_entries() * 32;
    result_.peak_memory_bytes = std::max(result_.peak_memory_bytes, memory);
    if (memory > s_.limits.max_memory) {
      return ResourceExhausted(
          "the simulation needs more than limits.max_memory (" +
          std::to_string(s_.limits.max_memory >> 20) + " MiB) at " +
          std::to_string(now_ / 1'000'000) + " us simulated (" + std::to_string(live_flows_) +
          " flows, " + std::to_string(live_packets_) +
          " packets in flight): raise limits.max_memory, or run fewer ranks or bytes");
    }
    if (events_ > s_.limits.max_events) {
      return ResourceExhausted("stopped after " + std::to_string(events_) +
                               " events (limits.max_events) at " +
                               std::to_string(now_ / 1'000'000) +
                               " us simulated: raise limits.max_events, or set nic.train_packets "
                               "above 1 to simulate packets in trains");
    }
    if (now_ > s_.limits.max_sim_ps) {
      return ResourceExhausted("the simulated time passed limits.max_sim_time (" +
                               std::to_string(s_.limits.max_sim_ps / 1'000'000) +
                               " us) with traffic left: raise it, or look for a PFC storm");
    }
    return Ok();
  }
  uint64_t received_entries() const {
    uint64_t n = 0;
    for (const auto& c : colls_) n += c->received.size();
    return n;
  }

  const Scenario& s_;
  Fabric f_;
  uint64_t rng_;
  EventQueue events_q_{WheelShift(s_)};
  uint64_t seq_ = 0;
  uint64_t now_ = 0;
  uint64_t events_ = 0;
  std::vector<Packet> packets_;
  std::vector<uint32_t> free_packets_;
  uint64_t live_packets_ = 0;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_flows_;
  uint64_t live_flows_ = 0;
  uint64_t flow_serial_ = 0;
  std::vector<Port> ports_;
  std::vector<PortPauses> pauses_;
  std::vector<HostNic> nics_;
  std::vector<uint64_t> buffer_used_;
  std::array<int64_t, kPriorities> quantum_{};
  uint8_t strict_bits_ = 0;  // bit p: queue p is strict
  int cnp_prio_ = 0;
  std::unordered_map<uint64_t, std::deque<uint32_t>> qp_pending_;
  std::vector<std::unique_ptr<CollInstance>> colls_;
  std::vector<double> model_us_;
  int collectives_left_ = 0;
  int background_left_ = 0;
  bool traffic_done_ = false;
  std::vector<uint64_t> control_sent_;
  std::vector<uint64_t> control_latency_ps_;
  std::vector<uint64_t> handshake_latency_ps_;
  uint64_t bin_ps_ = 1'000'000;
  Step step_;
  SimResult result_;
};

LatencySummary Summarize(std::vector<uint64_t>& ps) {
  LatencySummary out;
  std::sort(ps.begin(), ps.end());
  out.count = ps.size();
  if (out.count == 0) return out;
  auto at = [&](double q) {
    const size_t i =
        std::min(ps.size() - 1, static_cast<size_t>(q * static_cast<double>(ps.size())));
    return static_cast<double>(ps[i]) / 1e6;
  };
  out.p50_us = at(0.5);
  out.p99_us = at(0.99);
  out.max_us = static_cast<double>(ps.back()) / 1e6;
  double sum = 0;
  for (uint64_t v : ps) sum += static_cast<double>(v);
  out.mean_us = sum / static_cast<double>(out.count) / 1e6;
  return out;
}

Result<SimResult> Simulator::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  result_.scenario = s_.source;
  result_.qos_from = s_.qos_from;
  result_.hosts = f_.hosts;
  result_.switches = f_.switches;
  result_.timeline.max_queue_bytes.assign(kTimelineBins, {});
  result_.timeline.pauses.assign(kTimelineBins, {});
  ports_.resize(f_.ports.size());
  pauses_.resize(f_.ports.size());
  for (size_t i = 0; i < f_.ports.size(); ++i) {
    Port& p = ports_[i];
    p.gbps = f_.ports[i].gbps;
    p.ps_per_byte = 8000.0 / p.gbps;
    p.delay_ps = f_.ports[i].delay_ps;
    p.peer = f_.ports[i].peer;
    p.node = f_.ports[i].node;
  }
  nics_.resize(static_cast<size_t>(f_.hosts));
  buffer_used_.assign(static_cast<size_t>(f_.switches), 0);
  for (int p = 0; p < kPriorities; ++p) {
    const int w = s_.queues[static_cast<size_t>(p)].ets_weight;
    quantum_[static_cast<size_t>(p)] =
        static_cast<int64_t>(w > 0 ? w : 1) * (s_.mtu + s_.header_bytes);
    if (s_.queues[static_cast<size_t>(p)].strict) strict_bits_ |= static_cast<uint8_t>(1u << p);
  }
  cnp_prio_ = s_.PriorityOfDscp(s_.dcqcn.cnp_dscp);
  for (size_t i = 0; i < s_.collectives.size(); ++i) {
    const CollectiveSpec& spec = s_.collectives[i];
    auto c = std::make_unique<CollInstance>();
    c->spec_index = i;
    c->ranks = spec.ranks > 0 ? spec.ranks : f_.hosts;
    ANXIN_ASSIGN_OR_RETURN(c->plan, MakePlan(spec, c->ranks));
    c->channels = c->plan->Channels();
    LinkModel m;
    m.gbps = s_.topology.link_gbps;
    m.delay_ps = s_.topology.delay_ps;
    m.mtu = s_.mtu;
    m.header_bytes = s_.header_bytes;
    m.hops = [this](int a, int b) { return f_.Hops(a, b); };
    model_us_.push_back(AlphaBetaSeconds(spec, c->ranks, m) * 1e6);
    colls_.push_back(std::move(c));
    if (!s_.serial || i == 0) Schedule(spec.start_ps, kCollStart, static_cast<uint32_t>(i));
  }
  collectives_left_ = static_cast<int>(colls_.size());
  for (size_t i = 0; i < s_.flows.size(); ++i) {
    const FlowSpec& fs = s_.flows[i];
    result_.flows.push_back(
        FlowResult{fs.src, fs.dst, fs.bytes, static_cast<double>(fs.start_ps) / 1e6, 0});
    Schedule(fs.start_ps, kFlowStart, static_cast<uint32_t>(i));
  }
  background_left_ = static_cast<int>(s_.flows.size());
  control_sent_.assign(s_.control.size(), 0);
  for (size_t g = 0; g < s_.control.size(); ++g) Schedule(0, kControl, static_cast<uint32_t>(g));

  if (ports_.size() > kMaxAux || s_.mtu * uint64_t{s_.train_packets} > kMaxAux) {
    return ResourceExhausted("the fabric has more ports than the engine can address (" +
                             std::to_string(kMaxAux) + ")");
  }
  while (!events_q_.empty()) {
    const Event e = events_q_.Pop();
    now_ = e.t;
    ++events_;
    if ((events_ & 0xFFFF) == 0 || events_ > s_.limits.max_events) ANXIN_TRY(CheckLimits());
    switch (e.kind()) {
      case kArrive:
        OnArrive(e.id(), e.aux());
        break;
      case kTxDone:
        OnTxDone(e.id());
        break;
      case kPause:
        OnPause(e.id() / 16, static_cast<int>((e.id() / 2) % 8), (e.id() & 1) != 0);
        break;
      case kResend: {
        Flow& fl = flows_[e.id()];
        fl.to_send += e.aux();
        Activate(e.id());
        break;
      }
      case kNicWake:
        ports_[e.id()].wake_pending = false;
        StartTx(e.id());
        break;
      case kControl:
        OnControl(e.id());
        break;
      case kCollStart:
        StartCollective(e.id());
        break;
      case kFlowStart: {
        const FlowSpec& fs = s_.flows[e.id()];
        const uint32_t fid =
            NewFlow(static_cast<uint32_t>(fs.src), static_cast<uint32_t>(fs.dst),
                    s_.PriorityOfDscp(fs.dscp), fs.bytes, kBackgroundFlow,
                    QpKey(0xFFFFFF, static_cast<uint32_t>(fs.src), static_cast<uint32_t>(fs.dst),
                          static_cast<int>(e.id())));
        flows_[fid].owner = e.id();
        break;
      }
    }
  }
  ANXIN_TRY(CheckLimits());
  result_.events = events_;
  result_.sim_us = static_cast<double>(now_) / 1e6;
  result_.unfinished_flows = live_flows_;
  // Pauses still on at the end count until the end.
  for (size_t i = 0; i < ports_.size(); ++i) {
    const Port& port = ports_[i];
    PortPauses& pz = pauses_[i];
    for (int p = 0; p < kPriorities; ++p) {
      if (port.paused(p)) {
        const uint64_t d = now_ - pz.since[p];
        pz.total[p] += d;
        pz.longest[p] = std::max(pz.longest[p], d);
      }
    }
  }
  auto port_name = [&](size_t i) {
    auto node_name = [&](uint32_t n) {
      return n < static_cast<uint32_t>(f_.hosts)
                 ? "host" + std::to_string(n)
                 : f_.switch_names[n - static_cast<uint32_t>(f_.hosts)];
    };
    return node_name(ports_[i].node) + "->" + node_name(ports_[ports_[i].peer].node);
  };
  for (int p = 0; p < kPriorities; ++p) {
    QueueSummary& q = result_.queues[static_cast<size_t>(p)];
    q.priority = p;
    for (size_t i = 0; i < ports_.size(); ++i) {
      const Port& port = ports_[i];
      const PortPauses& pz = pauses_[i];
      if (port.q[p].max_q > q.max_bytes) {
        q.max_bytes = port.q[p].max_q;
        q.max_port = port_name(i);
      }
      q.paused_us += static_cast<double>(pz.total[p]) / 1e6;
      q.longest_pause_us = std::max(q.longest_pause_us, static_cast<double>(pz.longest[p]) / 1e6);
      if (port.node >= static_cast<uint32_t>(f_.hosts)) q.bytes += port.q[p].tx_bytes;
      if (pz.longest[p] > s_.storm_ps) {
        result_.storms.push_back(
            StormPort{port_name(i), p, static_cast<double>(pz.longest[p]) / 1e6});
      }
    }
  }
  result_.control = Summarize(control_latency_ps_);
  result_.handshake = Summarize(handshake_latency_ps_);
  result_.timeline.bin_us = static_cast<double>(bin_ps_) / 1e6;
  result_.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result_.cpu_s = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double busy = result_.cpu_s > 0 ? result_.cpu_s : result_.wall_s;
  result_.events_per_s = busy > 0 ? static_cast<double>(events_) / busy : 0;
  return std::move(result_);
}

}  // namespace

Result<SimResult> Simulate(const Scenario& scenario) {
  ANXIN_TRY(ValidateScenario(scenario));
  ANXIN_ASSIGN_OR_RETURN(Fabric fabric, BuildFabric(scenario.topology));
  const uint64_t tables = fabric.MemoryBytes();
  if (tables > scenario.limits.max_memory) {
    return ResourceExhausted("the routing tables of " + std::to_string(fabric.hosts) +
                             " hosts need " + std::to_string(tables >> 20) +
                             " MiB, more than limits.max_memory: raise it or use fewer hosts");
  }
  Simulator sim(scenario, std::move(fabric));
  return sim.Run();
}

}  // namespace anxin::netsim
