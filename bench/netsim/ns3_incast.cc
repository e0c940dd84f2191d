// The peer side of bench/netsim/run: ns-3 (Debian's libns3-dev) on the scenario
// of incast.yaml: hosts 1..4 send 1 MiB each to host 0 through one switch
// (an IPv4 router with a FIFO queue deep enough to drop nothing) while host 5
// sends 1 MiB to host 6; 100 Gbps links, 1 us each; 4096-byte payloads at
// the line rate (UDP, no congestion control: what RoCE does without CNPs).
// Prints one line per flow: "flow SRC DST fct_us", then "wall_s W".
#include <chrono>
#include <cstdio>
#include <map>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

using namespace ns3;

namespace {
constexpr uint32_t kPayload = 4096;
constexpr uint32_t kPackets = 256;  // 1 MiB
std::map<uint16_t, double> g_last_us;

void OnRx(uint16_t port, Ptr<const Packet>, const Address&) {
  g_last_us[port] = Simulator::Now().GetNanoSeconds() / 1e3;
}
}  // namespace

int main() {
  const auto wall = std::chrono::steady_clock::now();
  NodeContainer hosts;
  hosts.Create(7);
  Ptr<Node> sw = CreateObject<Node>();
  InternetStackHelper stack;
  stack.Install(hosts);
  stack.Install(sw);
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue("100Gbps"));
  p2p.SetDeviceAttribute("Mtu", UintegerValue(kPayload + 28));
  p2p.SetChannelAttribute("Delay", StringValue("1us"));
  p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("100000p"));
  Ipv4AddressHelper ip;
  std::vector<Ipv4Address> addr;
  for (uint32_t h = 0; h < 7; ++h) {
    NetDeviceContainer d = p2p.Install(hosts.Get(h), sw);
    std::string base = "10.0." + std::to_string(h) + ".0";
    ip.SetBase(base.c_str(), "255.255.255.0");
    addr.push_back(ip.Assign(d).GetAddress(0));
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  // Wire bytes per packet: payload + UDP 8 + IPv4 20 + PPP 2 = 4126.
  const double ser_ns = (kPayload + 30) * 8 / 100.0;
  auto flow = [&](uint32_t src, uint32_t dst, uint16_t port) {
    PacketSinkHelper sink("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer s = sink.Install(hosts.Get(dst));
    s.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, port));
    UdpClientHelper client(addr[dst], port);
    client.SetAttribute("MaxPackets", UintegerValue(kPackets));
    client.SetAttribute("Interval", TimeValue(NanoSeconds(ser_ns)));
    client.SetAttribute("PacketSize", UintegerValue(kPayload));
    ApplicationContainer c = client.Install(hosts.Get(src));
    c.Start(Seconds(0));
  };
  // UdpClient adds a 12-byte sequence header inside the payload: PacketSize
  // is the whole UDP payload, so the wire size is as above.
  for (uint32_t s = 1; s <= 4; ++s) flow(s, 0, static_cast<uint16_t>(9000 + s));
  flow(5, 6, 9005);
  Simulator::Stop(Seconds(0.01));
  Simulator::Run();
  for (uint32_t s = 1; s <= 5; ++s) {
    const uint16_t port = static_cast<uint16_t>(9000 + s);
    std::printf("flow %u %u %.3f\n", s, s <= 4 ? 0u : 6u, g_last_us[port]);
  }
  Simulator::Destroy();
  std::printf("wall_s %.6f\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count());
  return 0;
}
