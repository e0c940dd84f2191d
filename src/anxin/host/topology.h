// NUMA nodes and PCI devices (accelerators and NICs) with their NUMA node,
// read from sysfs under a root prefix.
//
//   HostRoot root;                                   // live host
//   ANXIN_ASSIGN_OR_RETURN(auto nodes, ReadNumaNodes(root));
//   ANXIN_ASSIGN_OR_RETURN(auto pci, ReadPciDevices(root));
//   for (const PciDevice& d : pci) {
//     if (d.kind == DeviceKind::kHuaweiNpu) {
//       std::printf("%s: node %d\n", d.address.c_str(), d.numa_node);
//     }
//   }
#ifndef ANXIN_HOST_TOPOLOGY_H_
#define ANXIN_HOST_TOPOLOGY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/host/root_fs.h"

namespace anxin::host {

inline constexpr uint16_t kVendorHuawei = 0x19e5;
inline constexpr uint16_t kVendorNvidia = 0x10de;
inline constexpr uint16_t kVendorMellanox = 0x15b3;

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;
};

// /sys/devices/system/node/node*/cpulist, sorted by id. A host without the
// node directory (NUMA off) reads as one node 0 holding every online CPU.
Result<std::vector<NumaNode>> ReadNumaNodes(const HostRoot& root);
// The node that holds cpu, or -1.
int NodeOfCpu(const std::vector<NumaNode>& nodes, int cpu);
const NumaNode* FindNode(const std::vector<NumaNode>& nodes, int id);

enum class DeviceKind { kOther, kHuaweiNpu, kNvidiaGpu, kMellanoxNic, kOtherNic };
std::string_view DeviceKindName(DeviceKind kind);

struct PciDevice {
  std::string address;  // "0000:18:00.0", lower case
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t class_code = 0;  // 24-bit class, e.g. 0x020000 Ethernet
  int numa_node = -1;       // -1: firmware did not say
  DeviceKind kind = DeviceKind::kOther;
  std::vector<std::string> net_interfaces;  // names under .../net/
  std::vector<int> msi_irqs;                // names under .../msi_irqs/
  bool IsAccelerator() const {
    return kind == DeviceKind::kHuaweiNpu || kind == DeviceKind::kNvidiaGpu;
  }
  bool IsNic() const { return kind == DeviceKind::kMellanoxNic || kind == DeviceKind::kOtherNic; }
};

DeviceKind ClassifyPci(uint16_t vendor, uint16_t device, uint32_t class_code);

// Every device under /sys/bus/pci/devices, sorted by address. A device whose
// vendor file cannot be read is skipped; the read errors are not fatal
// because sysfs entries can vanish while we read (hot unplug).
Result<std::vector<PciDevice>> ReadPciDevices(const HostRoot& root);

// "0000:3F:00.0" -> "0000:3f:00.0"; "3F:00.0" -> "0000:3f:00.0".
std::string NormalizePciAddress(std::string_view address);

// Bus ids of Ascend NPUs by NPU id from `npu-smi info` output (the table's
// "NPU Name" row is followed by a "Chip Bus-Id" row). Tolerates column widths.
std::map<int, std::string> ParseNpuSmiBusIds(std::string_view npu_smi_info);

// NVIDIA device minor (the N of /dev/nvidiaN) by bus address, from
// /proc/driver/nvidia/gpus/*/information. Empty when the driver is absent.
std::map<int, std::string> ReadNvidiaMinors(const HostRoot& root);

}  // namespace anxin::host

#endif  // ANXIN_HOST_TOPOLOGY_H_
