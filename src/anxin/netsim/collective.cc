#include "anxin/netsim/collective.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

namespace anxin::netsim {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

class RingPlan : public Plan {
 public:
  RingPlan(int ranks, uint64_t chunk, bool all_reduce)
      : n_(ranks), chunk_(chunk), sends_(all_reduce ? 2 * (ranks - 1) : ranks - 1) {}
  int Channels() const override { return 1; }
  int Steps(int, int) const override { return sends_ + 1; }
  void GetStep(int rank, int, int k, Step& out) const override {
    out.Clear();
    if (k > 0) out.waits.push_back({0, (rank + n_ - 1) % n_, static_cast<uint32_t>(k)});
    if (k < sends_) out.sends.push_back({(rank + 1) % n_, 0, chunk_});
  }

 private:
  int n_;
  uint64_t chunk_;
  int sends_;
};

// NCCL's double binary tree with its flow control. Channels 0-3 are the data
// (tree 0 up, tree 0 down, tree 1 up, tree 1 down); channel 4 + ch counts the
// credits a sender on channel ch got back from its receiver. A step that
// sends chunk c to a peer first waits for the credit of chunk c - kNcclSteps
// (the receiver has consumed it); a step that consumed chunks from peers
// returns a credit to each, unless no later chunk needs it.
class TreePlan : public Plan {
 public:
  TreePlan(int ranks, uint64_t bytes, uint64_t chunk) : n_(ranks) {
    half_ = CeilDiv(bytes, 2);
    chunk_ = std::min(chunk, half_);
    chunks_ = static_cast<int>(CeilDiv(half_, chunk_));
    links_.resize(static_cast<size_t>(2 * ranks));
    for (int t = 0; t < 2; ++t) {
      for (int r = 0; r < ranks; ++r)
        links_[static_cast<size_t>(t * ranks + r)] = DoubleBinaryTree(ranks, r, t);
    }
  }
  int Channels() const override { return 8; }
  int Steps(int, int channel) const override { return channel < 4 ? chunks_ : 0; }
  void GetStep(int rank, int channel, int c, Step& out) const override {
    out.Clear();
    const int tree = channel / 2;
    const int up = 2 * tree;
    const TreeLinks& l = links_[static_cast<size_t>(tree * n_ + rank)];
    const uint64_t bytes = std::min(chunk_, half_ - static_cast<uint64_t>(c) * chunk_);
    const uint32_t need = static_cast<uint32_t>(c + 1);
    const bool wait_credit = c >= kNcclSteps;
    const uint32_t credits = static_cast<uint32_t>(c + 1 - kNcclSteps);
    const bool give_credit = c + kNcclSteps < chunks_;
    auto send = [&](int peer) {
      if (wait_credit) out.waits.push_back({4 + channel, peer, credits});
      out.sends.push_back({peer, channel, bytes});
    };
    auto credit = [&](int peer, int data_channel) {
      if (give_credit) out.sends.push_back({peer, 4 + data_channel, kCreditBytes, true});
    };
    if (channel == up) {
      for (int child : l.child) {
        if (child >= 0) out.waits.push_back({up, child, need});
      }
      if (l.parent >= 0) send(l.parent);
      for (int child : l.child) {
        if (child >= 0) credit(child, up);
      }
    } else {
      if (l.parent < 0) {
        // The root's down step starts from the chunks its up step reduced
        // (and gave credits for).
        for (int child : l.child) {
          if (child >= 0) out.waits.push_back({up, child, need});
        }
      } else {
        out.waits.push_back({channel, l.parent, need});
        credit(l.parent, channel);
      }
      for (int child : l.child) {
        if (child >= 0) send(child);
      }
    }
  }

 private:
  int n_;
  uint64_t half_ = 0, chunk_ = 0;
  int chunks_ = 0;
  std::vector<TreeLinks> links_;
};

int TreeDepth(int ranks) {
  int depth = 0;
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < ranks; ++r) {
      int d = 0;
      for (int x = r; DoubleBinaryTree(ranks, x, t).parent >= 0;
           x = DoubleBinaryTree(ranks, x, t).parent) {
        ++d;
      }
      depth = std::max(depth, d);
    }
  }
  return depth;
}

