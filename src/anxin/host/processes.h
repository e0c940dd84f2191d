// Processes seen through /proc: which ones drive accelerators, where they may
// run (Cpus_allowed_list, Mems_allowed_list), where their memory actually is
// (numa_maps) and their environment (environ).
//
//   HostRoot root;                                   // live host
//   ANXIN_ASSIGN_OR_RETURN(auto ranks, ReadAcceleratorProcesses(root));
//   for (const ProcessInfo& p : ranks) {
//     for (const AcceleratorRef& a : p.accelerators) {
//       std::printf("%d %s: %s, %zu CPUs allowed\n", p.pid, p.name.c_str(), a.path.c_str(),
//                   p.cpus_allowed.size());
//     }
//   }
//   std::vector<int> pids = FindProcessesByName(root, "irqbalance");
#ifndef ANXIN_HOST_PROCESSES_H_
#define ANXIN_HOST_PROCESSES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::host {

using Environment = std::map<std::string, std::string>;

struct AcceleratorRef {
  std::string path;  // "/dev/davinci3", "/dev/nvidia2"
  bool is_npu = false;
  int index = -1;
};

struct ProcessInfo {
  int pid = 0;
  std::string name;  // /proc/PID/comm
  std::vector<int> cpus_allowed;
  std::vector<int> mems_allowed;
  std::map<int, int64_t> pages_per_node;  // summed N<k>=pages from numa_maps
  Environment env;
  std::vector<AcceleratorRef> accelerators;
  std::vector<std::string> unreadable;  // files we could not read, with the reason
};

// Numeric entries of /proc, sorted.
Result<std::vector<int>> ListPids(const HostRoot& root);
// PIDs whose comm equals name.
std::vector<int> FindProcessesByName(const HostRoot& root, std::string_view name);
// "/dev/davinci3" -> {npu, 3}; "/dev/nvidia2" -> {gpu, 2}; control nodes
// (davinci_manager, nvidiactl, nvidia-uvm) -> nullopt.
std::optional<AcceleratorRef> ParseAcceleratorPath(std::string_view link_target);
// Processes holding an accelerator device open (their fd links), with status,
// numa_maps and environ read. Other users' processes whose fd directory we
// may not read are skipped silently: that is normal without root.
Result<std::vector<ProcessInfo>> ReadAcceleratorProcesses(const HostRoot& root);

std::map<int, int64_t> ParseNumaMaps(std::string_view text);
Environment ParseEnviron(std::string_view nul_separated);
// KEY=VALUE lines, '#' comments, optional "export " prefix and quotes.
Result<Environment> ParseEnvFile(std::string_view text);

}  // namespace anxin::host

#endif  // ANXIN_HOST_PROCESSES_H_
