// libFuzzer target: the scenario reader must turn any bytes into a scenario
// or an error, never a crash, and an accepted scenario must build its fabric.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/netsim/collective.h"
#include "anxin/netsim/scenario.h"
#include "anxin/netsim/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto s = anxin::netsim::ParseScenario(text, "fuzz.yaml");
  if (!s || s->topology.hosts > 64) return 0;
  auto f = anxin::netsim::BuildFabric(s->topology);
  for (const auto& c : s->collectives) {
    auto plan = anxin::netsim::MakePlan(c, c.ranks > 0 ? c.ranks : s->topology.hosts);
    (void)plan;
  }
  (void)f;
  return 0;
}
