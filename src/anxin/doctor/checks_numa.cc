// numa.rank_binding, numa.config_file, numa.device_node: every accelerator
// process runs and allocates on its device's NUMA node, and the NUMA config
// file the container applies agrees with the hardware.
#include <algorithm>
#include <set>

#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"
#include "anxin/host/cpu_list.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

std::string DeviceName(const host::AcceleratorRef& a) {
  return (a.is_npu ? "NPU " : "GPU ") + std::to_string(a.index);
}

Finding RankBinding(const HostFacts& f) {
  if (!f.processes) return Skip("could not list processes: " + f.processes.error().Describe());
  if (f.processes->empty()) return Skip("no running process holds an accelerator open");
  if (!f.nodes) return Skip("could not read NUMA nodes: " + f.nodes.error().Describe());
  Finding r;
  size_t bad = 0;
  for (const host::ProcessInfo& p : *f.processes) {
    std::string who = "pid " + std::to_string(p.pid) + " (" + p.name + ")";
    std::set<int> dev_nodes;
    std::string devs;
    for (const auto& a : p.accelerators) {
      devs += (devs.empty() ? "" : ",") + DeviceName(a);
      int n = f.NodeOfAccelerator(a);
      if (n >= 0) dev_nodes.insert(n);
    }
    if (dev_nodes.empty()) {
      Note(r, Severity::kSkip, who + " uses " + devs + ": NUMA node of the device unknown");
      continue;
    }
    if (p.cpus_allowed.empty()) {
      Note(r, Severity::kSkip, who + ": Cpus_allowed_list unreadable");
      continue;
    }
    std::vector<int> local;
    for (int n : dev_nodes) {
      if (const auto* node = host::FindNode(*f.nodes, n)) {
        local.insert(local.end(), node->cpus.begin(), node->cpus.end());
      }
    }
    std::sort(local.begin(), local.end());
    size_t on_local = std::count_if(p.cpus_allowed.begin(), p.cpus_allowed.end(), [&](int c) {
      return std::binary_search(local.begin(), local.end(), c);
    });
    std::string nodes_text;
    for (int n : dev_nodes) nodes_text += (nodes_text.empty() ? "" : ",") + std::to_string(n);
    std::string head = who + " uses " + devs + " on node " + nodes_text + ", CPUs " +
                       host::FormatCpuList(p.cpus_allowed);
    bool is_bad = false;
    if (on_local == 0) {
      Note(r, Severity::kFail, head + ": bound to a remote NUMA node");
      is_bad = true;
    } else if (on_local < p.cpus_allowed.size()) {
      Note(r, Severity::kWarn,
           head + ": not bound (" + std::to_string(p.cpus_allowed.size() - on_local) +
               " allowed CPUs are off-node)");
      is_bad = true;
    }
    int64_t total = 0, remote = 0;
    for (const auto& [node, pages] : p.pages_per_node) {
      total += pages;
      if (!dev_nodes.contains(node)) remote += pages;
    }
    if (total > 0 && remote * 2 > total) {
      Note(r, Severity::kFail,
           who + ": " + std::to_string(remote * 100 / total) +
               "% of its resident pages are on other NUMA nodes (numa_maps)");
      is_bad = true;
    }
    if (is_bad) ++bad;
  }
  r.summary = bad == 0 ? std::to_string(f.processes->size()) +
                             " accelerator processes bound to their device's NUMA node"
                       : std::to_string(bad) + " of " + std::to_string(f.processes->size()) +
                             " accelerator processes run or allocate off their device's node";
  return r;
}

