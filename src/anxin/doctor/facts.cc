#include "anxin/doctor/facts.h"

#include <unistd.h>

#include <algorithm>

#include "anxin/base/strings.h"

extern char** environ;

namespace anxin::doctor {

const host::PciDevice* HostFacts::FindPci(const std::string& address) const {
  if (!pci) return nullptr;
  for (const host::PciDevice& d : *pci) {
    if (d.address == address) return &d;
  }
  return nullptr;
}

int HostFacts::NodeOfAccelerator(const host::AcceleratorRef& ref) const {
  const auto& map = ref.is_npu ? npu_pci : gpu_pci;
  auto it = map.find(ref.index);
  if (it == map.end()) return -1;
  const host::PciDevice* d = FindPci(it->second);
  return d ? d->numa_node : -1;
}

size_t HostFacts::CountKind(host::DeviceKind kind) const {
  if (!pci) return 0;
  return static_cast<size_t>(
      std::count_if(pci->begin(), pci->end(), [&](const auto& d) { return d.kind == kind; }));
}

std::optional<std::string> HostFacts::Env(const std::string& key) const {
  auto it = env.find(key);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

namespace {

std::vector<std::string> AddressesOfKind(const HostFacts& f, host::DeviceKind kind) {
  std::vector<std::string> out;
  if (!f.pci) return out;
  for (const auto& d : *f.pci) {
    if (d.kind == kind) out.push_back(d.address);
  }
  return out;
}

void MapAccelerators(HostFacts& f, ToolSource& tools) {
  auto npus = AddressesOfKind(f, host::DeviceKind::kHuaweiNpu);
  if (!npus.empty()) {
    if (auto info = tools.Run({"npu-smi", "info"})) {
      f.npu_pci = host::ParseNpuSmiBusIds(*info);
      f.npu_pci_source = "npu-smi info";
    }
    if (f.npu_pci.empty()) {
      // Without npu-smi the driver numbers chips in PCI order on the hosts we
      // know; say so in the evidence, since it is an assumption.
      for (size_t i = 0; i < npus.size(); ++i) f.npu_pci[static_cast<int>(i)] = npus[i];
      f.npu_pci_source = "PCI address order (npu-smi not available)";
    }
  }
  f.gpu_pci = host::ReadNvidiaMinors(f.root);
  if (f.gpu_pci.empty()) {
    auto gpus = AddressesOfKind(f, host::DeviceKind::kNvidiaGpu);
    for (size_t i = 0; i < gpus.size(); ++i) f.gpu_pci[static_cast<int>(i)] = gpus[i];
  }
}

void ChooseEnvironment(HostFacts& f, const CollectOptions& o) {
  if (f.processes && !f.processes->empty()) {
    const host::ProcessInfo& p = f.processes->front();
    f.env = p.env;
    f.env_source = "environ of process " + std::to_string(p.pid) + " (" + p.name + ")";
  } else if (o.env) {
    f.env = *o.env;
    f.env_source = o.env_source.empty() ? "--env file" : o.env_source;
  } else if (f.root.is_live()) {
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv = *e;
      size_t eq = kv.find('=');
      if (eq != std::string_view::npos && eq > 0) {
        f.env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
      }
    }
    f.env_source = "the environment of anxin doctor (no running ranks found)";
  } else {
    f.env_source = "library defaults (no running ranks and no --env in a captured tree)";
  }
  if (o.job_nodes) {
    f.job_nodes = o.job_nodes;
    f.job_nodes_source = "--nodes";
    return;
  }
  auto get = [&](const char* k) -> std::optional<int64_t> {
    auto v = f.Env(k);
    return v ? ParseInt(*v) : std::nullopt;
  };
  if (auto n = get("NNODES")) {
    f.job_nodes = static_cast<int>(*n);
    f.job_nodes_source = "NNODES";
  } else if (auto w = get("WORLD_SIZE"), l = get("LOCAL_WORLD_SIZE"); w && l && *l > 0) {
    f.job_nodes = static_cast<int>(*w / *l);
    f.job_nodes_source = "WORLD_SIZE / LOCAL_WORLD_SIZE";
  }
}

void ReadNics(HostFacts& f, ToolSource& tools) {
  if (!f.pci) return;
  for (const host::PciDevice& d : *f.pci) {
    if (d.kind != host::DeviceKind::kMellanoxNic) continue;
    NicFacts n;
    n.pci = d;
    if (!d.net_interfaces.empty()) n.ifname = d.net_interfaces.front();
    if (n.ifname.empty()) {
      n.qos_error = "no network interface under /sys/bus/pci/devices/" + d.address + "/net";
    } else {
      auto out = tools.Run({"mlnx_qos", "-i", n.ifname});
      if (out) {
        auto q = host::ParseMlnxQos(*out);
        if (q) {
          n.qos = *q;
        } else {
          n.qos_error = "mlnx_qos -i " + n.ifname + ": " + q.error().Describe();
        }
      } else {
        n.qos_error = out.error().Describe();
        if (auto trust = host::ReadSysfsTrust(f.root, n.ifname)) {
          host::MlnxQos q;
          q.trust = *trust;
          n.qos = q;
        }
      }
      n.ecn = host::ReadRoceEcn(f.root, n.ifname);
    }
    f.nics.push_back(std::move(n));
  }
}

void ReadNpuPorts(HostFacts& f, ToolSource& tools) {
  for (const auto& [npu, addr] : f.npu_pci) {
    NpuPortFacts p;
    p.npu = npu;
    std::string id = std::to_string(npu);
    auto pfc = tools.Run({"hccn_tool", "-i", id, "-pfc", "-g"});
    if (!pfc) {
      p.error = pfc.error().Describe();
      f.npu_ports.push_back(std::move(p));
      if (pfc.error().code() == ErrorCode::kNotFound) break;  // the tool is absent: once is enough
      continue;
    }
    if (auto t = host::ParsePfcTable(*pfc)) {
      p.pfc = *t;
    } else {
      p.error = "hccn_tool -i " + id + " -pfc -g: " + t.error().Describe();
    }
    if (auto m = tools.Run({"hccn_tool", "-i", id, "-dscp_to_tc", "-g"})) {
      if (auto t = host::ParseHccnDscpToTc(*m)) p.dscp_to_tc = *t;
    }
    f.npu_ports.push_back(std::move(p));
  }
}

}  // namespace

HostFacts CollectFacts(const CollectOptions& o, ToolSource& tools) {
  HostFacts f;
  f.root = host::HostRoot(o.root);
  f.nodes = host::ReadNumaNodes(f.root);
  f.pci = host::ReadPciDevices(f.root);
  if (auto text = f.root.ReadFile("/proc/interrupts")) {
    f.interrupts = host::ParseInterrupts(*text);
  } else {
    f.interrupts = std::unexpected(text.error());
  }
  if (f.pci) {
    for (const auto& d : *f.pci) {
      if (!d.IsNic()) continue;
      std::vector<int> irqs = d.msi_irqs;
      if (irqs.empty() && f.interrupts) {
        for (const auto& l : f.interrupts->irqs) {
          bool named = l.description.find(d.address) != std::string::npos;
          for (const auto& ifname : d.net_interfaces) {
            named |= l.description.find(ifname) != std::string::npos;
          }
          if (named) irqs.push_back(l.irq);
        }
      }
      for (int irq : irqs) f.irq_affinity.emplace(irq, host::ReadIrqAffinity(f.root, irq));
      f.nic_irqs[d.address] = std::move(irqs);
    }
  }
  f.irqbalance_pids = host::FindProcessesByName(f.root, "irqbalance");
  f.processes = host::ReadAcceleratorProcesses(f.root);
  ChooseEnvironment(f, o);
  f.hugepages = host::ReadHugePages(f.root);
  f.governors = host::ReadGovernors(f.root);
  if (f.root.Exists(host::kAscendNumaConfPath)) {
    auto text = f.root.ReadFile(host::kAscendNumaConfPath);
    if (text) {
      f.numa_conf = host::ParseAscendNumaConf(*text);
    } else {
      f.numa_conf = std::unexpected(text.error());
    }
  }
  MapAccelerators(f, tools);
  ReadNics(f, tools);
  ReadNpuPorts(f, tools);
  return f;
}

}  // namespace anxin::doctor
