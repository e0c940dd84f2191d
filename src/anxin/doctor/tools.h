// Where doctor gets the output of vendor tools (mlnx_qos, hccn_tool, npu-smi):
// the live tools through an argv + timeout runner, or files captured in a
// host tree under ROOT/anxin-captures/ so that fixtures replay real outputs.
//
//   auto tools = MakeToolSource(host::HostRoot("/"), /*timeout_s=*/5);
//   ANXIN_ASSIGN_OR_RETURN(std::string out, tools->Run({"mlnx_qos", "-i", "eth2"}));
//
// Captured layout (tests/fixtures/doctor/host_a/anxin-captures):
//   mlnx_qos/IF.txt            mlnx_qos -i IF
//   hccn_tool/N.pfc.txt        hccn_tool -i N -pfc -g
//   hccn_tool/N.dscp_to_tc.txt hccn_tool -i N -dscp_to_tc -g
//   npu-smi/info.txt           npu-smi info
// A tool that is not installed (or not captured) is kNotFound.
#ifndef ANXIN_DOCTOR_TOOLS_H_
#define ANXIN_DOCTOR_TOOLS_H_

#include <memory>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::doctor {

class ToolSource {
 public:
  virtual ~ToolSource() = default;
  // argv[0] is the tool's name; returns its standard output.
  virtual Result<std::string> Run(const std::vector<std::string>& argv) = 0;
};

// Live tools for the "/" root, captured files for any other root.
std::unique_ptr<ToolSource> MakeToolSource(const host::HostRoot& root, double timeout_s);

// Where a captured tool output lives for argv (host path), or "" if argv is
// not one of the commands doctor runs.
std::string CapturePath(const std::vector<std::string>& argv);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_TOOLS_H_
