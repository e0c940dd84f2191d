// Engine speed of `anxin sim net`: a ring AllReduce on a leaf-spine fabric,
// timed in this process (bench/netsim/run). Prints one JSON line: events,
// wall time, events/s, peak flows/packets in flight, the simulator's own
// memory estimate and the process's peak RSS, and the simulated time next to
// the alpha-beta model (the check that the run computed the right thing:
// an idle ring must land within 2% of it).
//   netsim_bench HOSTS BYTES TRAIN_PACKETS
//   netsim_bench SCENARIO.yaml        (what `anxin sim net --json` prints)
//   netsim_bench text A.yaml [B.yaml]  (what `anxin sim net [--compare]` prints)
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "anxin/base/config.h"
#include "anxin/netsim/netsim.h"
#include "anxin/netsim/sim.h"

namespace {

// What `anxin sim net` prints for these options; its exit status.
int PrintSimNet(anxin::netsim::SimNetOptions o) {
  auto out = anxin::netsim::RunSimNet(o);
  if (!out) {
    std::fprintf(stderr, "error: %s\n", out.error().ToString().c_str());
    return 2;
  }
  std::fputs(out->text.c_str(), stdout);
  return out->status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "text") {
    anxin::netsim::SimNetOptions o;
    for (int i = 2; i < argc; ++i) o.scenarios.push_back(argv[i]);
    o.compare = argc == 4;
    return PrintSimNet(std::move(o));
  }
  if (argc == 2) {
    anxin::netsim::SimNetOptions o;
    o.scenarios = {argv[1]};
    o.json = true;
    return PrintSimNet(std::move(o));
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: netsim_bench HOSTS BYTES TRAIN_PACKETS\n");
    return 2;
  }
  namespace ns = anxin::netsim;
  const auto bytes = anxin::ParseBytes(argv[2]);
  if (!bytes) {
    std::fprintf(stderr, "error: %s\n", bytes.error().message().c_str());
    return 2;
  }
  ns::Scenario s = ns::DefaultScenario();
  s.source = "ring";
  s.topology.kind = ns::TopologyKind::kLeafSpine;
  s.topology.hosts = std::atoi(argv[1]);
  s.topology.hosts_per_leaf = 32;
  s.topology.spines = 32;
  s.topology.switch_ports = 64;
  s.train_packets = static_cast<uint32_t>(std::atoi(argv[3]));
  s.limits.max_events = 1ull << 40;
  ns::CollectiveSpec c;
  c.bytes = *bytes;
  s.collectives.push_back(c);
  auto r = ns::Simulate(s);
  if (!r) {
    std::fprintf(stderr, "error: %s\n", r.error().ToString().c_str());
    return 3;
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const auto& coll = r->collectives.at(0);
  const double off = coll.time_us / coll.model_us - 1;
  nlohmann::json j = {{"hosts", s.topology.hosts},
                      {"bytes", *bytes},
                      {"train_packets", s.train_packets},
                      {"events", r->events},
                      {"wall_s", r->wall_s},
                      {"cpu_s", r->cpu_s},
                      {"events_per_s", r->events_per_s},
                      {"peak_flows", r->peak_flows},
                      {"peak_packets", r->peak_packets},
                      {"sim_memory_bytes", r->peak_memory_bytes},
                      {"max_rss_bytes", static_cast<uint64_t>(ru.ru_maxrss) * 1024},
                      {"sim_time_us", coll.time_us},
                      {"model_us", coll.model_us},
                      {"busbw", coll.busbw},
                      {"vs_model", off}};
  std::printf("%s\n", j.dump().c_str());
  // An exact-packet idle ring must match the model; trains coarsen the
  // pipeline at each hop, so they get a looser bound.
  // A message of only a few trains is store-and-forwarded a train at a time,
  // which the model (per packet) does not describe: no check then.
  const uint64_t message = *bytes / static_cast<uint64_t>(s.topology.hosts);
  const bool comparable = s.train_packets == 1 || message >= 16ull * s.train_packets * s.mtu;
  const double bound = s.train_packets == 1 ? 0.02 : 0.10;
  if (comparable && std::fabs(off) > bound) {
    std::fprintf(stderr, "error: the run is %.1f%% off the alpha-beta model\n", off * 100);
    return 1;
  }
  return 0;
}
