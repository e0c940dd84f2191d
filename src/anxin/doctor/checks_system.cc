// mem.hugepages and cpu.governor: host-wide settings.
#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"
#include "anxin/host/cpu_list.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

Finding HugePagesCheck(const HostFacts& f) {
  if (!f.hugepages) return Skip("could not read /proc/meminfo: " + f.hugepages.error().Describe());
  const host::HugePages& h = *f.hugepages;
  Finding r;
  int64_t pool_kb = h.total * h.page_size_kb;
  r.evidence.push_back("static pool " + std::to_string(h.total) + " x " +
                       std::to_string(h.page_size_kb) + " kB, " + std::to_string(h.free) +
                       " free; MemTotal " + std::to_string(h.mem_total_kb) + " kB; THP " +
                       (h.thp_enabled.empty() ? "n/a" : h.thp_enabled));
  if (h.mem_total_kb > 0 && pool_kb * 10 > h.mem_total_kb * 9) {
    Note(r, Severity::kFail,
         "static hugepages reserve " + std::to_string(pool_kb * 100 / h.mem_total_kb) +
             "% of memory: data loaders and the host side of the job starve");
  }
  if (h.total > 0 && h.free == 0) {
    Note(r, Severity::kWarn, "the static hugepage pool is exhausted (HugePages_Free 0)");
  }
  if (h.thp_enabled == "always") {
    Note(r, Severity::kWarn,
         "transparent hugepages 'always': khugepaged compaction stalls the "
         "host threads that feed the devices; use madvise");
  }
  r.summary =
      r.severity == Severity::kOk ? "hugepage settings sane" : "hugepage settings hurt the job";
  return r;
}

Finding Governor(const HostFacts& f) {
  if (!f.governors)
    return Skip("could not read /sys/devices/system/cpu: " + f.governors.error().Describe());
  if (f.governors->empty()) return Skip("no cpufreq on this host (virtual machine or container)");
  std::map<std::string, std::vector<int>> by;
  for (const auto& [cpu, g] : *f.governors) by[g].push_back(cpu);
  Finding r;
  for (const auto& [g, cpus] : by) {
    Note(r, g == "performance" ? Severity::kOk : Severity::kWarn,
         std::to_string(cpus.size()) + " CPUs " + g + " (" + host::FormatCpuList(cpus) + ")");
  }
  r.summary = r.severity == Severity::kOk ? "all CPUs in performance"
                                          : "CPUs not in performance: host-side launch and "
                                            "data-loading latency varies with load";
  return r;
}

}  // namespace

void RegisterSystemChecks(CheckRegistry& r) {
  r.Add({"cpu.governor", "CPU governor performance",
         "powersave/ondemand governors clock cores down between steps; kernel launches and "
         "collective progress threads then add jitter that shows up as kernel-time spikes.",
         "cpupower frequency-set -g performance (or echo performance > "
         "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)",
         Governor});
  r.Add({"mem.hugepages", "hugepages sane",
         "A static hugepage pool sized for another workload takes host memory from the data "
         "loaders; THP 'always' adds compaction stalls on the threads that feed the devices.",
         "size vm.nr_hugepages for what the job maps (sysctl -w vm.nr_hugepages=N); echo madvise > "
         "/sys/kernel/mm/transparent_hugepage/enabled",
         HugePagesCheck});
}

}  // namespace anxin::doctor
