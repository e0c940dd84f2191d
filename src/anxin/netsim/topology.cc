#include "anxin/netsim/topology.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

namespace anxin::netsim {
namespace {

struct Builder {
  int hosts = 0;
  std::vector<std::string> switch_names;
  std::vector<std::pair<uint32_t, uint32_t>> links;  // node pairs
  std::vector<double> gbps;
  uint64_t delay_ps = 0;

  uint32_t AddSwitch(std::string name) {
    switch_names.push_back(std::move(name));
    return static_cast<uint32_t>(hosts + static_cast<int>(switch_names.size()) - 1);
  }
  void Link(uint32_t a, uint32_t b, double rate) {
    links.emplace_back(a, b);
    gbps.push_back(rate);
  }
};

void LeafSpine(const TopologySpec& t, Builder& b, int planes) {
  const int per_plane = t.hosts / planes;
  const int hpl = t.hosts_per_leaf;
  const double up = t.uplink_gbps > 0 ? t.uplink_gbps : t.link_gbps;
  int spines = t.spines;
  if (spines == 0) {
    spines = std::max(
        1, static_cast<int>(std::ceil(hpl * t.link_gbps / (t.oversubscription * up) - 1e-9)));
  }
  const int leaves_per_plane = (per_plane + hpl - 1) / hpl;
  std::vector<uint32_t> leaves;
  for (int p = 0; p < planes; ++p) {
    for (int l = 0; l < leaves_per_plane; ++l) {
      leaves.push_back(b.AddSwitch(planes > 1
                                       ? "rail" + std::to_string(p) + ".leaf" + std::to_string(l)
                                       : "leaf" + std::to_string(l)));
    }
  }
  // Host h is rank h; on a rail fabric server h / rails, NIC h % rails.
  for (int h = 0; h < t.hosts; ++h) {
    const int plane = h % planes;
    const int index = h / planes;
    b.Link(static_cast<uint32_t>(h),
           leaves[static_cast<size_t>(plane * leaves_per_plane + index / hpl)], t.link_gbps);
  }
  if (leaves.size() > 1) {
    for (int s = 0; s < spines; ++s) {
      const uint32_t spine = b.AddSwitch("spine" + std::to_string(s));
      for (uint32_t leaf : leaves) b.Link(leaf, spine, up);
    }
  }
}

void FatTree(const TopologySpec& t, Builder& b) {
  const int k = t.k, half = k / 2;
  const int pods = std::min(k, (t.hosts + half * half - 1) / (half * half));
  std::vector<uint32_t> edges, aggs, cores;
  for (int p = 0; p < pods; ++p) {
    for (int i = 0; i < half; ++i) {
      edges.push_back(b.AddSwitch("pod" + std::to_string(p) + ".edge" + std::to_string(i)));
    }
    for (int i = 0; i < half; ++i) {
      aggs.push_back(b.AddSwitch("pod" + std::to_string(p) + ".agg" + std::to_string(i)));
    }
  }
  const double up = t.uplink_gbps > 0 ? t.uplink_gbps : t.link_gbps;
  if (pods > 1) {
    for (int c = 0; c < half * half; ++c) cores.push_back(b.AddSwitch("core" + std::to_string(c)));
  }
  for (int h = 0; h < t.hosts; ++h)
    b.Link(static_cast<uint32_t>(h), edges[static_cast<size_t>(h / half)], t.link_gbps);
  for (int p = 0; p < pods; ++p) {
    for (int e = 0; e < half; ++e) {
      for (int a = 0; a < half; ++a) {
        b.Link(edges[static_cast<size_t>(p * half + e)], aggs[static_cast<size_t>(p * half + a)],
               up);
      }
    }
    if (pods > 1) {
      for (int a = 0; a < half; ++a) {
        for (int c = 0; c < half; ++c) {
          b.Link(aggs[static_cast<size_t>(p * half + a)], cores[static_cast<size_t>(a * half + c)],
                 up);
        }
      }
    }
  }
}

}  // namespace

int Fabric::Hops(int src_host, int dst_host) const {
  return host_dist[static_cast<size_t>(src_host) * static_cast<size_t>(hosts) +
                   static_cast<size_t>(dst_host)];
}

uint64_t Fabric::MemoryBytes() const {
  return ports.size() * sizeof(PortDesc) + route_index.size() * 4 + route_ports.size() * 4 +
         host_dist.size() * 2;
}

Result<Fabric> BuildFabric(const TopologySpec& spec) {
  Builder b;
  b.hosts = spec.hosts;
  switch (spec.kind) {
    case TopologyKind::kStar: {
      const uint32_t sw = b.AddSwitch("switch0");
      for (int h = 0; h < spec.hosts; ++h) b.Link(static_cast<uint32_t>(h), sw, spec.link_gbps);
      break;
    }
    case TopologyKind::kLeafSpine:
      LeafSpine(spec, b, 1);
      break;
    case TopologyKind::kRail:
      LeafSpine(spec, b, spec.rails);
      break;
    case TopologyKind::kFatTree:
      FatTree(spec, b);
      break;
  }
  Fabric f;
  f.hosts = spec.hosts;
  f.switches = static_cast<int>(b.switch_names.size());
  f.switch_names = std::move(b.switch_names);
  const size_t n = static_cast<size_t>(f.nodes());
  // Ports grouped by node: count, then place.
  std::vector<uint32_t> degree(n, 0);
  for (auto [a, c] : b.links) {
    ++degree[a];
    ++degree[c];
  }
  for (size_t node = static_cast<size_t>(f.hosts); node < n; ++node) {
    if (static_cast<int>(degree[node]) > spec.switch_ports) {
      return InvalidArgument("topology: switch " +
                             f.switch_names[node - static_cast<size_t>(f.hosts)] + " needs " +
                             std::to_string(degree[node]) + " ports, more than switch_ports " +
                             std::to_string(spec.switch_ports));
    }
  }
  f.node_first_port.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) f.node_first_port[i + 1] = f.node_first_port[i] + degree[i];
  f.ports.resize(f.node_first_port[n]);
  std::vector<uint32_t> fill(f.node_first_port.begin(), f.node_first_port.end() - 1);
  for (size_t i = 0; i < b.links.size(); ++i) {
    auto [a, c] = b.links[i];
    const uint32_t pa = fill[a]++, pc = fill[c]++;
    f.ports[pa] = PortDesc{a, pc, b.gbps[i], spec.delay_ps};
    f.ports[pc] = PortDesc{c, pa, b.gbps[i], spec.delay_ps};
  }
  // Distances from every node to every host (BFS from each host), then the
  // ECMP candidates: ports whose far node is one link closer.
  const size_t hosts = static_cast<size_t>(f.hosts);
  f.host_dist.assign(n * hosts, std::numeric_limits<uint16_t>::max());
  std::vector<uint32_t> queue(n);
  for (size_t d = 0; d < hosts; ++d) {
    size_t head = 0, tail = 0;
    queue[tail++] = static_cast<uint32_t>(d);
    f.host_dist[d * hosts + d] = 0;
    while (head < tail) {
      const uint32_t u = queue[head++];
      const uint16_t du = f.host_dist[u * hosts + d];
      for (uint32_t p = f.node_first_port[u]; p < f.node_first_port[u + 1]; ++p) {
        const uint32_t v = f.ports[f.ports[p].peer].node;
        // Hosts do not forward: a path never passes through one.
        if (f.host_dist[v * hosts + d] == std::numeric_limits<uint16_t>::max()) {
          f.host_dist[v * hosts + d] = static_cast<uint16_t>(du + 1);
          if (v >= hosts) queue[tail++] = v;
        }
      }
    }
  }
  for (size_t s = 0; s < hosts; ++s) {
    for (size_t d = 0; d < hosts; ++d) {
      if (f.host_dist[s * hosts + d] == std::numeric_limits<uint16_t>::max()) {
        return Internal("topology: host " + std::to_string(d) + " cannot be reached from host " +
                        std::to_string(s));
      }
    }
  }
  f.route_index.reserve(static_cast<size_t>(f.switches) * hosts + 1);
  f.route_index.push_back(0);
  for (size_t s = hosts; s < n; ++s) {
    for (size_t d = 0; d < hosts; ++d) {
      const uint16_t ds = f.host_dist[s * hosts + d];
      for (uint32_t p = f.node_first_port[s]; p < f.node_first_port[s + 1]; ++p) {
        const uint32_t v = f.ports[f.ports[p].peer].node;
        if (f.host_dist[v * hosts + d] + 1 == ds && (v >= hosts || v == d)) {
          f.route_ports.push_back(p);
        }
      }
      f.route_index.push_back(static_cast<uint32_t>(f.route_ports.size()));
    }
  }
  return f;
}

}  // namespace anxin::netsim
