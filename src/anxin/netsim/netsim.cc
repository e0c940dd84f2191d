#include "anxin/netsim/netsim.h"

#include "anxin/base/file.h"
#include "anxin/netsim/report.h"
#include "anxin/netsim/scenario.h"
#include "anxin/netsim/sim.h"

namespace anxin::netsim {

Result<SimNetOutput> RunSimNet(const SimNetOptions& o) {
  if (o.scenarios.empty()) return InvalidArgument("give a scenario file (docs/netsim.md)");
  if (o.compare && o.scenarios.size() != 2) {
    return InvalidArgument("--compare takes exactly two scenario files, A and B");
  }
  if (!o.compare && o.scenarios.size() != 1) {
    return InvalidArgument("one scenario file at a time; use --compare A.yaml B.yaml for two");
  }
  std::vector<SimResult> results;
  for (const std::string& path : o.scenarios) {
    ANXIN_ASSIGN_OR_RETURN(Scenario s, LoadScenario(path));
    if (o.seed) s.seed = *o.seed;
    if (o.hosts) {
      if (*o.hosts < 2) return InvalidArgument("--hosts: at least 2");
      s.topology.hosts = *o.hosts;
      for (auto& c : s.collectives) c.ranks = 0;
    }
    auto r = Simulate(s);
    if (!r) return std::unexpected(r.error().With(path));
    results.push_back(*std::move(r));
  }
  SimNetOutput out;
  for (const auto& r : results) {
    if (r.unfinished_flows > 0 || !r.storms.empty()) out.status = 1;
  }
  if (!o.svg_file.empty()) ANXIN_TRY(WriteFileAtomic(o.svg_file, TimelineSvg(results[0])));
  if (!o.save_file.empty()) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& run : ToCommRuns(results[0])) runs.push_back(comm::ToJson(run));
    const nlohmann::json j = runs.size() == 1 ? runs[0] : runs;
    ANXIN_TRY(WriteFileAtomic(o.save_file, j.dump(2) + "\n"));
  }
  if (o.json) {
    nlohmann::json j = o.compare
                           ? nlohmann::json{{"a", ToJson(results[0])}, {"b", ToJson(results[1])}}
                           : ToJson(results[0]);
    out.text = j.dump(2) + "\n";
  } else if (o.compare) {
    out.text = FormatReport(results[0]) + "#\n" + FormatReport(results[1]) + "#\n# Side by side\n" +
               FormatCompare(results[0], results[1]);
  } else {
    out.text = FormatReport(results[0]);
  }
  return out;
}

}  // namespace anxin::netsim