// Rabenseifner: recursive halving (reduce-scatter) then recursive doubling
// (all-gather); either half alone for those collectives.
class HalvingDoublingPlan : public Plan {
 public:
  HalvingDoublingPlan(int ranks, uint64_t bytes, bool halving, bool doubling) : n_(ranks) {
    const int levels = std::countr_zero(static_cast<unsigned>(ranks));
    if (halving) {
      for (int j = 0; j < levels; ++j) {
        distance_.push_back(ranks >> (j + 1));
        bytes_.push_back(CeilDiv(bytes, uint64_t{2} << j));
        count_.push_back(1);
      }
    }
    if (doubling) {
      for (int j = 0; j < levels; ++j) {
        distance_.push_back(1 << j);
        bytes_.push_back(CeilDiv(bytes, static_cast<uint64_t>(ranks)) << j);
        count_.push_back(halving ? 2 : 1);
      }
    }
  }
  int Channels() const override { return 1; }
  int Steps(int, int) const override { return static_cast<int>(distance_.size()) + 1; }
  void GetStep(int rank, int, int k, Step& out) const override {
    out.Clear();
    const size_t i = static_cast<size_t>(k);
    if (k > 0) out.waits.push_back({0, rank ^ distance_[i - 1], count_[i - 1]});
    if (i < distance_.size()) out.sends.push_back({rank ^ distance_[i], 0, bytes_[i]});
  }

 private:
  int n_;
  std::vector<int> distance_;
  std::vector<uint64_t> bytes_;
  std::vector<uint32_t> count_;
};

class PairwisePlan : public Plan {
 public:
  PairwisePlan(int ranks, uint64_t bytes)
      : n_(ranks), each_(CeilDiv(bytes, static_cast<uint64_t>(ranks))) {}
  int Channels() const override { return 1; }
  int Steps(int, int) const override { return 2; }
  void GetStep(int rank, int, int k, Step& out) const override {
    out.Clear();
    for (int i = 1; i < n_; ++i) {
      const int peer = (rank + i) % n_;  // staggered, as NCCL's p2p schedule
      if (k == 0) {
        out.sends.push_back({peer, 0, each_});
      } else {
        out.waits.push_back({0, (rank + n_ - i) % n_, 1});
      }
    }
  }

 private:
  int n_;
  uint64_t each_;
};

}  // namespace

uint64_t NcclTreeChunk(uint64_t bytes, int ranks) {
  const uint64_t depth = static_cast<uint64_t>(std::max(1, TreeDepth(ranks)));
  constexpr uint64_t kTrees = 2;  // NCCL's nChannels: one per tree here
  uint64_t chunk = (uint64_t{4} << 20) / kNcclSteps;
  auto chunks = [&] { return bytes / (kTrees * chunk); };
  while (chunks() < depth * 8 && chunk > 131072) chunk /= 2;
  while (chunks() < depth * 4 && chunk > 65536) chunk /= 2;
  while (chunks() < depth && chunk > 32768) chunk /= 2;
  return chunk;
}

TreeLinks DoubleBinaryTree(int ranks, int rank, int tree) {
  // NCCL's ncclGetBtree / ncclGetDtree: tree 1 is tree 0 shifted by one
  // (odd rank counts) or mirrored (even), so that every rank is a leaf in
  // one tree and interior in the other.
  auto btree = [ranks](int r) {
    TreeLinks l;
    int bit = 1;
    while (bit < ranks && (bit & r) == 0) bit <<= 1;
    if (r == 0) {
      l.child[1] = ranks > 1 ? bit >> 1 : -1;
      if (l.child[1] == 0) l.child[1] = -1;
      return l;
    }
    int up = (r ^ bit) | (bit << 1);
    if (up >= ranks) up = r ^ bit;
    l.parent = up;
    int lowbit = bit >> 1;
    l.child[0] = lowbit == 0 ? -1 : r - lowbit;
    int down1 = lowbit == 0 ? -1 : r + lowbit;
    while (down1 >= ranks) {
      lowbit >>= 1;
      down1 = lowbit == 0 ? -1 : r + lowbit;
    }
    l.child[1] = down1;
    return l;
  };
  if (tree == 0) return btree(rank);
  const bool odd = ranks % 2 == 1;
  auto to = [&](int r) { return odd ? (r - 1 + ranks) % ranks : ranks - 1 - r; };
  auto from = [&](int r) { return r < 0 ? -1 : (odd ? (r + 1) % ranks : ranks - 1 - r); };
  TreeLinks l = btree(to(rank));
  TreeLinks out;
  out.parent = from(l.parent);
  out.child[0] = from(l.child[0]);
  out.child[1] = from(l.child[1]);
  return out;
}

