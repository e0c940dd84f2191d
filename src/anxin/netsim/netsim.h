// `anxin sim net` as one call: load one scenario (or two with --compare),
// apply the flags, simulate, and render text, JSON, SVG and the comm JSON.
//
//   SimNetOptions o;
//   o.scenarios = {"dscp48.yaml", "dscp56.yaml"};
//   o.compare = true;
//   ANXIN_ASSIGN_OR_RETURN(SimNetOutput out, RunSimNet(o));
//   std::fputs(out.text.c_str(), stdout);   // exit status: out.status
//
// Thread safety: reentrant.
#ifndef ANXIN_NETSIM_NETSIM_H_
#define ANXIN_NETSIM_NETSIM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::netsim {

struct SimNetOptions {
  std::vector<std::string> scenarios;
  bool compare = false;  // two scenarios side by side
  bool json = false;
  std::string svg_file;   // SVG timeline of the (first) run
  std::string save_file;  // the collectives as `anxin bench comm` JSON
  std::optional<uint64_t> seed;
  std::optional<int> hosts;  // override topology.hosts (and every collective's ranks)
};

struct SimNetOutput {
  std::string text;  // what goes to stdout
  // 0: ran; 1: the fabric stalled (flows never finished) or a PFC storm.
  int status = 0;
};

[[nodiscard]] Result<SimNetOutput> RunSimNet(const SimNetOptions& options);

}  // namespace anxin::netsim

#endif  // ANXIN_NETSIM_NETSIM_H_
