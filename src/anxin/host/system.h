// Host-wide settings that matter for accelerator hosts: hugepages (static
// pool and transparent hugepages) and the CPU frequency governor.
//
//   HostRoot root;                                   // live host
//   ANXIN_ASSIGN_OR_RETURN(HugePages h, ReadHugePages(root));
//   ANXIN_ASSIGN_OR_RETURN(auto governors, ReadGovernors(root));  // cpu -> "performance"
#ifndef ANXIN_HOST_SYSTEM_H_
#define ANXIN_HOST_SYSTEM_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::host {

// /proc/meminfo values in kB (or pages for the HugePages_* counters).
Result<std::map<std::string, int64_t>> ParseMeminfo(std::string_view text);

struct HugePages {
  int64_t mem_total_kb = 0;
  int64_t total = 0;  // static pool, pages
  int64_t free = 0;
  int64_t reserved = 0;
  int64_t page_size_kb = 0;
  std::string thp_enabled;  // the bracketed choice of transparent_hugepage/enabled, "" if absent
};

Result<HugePages> ReadHugePages(const HostRoot& root);
// "always [madvise] never" -> "madvise".
std::string SelectedChoice(std::string_view sysfs_choices);

// scaling_governor of every CPU that has cpufreq; empty map when the kernel
// exposes no cpufreq (virtual machines, some containers).
Result<std::map<int, std::string>> ReadGovernors(const HostRoot& root);

}  // namespace anxin::host

#endif  // ANXIN_HOST_SYSTEM_H_
