// The kernel's CPU / node list format ("0-3,8,10-11"), as used by
// /sys/devices/system/node/nodeN/cpulist, /proc/irq/N/smp_affinity_list and
// the Cpus_allowed_list line of /proc/PID/status.
//
//   ANXIN_ASSIGN_OR_RETURN(std::vector<int> cpus, ParseCpuList("0-3,8"));  // 0 1 2 3 8
//   FormatCpuList({0, 1, 2, 3, 8});                                          // "0-3,8"
#ifndef ANXIN_HOST_CPU_LIST_H_
#define ANXIN_HOST_CPU_LIST_H_

#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::host {

// Sorted, without duplicates. An empty string is an empty list.
Result<std::vector<int>> ParseCpuList(std::string_view text);
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace anxin::host

#endif  // ANXIN_HOST_CPU_LIST_H_
