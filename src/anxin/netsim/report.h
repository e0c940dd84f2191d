// What `anxin sim net` prints: the collectives in `anxin bench comm`'s
// columns (comm/format.h, so the two compare directly), control-message
// latency, per-priority queue depth, PFC pauses and storms, the engine's
// events/s; JSON; two runs side by side; an SVG timeline.
//
//   Scenario scenario = DefaultScenario();
//   scenario.collectives.push_back(CollectiveSpec{});
//   ANXIN_ASSIGN_OR_RETURN(SimResult r, Simulate(scenario));
//   std::printf("%s", FormatReport(r).c_str());
//   nlohmann::json j = ToJson(r);
//   std::string svg = TimelineSvg(r);
//   std::vector<comm::CommRun> runs = ToCommRuns(r);  // for `bench comm compare`
//
// Thread safety: pure functions.
#ifndef ANXIN_NETSIM_REPORT_H_
#define ANXIN_NETSIM_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/comm/model.h"
#include "anxin/netsim/sim.h"

namespace anxin::netsim {

// One CommRun per (collective, algorithm, ranks); a row per size, the mean
// over repeats as the time and p50/p99 when repeated.
// The comm operation a simulated collective is, for comm's busbw factors and tables.
comm::CollOp ToCommOp(CollKind k);

std::vector<comm::CommRun> ToCommRuns(const SimResult& r);
std::string FormatReport(const SimResult& r);
std::string FormatCompare(const SimResult& a, const SimResult& b);
nlohmann::json ToJson(const SimResult& r);
std::string TimelineSvg(const SimResult& r);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_REPORT_H_
