// cpu.governor: the CPU frequency governor of every core.
#include <map>
#include <string>
#include <vector>

#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"
#include "anxin/host/cpu_list.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

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

Status RegisterCpuChecks(CheckRegistry& r) {
  ANXIN_TRY(
      r.Add({"cpu.governor", "CPU governor performance",
             "powersave/ondemand governors clock cores down between steps; kernel launches and "
             "collective progress threads then add jitter that shows up as kernel-time spikes.",
             "cpupower frequency-set -g performance (or echo performance > "
             "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)",
             Governor}));
  return Ok();
}

}  // namespace anxin::doctor