Result<std::unique_ptr<Plan>> MakePlan(const CollectiveSpec& spec, int ranks) {
  if (ranks < 2) return InvalidArgument("a collective needs at least 2 ranks");
  const uint64_t chunk = CeilDiv(spec.bytes, static_cast<uint64_t>(ranks));
  const std::string what =
      std::string(CollName(spec.op)) + " with algo " + std::string(AlgoName(spec.algo));
  if (spec.op == CollKind::kAlltoAll) {
    if (spec.algo != CollAlgo::kPairwise) {
      return InvalidArgument(what + ": alltoall runs pairwise (algo: pairwise)");
    }
    return std::unique_ptr<Plan>(new PairwisePlan(ranks, spec.bytes));
  }
  switch (spec.algo) {
    case CollAlgo::kRing:
      return std::unique_ptr<Plan>(new RingPlan(ranks, chunk, spec.op == CollKind::kAllReduce));
    case CollAlgo::kTree:
      if (spec.op != CollKind::kAllReduce) {
        return InvalidArgument(what + ": the tree runs only all_reduce (use ring or hd)");
      }
      return std::unique_ptr<Plan>(
          new TreePlan(ranks, spec.bytes,
                       spec.chunk_bytes > 0 ? spec.chunk_bytes : NcclTreeChunk(spec.bytes, ranks)));
    case CollAlgo::kHalvingDoubling:
      if (!std::has_single_bit(static_cast<unsigned>(ranks))) {
        return InvalidArgument(what +
                               ": recursive halving-doubling needs a power-of-two rank "
                               "count, not " +
                               std::to_string(ranks) + " (use ring or tree)");
      }
      return std::unique_ptr<Plan>(new HalvingDoublingPlan(
          ranks, spec.bytes, spec.op != CollKind::kAllGather, spec.op != CollKind::kReduceScatter));
    case CollAlgo::kPairwise:
      return InvalidArgument(what + ": pairwise is for alltoall (use ring, tree or hd)");
  }
  return Internal("unknown algorithm");
}

namespace {

struct MessageCost {
  const LinkModel& m;
  double Ser(uint64_t wire) const { return static_cast<double>(wire) * 8 / (m.gbps * 1e9); }
  uint64_t Wire(uint64_t bytes) const { return bytes + CeilDiv(bytes, m.mtu) * m.header_bytes; }
  uint64_t LastPacket(uint64_t bytes) const {
    const uint64_t rest = bytes % m.mtu;
    return (rest == 0 ? m.mtu : rest) + m.header_bytes;
  }
  double Seconds(uint64_t bytes, int hops) const {
    return Ser(Wire(bytes)) + hops * static_cast<double>(m.delay_ps) / 1e12 +
           (hops - 1) * Ser(LastPacket(bytes));
  }
};

// A schedule (a Plan) evaluated message by message on an idle, non-blocking
// fabric: the alpha-beta terms of MessageCost, with the two links a message
// shares with others. A step starts when its waits are met, as in a run. A
// message leaves its sender's NIC behind the earlier messages of its queue
// pair, sharing the line rate equally with the NIC's other messages (the NIC
// sends one packet per message in turn); h - 1 links (delay and the
// store-and-forward of one packet each) later its bytes reach the receiver's
// link, which forwards the bytes of all senders first come, first served at
// the line rate (a switch port's FIFO queue); one delay later the message
// has arrived. Alone, a message costs exactly MessageCost::Seconds.
class MessageSchedule {
 public:
  MessageSchedule(const Plan& plan, int ranks, const LinkModel& m,
                  const std::function<int(int, int)>& hops)
      : plan_(plan),
        n_(ranks),
        channels_(plan.Channels()),
        cost_{m},
        rate_(m.gbps * 1e9 / 8),
        delay_(static_cast<double>(m.delay_ps) / 1e12),
        hops_(hops),
        nics_(static_cast<size_t>(ranks)),
        links_(static_cast<size_t>(ranks)),
        next_step_(static_cast<size_t>(ranks * channels_), 0) {}

  double Seconds() {
    for (int r = 0; r < n_; ++r) Advance(r, 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      switch (e.kind) {
        case kNicDone:
          if (e.version == nics_[e.id].version) NicDone(e.id, e.t);
          break;
        case kRate:
          LinkAt(e.id, e.t);
          links_[e.id].in_rate += e.value;
          break;
        case kLastByte: {
          const Msg& msg = msgs_[e.id];
          Link& link = LinkAt(static_cast<size_t>(msg.dst), e.t);
          Push(e.t + link.queue / rate_ + delay_, kArrived, e.id);
          break;
        }
        case kArrived: {
          const Msg& msg = msgs_[e.id];
          end_ = std::max(end_, e.t);
          ++received_[Key(msg.dst, msg.channel, msg.src)];
          Advance(msg.dst, e.t);
          break;
        }
      }
    }
    return end_;
  }

