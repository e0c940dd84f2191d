// HostFacts: everything the checks look at, read once from a host root (and
// the vendor tools) before any check runs, so checks are pure functions of it
// and a read error becomes a "skip: could not read X" finding, not a crash.
//
//   CollectOptions o;
//   o.root = "/";                          // or a captured tree
//   auto tools = MakeToolSource(host::HostRoot(o.root), 5);
//   HostFacts facts = CollectFacts(o, *tools);
//
// Where the ranks' environment comes from (HCCL_*, NCCL_*, PYTORCH_*_ALLOC_CONF):
// the environ of the processes that hold an accelerator open (the lowest PID
// is the reference; the others are compared with it). With no such process,
// from `--env FILE` for a preflight before launch, else from doctor's own
// environment on the live root, else (a captured tree) from nothing, so every
// variable is at its library default.
#ifndef ANXIN_DOCTOR_FACTS_H_
#define ANXIN_DOCTOR_FACTS_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/tools.h"
#include "anxin/host/ascend_numa_conf.h"
#include "anxin/host/interrupts.h"
#include "anxin/host/processes.h"
#include "anxin/host/qos.h"
#include "anxin/host/system.h"
#include "anxin/host/topology.h"

namespace anxin::doctor {

struct CollectOptions {
  std::string root = "/";
  std::optional<host::Environment> env;  // --env FILE, already parsed
  std::string env_source;                // how to name it in evidence
  std::optional<int> job_nodes;          // --nodes N
};

struct NicFacts {
  host::PciDevice pci;
  std::string ifname;  // first interface of the device, "" if none
  std::optional<host::MlnxQos> qos;
  std::string qos_error;  // why qos is absent
  host::RoceEcn ecn;
};

struct NpuPortFacts {
  int npu = 0;
  std::optional<std::array<bool, 8>> pfc;
  std::optional<std::map<int, int>> dscp_to_tc;
  std::string error;
};

struct HostFacts {
  host::HostRoot root;
  Result<std::vector<host::NumaNode>> nodes = std::vector<host::NumaNode>{};
  Result<std::vector<host::PciDevice>> pci = std::vector<host::PciDevice>{};
  Result<host::InterruptTable> interrupts = host::InterruptTable{};
  // IRQs of each NIC (by PCI address): its msi_irqs, else the /proc/interrupts
  // rows that name the device or its interface.
  std::map<std::string, std::vector<int>> nic_irqs;
  std::map<int, Result<std::vector<int>>> irq_affinity;  // for NIC IRQs
  std::vector<int> irqbalance_pids;
  Result<std::vector<host::ProcessInfo>> processes = std::vector<host::ProcessInfo>{};
  host::Environment env;
  std::string env_source;  // "process 4101 (python3)", "--env x.env", ...
  std::optional<int> job_nodes;
  std::string job_nodes_source;
  Result<host::HugePages> hugepages = host::HugePages{};
  Result<std::map<int, std::string>> governors = std::map<int, std::string>{};
  // nullopt: the file does not exist.
  std::optional<Result<std::vector<host::NpuNumaBinding>>> numa_conf;
  // Accelerator index (N of /dev/davinciN, /dev/nvidiaN) -> PCI address.
  std::map<int, std::string> npu_pci;
  std::string npu_pci_source;
  std::map<int, std::string> gpu_pci;
  std::vector<NicFacts> nics;
  std::vector<NpuPortFacts> npu_ports;

  // Helpers over the facts.
  const host::PciDevice* FindPci(const std::string& address) const;
  int NodeOfAccelerator(const host::AcceleratorRef& ref) const;  // -1 unknown
  size_t CountKind(host::DeviceKind kind) const;
  std::optional<std::string> Env(const std::string& key) const;
};

HostFacts CollectFacts(const CollectOptions& options, ToolSource& tools);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_FACTS_H_
