// /etc/ascend_numa.conf: the NPU -> NUMA node (and optionally CPU) bindings a
// training container applies at start. The file has no published schema, so
// the reader accepts the forms seen in practice, one NPU per line:
//
//   [text]
//   # comments and blank lines are ignored
//   npu0 node=0 cpus=0-23
//   npu1: 0
//   2 = 1
//   davinci3 numa 1 cpus 24-47
//
// i.e. a device token (optionally prefixed npu/davinci/device), then a node
// given as node=N, numa=N, numa_node=N or a bare number, then optional cpus=LIST.
//
//   #include "anxin/host/root_fs.h"
//
//   HostRoot root;                                   // live host
//   ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadFile("/etc/ascend_numa.conf"));
//   ANXIN_ASSIGN_OR_RETURN(auto bindings, ParseAscendNumaConf(text));
#ifndef ANXIN_HOST_ASCEND_NUMA_CONF_H_
#define ANXIN_HOST_ASCEND_NUMA_CONF_H_

#include <optional>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::host {

inline constexpr std::string_view kAscendNumaConfPath = "/etc/ascend_numa.conf";

struct NpuNumaBinding {
  int npu = 0;
  std::optional<int> node;
  std::vector<int> cpus;
  int line = 0;  // 1-based, for messages
};

// A line that names no NPU or has a malformed value is kInvalidArgument naming
// "ascend_numa.conf:LINE".
Result<std::vector<NpuNumaBinding>> ParseAscendNumaConf(std::string_view text);

}  // namespace anxin::host

#endif  // ANXIN_HOST_ASCEND_NUMA_CONF_H_
