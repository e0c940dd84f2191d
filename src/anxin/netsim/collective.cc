#include "anxin/netsim/collective.h"

#include <algorithm>
#include <bit>
#include <cmath>

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
    // Pipeline fill: the first chunk climbs the deeper tree and comes down
    // again; then one stage per further chunk, set by the rank that sends
    // the most bytes per chunk (interior in one tree, leaf in the other:
    // up + up + two children = four chunks).
    const uint64_t half = CeilDiv(spec.bytes, 2);
    const uint64_t chunk =
        std::min(spec.chunk_bytes > 0 ? spec.chunk_bytes : NcclTreeChunk(spec.bytes, n), half);
    const uint64_t chunks = CeilDiv(half, chunk);
    int depth = 0;
    int max_hops = 0;
    int max_sends = 0;
    for (int t = 0; t < 2; ++t) {
      for (int r = 0; r < n; ++r) {
        int d = 0;
        for (int x = r; DoubleBinaryTree(n, x, t).parent >= 0;
             x = DoubleBinaryTree(n, x, t).parent) {
          max_hops = std::max(max_hops, hops(x, DoubleBinaryTree(n, x, t).parent));
          ++d;
        }
        depth = std::max(depth, d);
      }
    }
    for (int r = 0; r < n; ++r) {
      int sends = 0;
      for (int t = 0; t < 2; ++t) {
        TreeLinks l = DoubleBinaryTree(n, r, t);
        sends += (l.parent >= 0) + (l.child[0] >= 0) + (l.child[1] >= 0);
      }
      max_sends = std::max(max_sends, sends);
    }
    const double fill = 2.0 * depth * cost.Seconds(chunk, max_hops);
    const double stage = max_sends * cost.Ser(cost.Wire(chunk));
    return fill + static_cast<double>(chunks - 1) * stage;
  }
  // Pairwise AlltoAll: every rank sends (n-1) messages at once.
  const uint64_t each = CeilDiv(spec.bytes, static_cast<uint64_t>(n));
  return cost.Seconds(each, 2) + static_cast<double>(n - 2) * cost.Ser(cost.Wire(each));
}

}  // namespace anxin::netsim
