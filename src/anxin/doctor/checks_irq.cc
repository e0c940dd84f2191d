// irq.irqbalance and irq.nic_affinity: NIC interrupts must stay on cores of
// the NIC's own NUMA node, spread over several cores, and irqbalance must not
// move them back.
#include <algorithm>
#include <map>
#include <set>

#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"
#include "anxin/host/cpu_list.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

Finding IrqBalance(const HostFacts& f) {
  Finding r;
  if (f.irqbalance_pids.empty()) {
    r.summary = "irqbalance is not running";
    return r;
  }
  std::string pids;
  for (int p : f.irqbalance_pids) pids += (pids.empty() ? "" : ",") + std::to_string(p);
  Note(r, Severity::kFail, "irqbalance running as pid " + pids);
  r.summary = "irqbalance is running and will undo NIC interrupt pinning";
  r.actions.push_back(FixAction::Command({"systemctl", "stop", "irqbalance"}, "stop irqbalance"));
  r.actions.push_back(
      FixAction::Command({"systemctl", "disable", "irqbalance"}, "keep it off after a reboot"));
  return r;
}

// The fix spreads a NIC's IRQs round-robin over its local node's CPUs,
// starting at an offset per NIC so that two NICs on one node do not share cores.
std::vector<FixAction> SpreadFix(const std::vector<int>& irqs, const std::vector<int>& local,
                                 size_t offset) {
  std::vector<FixAction> out;
  if (local.empty()) return out;
  for (size_t i = 0; i < irqs.size(); ++i) {
    int cpu = local[(offset + i) % local.size()];
    out.push_back(
        FixAction::Write(host::IrqAffinityPath(irqs[i]), std::to_string(cpu),
                         "IRQ " + std::to_string(irqs[i]) + " -> CPU " + std::to_string(cpu)));
  }
  return out;
}

Finding NicAffinity(const HostFacts& f) {
  if (!f.pci) return Skip("could not read PCI devices: " + f.pci.error().Describe());
  if (!f.nodes) return Skip("could not read NUMA nodes: " + f.nodes.error().Describe());
  Finding r;
  std::map<int, size_t> nics_per_node;  // for the fix's per-NIC offset
  size_t nics = 0, bad = 0;
  for (const host::PciDevice& d : *f.pci) {
    if (!d.IsNic()) continue;
    auto it = f.nic_irqs.find(d.address);
    if (it == f.nic_irqs.end() || it->second.empty()) continue;
    const std::vector<int>& irqs = it->second;
    ++nics;
    std::string name =
        d.address + (d.net_interfaces.empty() ? "" : " (" + d.net_interfaces[0] + ")");
    const host::NumaNode* node = host::FindNode(*f.nodes, d.numa_node);
    // One node (a VM, NUMA off): every core is local, whatever numa_node says.
    if (node == nullptr && f.nodes->size() == 1) node = &f.nodes->front();
    if (node == nullptr) {
      Note(r, Severity::kWarn,
           name + ": firmware reports no NUMA node (numa_node " + std::to_string(d.numa_node) +
               "); cannot tell local cores");
      continue;
    }
    size_t offset = nics_per_node[node->id]++ * irqs.size();
    std::vector<int> remote_irqs;
    std::set<std::string> affinities;
    std::string unreadable;
    for (int irq : irqs) {
      auto a = f.irq_affinity.find(irq);
      if (a == f.irq_affinity.end() || !a->second) {
        unreadable = a == f.irq_affinity.end() ? "not read" : a->second.error().Describe();
        continue;
      }
      affinities.insert(host::FormatCpuList(*a->second));
      bool local = std::all_of(a->second->begin(), a->second->end(), [&](int c) {
        return std::binary_search(node->cpus.begin(), node->cpus.end(), c);
      });
      if (!local) remote_irqs.push_back(irq);
    }
    if (!unreadable.empty()) Note(r, Severity::kSkip, name + ": " + unreadable);
    // Where the interrupts actually landed, from the counters.
    std::map<int, int64_t> per_cpu;
    int64_t total = 0;
    if (f.interrupts) {
      for (int irq : irqs) {
        const host::IrqLine* l = f.interrupts->Find(irq);
        if (!l) continue;
        for (size_t i = 0; i < l->counts.size(); ++i) {
          per_cpu[f.interrupts->cpu_ids[i]] += l->counts[i];
          total += l->counts[i];
        }
      }
    }
    auto top = std::max_element(per_cpu.begin(), per_cpu.end(),
                                [](auto& a, auto& b) { return a.second < b.second; });
    bool one_core_by_affinity =
        irqs.size() > 1 && affinities.size() == 1 &&
        host::ParseCpuList(*affinities.begin()).value_or(std::vector<int>{}).size() == 1;
    bool one_core_by_counts =
        irqs.size() > 1 && total > 0 && top != per_cpu.end() && top->second * 10 >= total * 9;
    bool is_bad = false;
    if (!remote_irqs.empty()) {
      std::string list;
      for (int irq : remote_irqs) {
        list += (list.empty() ? "" : ",") + std::to_string(irq) + "->" +
                host::FormatCpuList(f.irq_affinity.at(irq).value());
      }
      Note(r, Severity::kFail,
           name + " on node " + std::to_string(node->id) + " (CPUs " +
               host::FormatCpuList(node->cpus) + "): " + std::to_string(remote_irqs.size()) +
               " of " + std::to_string(irqs.size()) + " IRQs may run off-node: " + list);
      is_bad = true;
    }
    if (one_core_by_affinity || one_core_by_counts) {
      std::string where = one_core_by_affinity
                              ? "all pinned to CPU " + *affinities.begin()
                              : std::to_string(top->second * 100 / total) +
                                    "% of interrupts served by CPU " + std::to_string(top->first);
      Note(r, Severity::kFail, name + ": " + std::to_string(irqs.size()) + " IRQs, " + where);
      is_bad = true;
    }
    if (is_bad) {
      ++bad;
      auto fix = SpreadFix(irqs, node->cpus, offset);
      r.actions.insert(r.actions.end(), fix.begin(), fix.end());
    }
  }
  if (nics == 0) return Skip("no NIC with interrupts found");
  r.summary = bad == 0 ? std::to_string(nics) + " NICs: interrupts on local-node cores, spread"
                       : std::to_string(bad) + " of " + std::to_string(nics) +
                             " NICs have interrupts off their NUMA node or on one core";
  return r;
}

}  // namespace

Status RegisterIrqChecks(CheckRegistry& r) {
  ANXIN_TRY(r.Add(
      {"irq.irqbalance", "irqbalance stopped",
       "irqbalance moves NIC interrupts across cores and NUMA nodes every few seconds; the field "
       "report's team had to turn it off to keep collective latency down (320 us -> 110 us "
       "together with the DSCP fix).",
       "systemctl stop irqbalance && systemctl disable irqbalance (anxin doctor --fix --apply)",
       IrqBalance}));
  ANXIN_TRY(r.Add(
      {"irq.nic_affinity", "NIC IRQs on local cores",
       "A NIC's interrupts served by cores of another NUMA node cross the socket link for every "
       "completion, and all of them on one core make that core the bottleneck; the field report "
       "pinned NIC interrupts to distinct local cores.",
       "write distinct local-node CPUs to /proc/irq/N/smp_affinity_list (anxin doctor --fix "
       "--apply does this)",
       NicAffinity}));
  return Ok();
}

}  // namespace anxin::doctor