 private:
  enum Kind : uint8_t { kNicDone, kRate, kLastByte, kArrived };
  struct Event {
    double t;
    uint64_t seq;
    Kind kind;
    size_t id;
    uint64_t version = 0;
    double value = 0;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Msg {
    int src, dst, channel;
    double wire;   // bytes on the wire, headers included
    double shift;  // from the sender's NIC to the receiver's link
    double rate = 0;
    double finish = 0;  // the NIC's virtual time at which it has been sent
    uint64_t qp;
    size_t next_in_qp = kNoMsg;
  };
  static constexpr size_t kNoMsg = std::numeric_limits<size_t>::max();
  // A queue pair: its message on the NIC, and those waiting behind it.
  struct Qp {
    bool busy = false;
    size_t head = kNoMsg, tail = kNoMsg;
  };
  // Processor sharing: every active message has received `served` bytes
  // since it started less its own start value.
  struct Nic {
    double t = 0, served = 0;
    std::vector<size_t> active;
    uint64_t version = 0;
  };
  // The receiver's link: bytes waiting (fluid), and the rate they come in.
  struct Link {
    double t = 0, queue = 0, in_rate = 0;
  };

  void Push(double t, Kind kind, size_t id, uint64_t version = 0, double value = 0) {
    events_.push(Event{t, seq_++, kind, id, version, value});
  }
  uint64_t Key(int rank, int channel, int peer) const {
    return (static_cast<uint64_t>(rank) * static_cast<uint64_t>(channels_) +
            static_cast<uint64_t>(channel)) *
               static_cast<uint64_t>(n_) +
           static_cast<uint64_t>(peer);
  }
  Link& LinkAt(size_t rank, double t) {
    Link& l = links_[rank];
    l.queue = std::max(0.0, l.queue + (l.in_rate - rate_) * (t - l.t));
    if (l.in_rate < rate_ * 1e-9) l.in_rate = 0;  // rounding of the sums
    l.t = t;
    return l;
  }
  void NicAt(Nic& nic, double t) {
    if (!nic.active.empty())
      nic.served += (t - nic.t) * rate_ / static_cast<double>(nic.active.size());
    nic.t = t;
  }
  // After the NIC's set of messages changed at t: new shares (each reaches
  // its receiver's link `shift` later) and the next message to be sent.
  void Reshare(size_t rank, double t) {
    Nic& nic = nics_[rank];
    NicAt(nic, t);
    const double share = nic.active.empty() ? 0 : rate_ / static_cast<double>(nic.active.size());
    double first = std::numeric_limits<double>::infinity();
    for (size_t id : nic.active) {
      Msg& msg = msgs_[id];
      if (msg.rate != share) {
        Push(t + msg.shift, kRate, static_cast<size_t>(msg.dst), 0, share - msg.rate);
        msg.rate = share;
      }
      first = std::min(first, msg.finish);
    }
    ++nic.version;
    if (!nic.active.empty()) {
      Push(t + (first - nic.served) / share, kNicDone, rank, nic.version);
    }
  }
  void Start(size_t id, double t) {
    Msg& msg = msgs_[id];
    Nic& nic = nics_[static_cast<size_t>(msg.src)];
    NicAt(nic, t);
    msg.finish = nic.served + msg.wire;
    nic.active.push_back(id);
  }
  void NicDone(size_t rank, double t) {
    Nic& nic = nics_[rank];
    NicAt(nic, t);
    // Those sent by now (within rounding), in the order they started.
    done_.clear();
    const double eps = 1e-6;  // bytes
    std::erase_if(nic.active, [&](size_t id) {
      if (msgs_[id].finish > nic.served + eps) return false;
      done_.push_back(id);
      return true;
    });
    for (size_t id : done_) {
      Msg& msg = msgs_[id];
      Push(t + msg.shift, kRate, static_cast<size_t>(msg.dst), 0, -msg.rate);
      msg.rate = 0;
      Push(t + msg.shift, kLastByte, id);
      Qp& qp = qp_[msg.qp];
      if (qp.head == kNoMsg) {
        qp.busy = false;
      } else {
        const size_t next = qp.head;
        qp.head = msgs_[next].next_in_qp;
        Start(next, t);
      }
    }
    Reshare(rank, t);
  }
  void SendMessage(int rank, const Send& s, double t) {
    const int h = hops_(rank, s.peer);
    Msg msg{
        rank,
        s.peer,
        s.channel,
        static_cast<double>(cost_.Wire(s.bytes)),
        (h - 1) * (delay_ + cost_.Ser(cost_.LastPacket(s.bytes))),
        0,
        0,
        (static_cast<uint64_t>(rank) * static_cast<uint64_t>(n_) + static_cast<uint64_t>(s.peer)) *
                static_cast<uint64_t>(channels_) +
            static_cast<uint64_t>(s.channel)};
    const size_t id = msgs_.size();
    msgs_.push_back(msg);
    Qp& qp = qp_[msg.qp];
    if (!qp.busy) {
      qp.busy = true;
      Start(id, t);
    } else {
      if (qp.head == kNoMsg) {
        qp.head = id;
      } else {
        msgs_[qp.tail].next_in_qp = id;
      }
      qp.tail = id;
    }
  }
  // Runs every step of rank whose waits are met, channel by channel.
  void Advance(int rank, double t) {
    bool sent = false;
    for (int ch = 0; ch < channels_; ++ch) {
      int& k = next_step_[static_cast<size_t>(rank * channels_ + ch)];
      for (; k < plan_.Steps(rank, ch); ++k) {
        plan_.GetStep(rank, ch, k, step_);
        const bool ready = std::all_of(step_.waits.begin(), step_.waits.end(), [&](const Wait& w) {
          auto it = received_.find(Key(rank, w.channel, w.peer));
          return it != received_.end() && it->second >= w.count;
        });
        if (!ready) break;
        for (const auto& s : step_.sends) SendMessage(rank, s, t);
        sent = sent || !step_.sends.empty();
      }
    }
    if (sent) Reshare(static_cast<size_t>(rank), t);
  }