Finding ConfigFile(const HostFacts& f) {
  if (!f.numa_conf) {
    if (f.CountKind(host::DeviceKind::kHuaweiNpu) > 0) {
      return Skip(std::string(host::kAscendNumaConfPath) + " not present");
    }
    return Skip("no Ascend NPUs and no " + std::string(host::kAscendNumaConfPath));
  }
  if (!*f.numa_conf) {
    Finding r;
    Note(r, Severity::kFail, f.numa_conf->error().Describe());
    r.summary = std::string(host::kAscendNumaConfPath) + " cannot be read or parsed";
    return r;
  }
  if (!f.nodes) return Skip("could not read NUMA nodes: " + f.nodes.error().Describe());
  Finding r;
  size_t wrong = 0;
  for (const host::NpuNumaBinding& b : **f.numa_conf) {
    std::string at = "line " + std::to_string(b.line) + ": NPU " + std::to_string(b.npu);
    auto pci = f.npu_pci.find(b.npu);
    const host::PciDevice* d = pci == f.npu_pci.end() ? nullptr : f.FindPci(pci->second);
    if (d == nullptr) {
      Note(r, Severity::kFail, at + ": no such NPU on this host");
      ++wrong;
      continue;
    }
    bool bad = false;
    if (b.node && *b.node != d->numa_node) {
      Note(r, Severity::kFail,
           at + " bound to node " + std::to_string(*b.node) + ", but " + d->address +
               " is on node " + std::to_string(d->numa_node));
      bad = true;
    }
    if (!b.cpus.empty()) {
      const host::NumaNode* node = host::FindNode(*f.nodes, d->numa_node);
      std::vector<int> off;
      for (int c : b.cpus) {
        if (node == nullptr || !std::binary_search(node->cpus.begin(), node->cpus.end(), c)) {
          off.push_back(c);
        }
      }
      if (!off.empty()) {
        Note(r, Severity::kFail,
             at + " cpus " + host::FormatCpuList(b.cpus) + ": " + host::FormatCpuList(off) +
                 " not on node " + std::to_string(d->numa_node));
        bad = true;
      }
    }
    if (bad) ++wrong;
  }
  size_t n = (*f.numa_conf)->size();
  r.summary = wrong == 0
                  ? std::to_string(n) + " bindings in " + std::string(host::kAscendNumaConfPath) +
                        " match the hardware"
                  : std::to_string(wrong) + " of " + std::to_string(n) + " bindings in " +
                        std::string(host::kAscendNumaConfPath) + " disagree with the hardware";
  if (wrong > 0) {
    r.evidence.push_back("NPU -> PCI mapping from " + f.npu_pci_source);
  }
  return r;
}

Finding DeviceNode(const HostFacts& f) {
  if (!f.pci) return Skip("could not read PCI devices: " + f.pci.error().Describe());
  if (!f.nodes) return Skip("could not read NUMA nodes: " + f.nodes.error().Describe());
  Finding r;
  size_t n = 0, unknown = 0;
  for (const auto& d : *f.pci) {
    if (!d.IsAccelerator() && d.kind != host::DeviceKind::kMellanoxNic) continue;
    ++n;
    if (f.nodes->size() > 1 && host::FindNode(*f.nodes, d.numa_node) == nullptr) {
      ++unknown;
      Note(r, Severity::kWarn,
           std::string(host::DeviceKindName(d.kind)) + " " + d.address + ": numa_node " +
               std::to_string(d.numa_node));
    }
  }
  if (n == 0) return Skip("no accelerators or RDMA NICs on the PCI bus");
  r.summary = unknown == 0 ? std::to_string(n) + " accelerators/NICs report their NUMA node"
                           : std::to_string(unknown) + " devices report no NUMA node";
  return r;
}

}  // namespace

Status RegisterNumaChecks(CheckRegistry& r) {
  ANXIN_TRY(r.Add(
      {"numa.config_file", "ascend_numa.conf matches",
       "The field report's bindings lived in /etc/ascend_numa.conf inside the container, which "
       "new teams often forgot to check; a stale file binds every rank to the wrong node.",
       "edit /etc/ascend_numa.conf so each NPU names the node in "
       "/sys/bus/pci/devices/ADDR/numa_node and CPUs of that node",
       ConfigFile}));
  ANXIN_TRY(
      r.Add({"numa.device_node", "devices report NUMA node",
             "With numa_node -1 nothing (the driver, the launcher, anxin) can place ranks and "
             "interrupts next to the device.",
             "enable NUMA / ACPI SRAT reporting in the BIOS (\"NUMA\" or \"Sub-NUMA clustering\")",
             DeviceNode}));
  ANXIN_TRY(r.Add(
      {"numa.rank_binding", "ranks on device's node",
       "Each NPU hangs off one socket's PCIe x16; a rank running or allocating on another node "
       "multiplies host-device and NIC traffic cost. The field report bound every NPU process to "
       "its NPU's NUMA node.",
       "launch each rank under numactl --cpunodebind=N --membind=N (N = the device's "
       "numa_node), or set the bindings in /etc/ascend_numa.conf",
       RankBinding}));
  return Ok();
}

}  // namespace anxin::doctor
