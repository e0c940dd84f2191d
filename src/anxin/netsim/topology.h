// The fabric of a scenario as a graph: hosts (one NIC port each), switches,
// full-duplex links as pairs of ports, and ECMP next-hop tables (every
// shortest path to each host, chosen per flow by a hash).
//
//   TopologySpec spec;                            // 8 hosts on a leaf-spine
//   ANXIN_ASSIGN_OR_RETURN(Fabric f, BuildFabric(spec));
//   uint32_t nic = f.HostPort(5);                 // host 5's only port
//   auto next = f.NextHops(f.hosts + 0, 7);       // ports of switch 0 towards host 7
//   int hops = f.Hops(0, 7);                      // links on a shortest path
//   (void)nic;
//   (void)next;
//   (void)hops;
//
// Node ids: hosts 0..hosts-1, then switches. Thread safety: immutable after
// BuildFabric.
#ifndef ANXIN_NETSIM_TOPOLOGY_H_
#define ANXIN_NETSIM_TOPOLOGY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/netsim/scenario.h"

namespace anxin::netsim {

struct PortDesc {
  uint32_t node = 0;
  uint32_t peer = 0;  // the port at the other end of the link
  double gbps = 0;
  uint64_t delay_ps = 0;
};

struct Fabric {
  int hosts = 0;
  int switches = 0;
  std::vector<PortDesc> ports;
  std::vector<uint32_t> node_first_port;  // ports of node n: [first[n], first[n+1])
  std::vector<std::string> switch_names;  // "leaf3", "spine1", "core0"
  // Next-hop candidates: for switch s (0-based) and host d, entries
  // [route_index[s*hosts+d], route_index[s*hosts+d+1]) of route_ports.
  std::vector<uint32_t> route_index;
  std::vector<uint32_t> route_ports;
  std::vector<uint16_t> host_dist;  // [node * hosts + d]: links from node to host d

  int nodes() const { return hosts + switches; }
  uint32_t HostPort(int host) const { return node_first_port[static_cast<size_t>(host)]; }
  // Inline: the simulator asks for every packet at every switch.
  std::span<const uint32_t> NextHops(uint32_t switch_node, int dst_host) const {
    const size_t row = static_cast<size_t>(switch_node - static_cast<uint32_t>(hosts)) *
                           static_cast<size_t>(hosts) +
                       static_cast<size_t>(dst_host);
    return std::span<const uint32_t>(route_ports.data() + route_index[row],
                                     route_index[row + 1] - route_index[row]);
  }
  int Hops(int src_host, int dst_host) const;
  // Bytes of memory the tables hold (for the memory budget).
  uint64_t MemoryBytes() const;
};

// REQUIRES a TopologySpec that passed the scenario checks.
[[nodiscard]] Result<Fabric> BuildFabric(const TopologySpec& spec);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_TOPOLOGY_H_