  const Plan& plan_;
  int n_, channels_;
  MessageCost cost_;
  double rate_, delay_;  // bytes per second, seconds
  std::function<int(int, int)> hops_;
  std::vector<Nic> nics_;
  std::vector<Link> links_;
  std::vector<int> next_step_;
  std::vector<Msg> msgs_;
  std::unordered_map<uint64_t, Qp> qp_;
  std::vector<size_t> done_;
  std::unordered_map<uint64_t, uint32_t> received_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  double end_ = 0;
  Step step_;
};

}  // namespace

double AlphaBetaSeconds(const CollectiveSpec& spec, int n, const LinkModel& m) {
  MessageCost cost{m};
  auto hops = [&](int a, int b) { return m.hops ? m.hops(a, b) : 2; };
  if (spec.algo == CollAlgo::kRing) {
    const uint64_t chunk = CeilDiv(spec.bytes, static_cast<uint64_t>(n));
    const int sends = spec.op == CollKind::kAllReduce ? 2 * (n - 1) : n - 1;
    std::vector<double> link(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      link[static_cast<size_t>(r)] = cost.Seconds(chunk, hops(r, (r + 1) % n));
    double worst = 0;
    for (int start = 0; start < n; ++start) {
      double t = 0;
      for (int k = 0; k < sends; ++k) t += link[static_cast<size_t>((start + k) % n)];
      worst = std::max(worst, t);
    }
    return worst;
  }
  if (spec.algo == CollAlgo::kHalvingDoubling) {
    HalvingDoublingPlan plan(n, spec.bytes, spec.op != CollKind::kAllGather,
                             spec.op != CollKind::kReduceScatter);
    double t = 0;
    Step step;
    for (int k = 0; k + 1 < plan.Steps(0, 0); ++k) {
      double worst = 0;
      for (int r = 0; r < n; ++r) {
        plan.GetStep(r, 0, k, step);
        worst = std::max(worst, cost.Seconds(step.sends[0].bytes, hops(r, step.sends[0].peer)));
      }
      t += worst;
    }
    return t;
  }
  if (spec.algo == CollAlgo::kTree) {
    const uint64_t chunk = spec.chunk_bytes > 0 ? spec.chunk_bytes : NcclTreeChunk(spec.bytes, n);
    TreePlan plan(n, spec.bytes, chunk);
    return MessageSchedule(plan, n, m, hops).Seconds();
  }
  // Pairwise AlltoAll: every rank sends (n-1) messages at once.
  const uint64_t each = CeilDiv(spec.bytes, static_cast<uint64_t>(n));
  return cost.Seconds(each, 2) + static_cast<double>(n - 2) * cost.Ser(cost.Wire(each));
}

}  // namespace anxin::netsim
