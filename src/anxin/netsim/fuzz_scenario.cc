// libFuzzer target: the scenario reader must turn any bytes into a scenario
// or an error, never a crash, and an accepted scenario must build its fabric.
// A file that switch.qos_from names reads as the input's "#qos: " comment line
// (a doctor report's JSON on one line), so the host-report reader is fuzzed
// too; without that line, as a small report with one NPU port.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "anxin/netsim/collective.h"
#include "anxin/netsim/scenario.h"
#include "anxin/netsim/topology.h"

namespace {

constexpr std::string_view kReport =
    R"({"host":"h","qos":{"version":1,"traffic":[{"library":"hccl","in_use":true,)"
    R"("variable":"HCCL_RDMA_TC","source":"HCCL_RDMA_TC default 132","dscp":33,"error":""}],)"
    R"("ports":[{"kind":"npu","name":"npu0","pci":null,"trust":null,"pfc":[4],)"
    R"("dscp_to_priority":{"33":4,"48":6},"unlisted_dscp":"unknown","cnp_dscp":null,"error":""}]}})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string report(kReport);
  if (size_t at = text.find("#qos: "); at != std::string_view::npos) {
    std::string_view rest = text.substr(at + 6);
    report = std::string(rest.substr(0, rest.find('\n')));
  }
  auto read = [&](const std::string&) -> anxin::Result<std::string> { return report; };
  auto s = anxin::netsim::ParseScenario(text, "fuzz.yaml", read);
  if (!s || s->topology.hosts > 64) return 0;
  auto f = anxin::netsim::BuildFabric(s->topology);
  for (const auto& c : s->collectives) {
    auto plan = anxin::netsim::MakePlan(c, c.ranks > 0 ? c.ranks : s->topology.hosts);
    (void)plan;
  }
  (void)f;
  return 0;
}
