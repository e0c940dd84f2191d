#include "anxin/host/topology.h"

#include <algorithm>
#include <cctype>

#include "anxin/base/strings.h"
#include "anxin/host/cpu_list.h"

namespace anxin::host {

Result<std::vector<NumaNode>> ReadNumaNodes(const HostRoot& root) {
  std::vector<NumaNode> nodes;
  auto names = root.ListDir("/sys/devices/system/node");
  if (names) {
    for (const std::string& n : *names) {
      if (!n.starts_with("node")) continue;
      auto id = ParseInt(std::string_view(n).substr(4));
      if (!id) continue;
      std::string p = "/sys/devices/system/node/" + n + "/cpulist";
      ANXIN_ASSIGN_OR_RETURN(std::string text, root.ReadAttr(p));
      auto cpus = ParseCpuList(text);
      if (!cpus) return std::unexpected(std::move(cpus).error().With(p));
      nodes.push_back({static_cast<int>(*id), std::move(*cpus)});
    }
  }
  if (nodes.empty()) {
    ANXIN_ASSIGN_OR_RETURN(std::string online, root.ReadAttr("/sys/devices/system/cpu/online"));
    auto cpus = ParseCpuList(online);
    if (!cpus)
      return std::unexpected(std::move(cpus).error().With("/sys/devices/system/cpu/online"));
    nodes.push_back({0, std::move(*cpus)});
  }
  std::sort(nodes.begin(), nodes.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return nodes;
}

int NodeOfCpu(const std::vector<NumaNode>& nodes, int cpu) {
  for (const NumaNode& n : nodes) {
    if (std::binary_search(n.cpus.begin(), n.cpus.end(), cpu)) return n.id;
  }
  return -1;
}

const NumaNode* FindNode(const std::vector<NumaNode>& nodes, int id) {
  for (const NumaNode& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

std::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kHuaweiNpu:
      return "npu";
    case DeviceKind::kNvidiaGpu:
      return "gpu";
    case DeviceKind::kMellanoxNic:
      return "mlx-nic";
    case DeviceKind::kOtherNic:
      return "nic";
    case DeviceKind::kOther:
      break;
  }
  return "other";
}

DeviceKind ClassifyPci(uint16_t vendor, uint16_t device, uint32_t class_code) {
  uint32_t base = class_code >> 16;
  if (vendor == kVendorHuawei) {
    // Ascend chips report class 0x12 (processing accelerator); a few older
    // boards report 0x0b/0x03, so the device id decides for them.
    static constexpr uint16_t kAscendIds[] = {0xd100, 0xd105, 0xd500, 0xd801,
                                              0xd802, 0xd803, 0xd806};
    if (base == 0x12 ||
        std::find(std::begin(kAscendIds), std::end(kAscendIds), device) != std::end(kAscendIds)) {
      return DeviceKind::kHuaweiNpu;
    }
  }
  if (vendor == kVendorNvidia && (base == 0x03 || base == 0x12)) return DeviceKind::kNvidiaGpu;
  if (base == 0x02)
    return vendor == kVendorMellanox ? DeviceKind::kMellanoxNic : DeviceKind::kOtherNic;
  return DeviceKind::kOther;
}

std::string NormalizePciAddress(std::string_view address) {
  std::string a = ToLower(Trim(address));
  if (std::count(a.begin(), a.end(), ':') == 1) a = "0000:" + a;
  // npu-smi prints an 8-digit domain on some releases ("00000000:3F:00.0").
  size_t colon = a.find(':');
  if (colon == 8 && a.substr(0, 4) == "0000") a = a.substr(4);
  return a;
}

Result<std::vector<PciDevice>> ReadPciDevices(const HostRoot& root) {
  ANXIN_ASSIGN_OR_RETURN(auto names, root.ListDir("/sys/bus/pci/devices"));
  std::vector<PciDevice> out;
  for (const std::string& name : names) {
    std::string base = "/sys/bus/pci/devices/" + name;
    auto vendor = root.ReadAttr(base + "/vendor");
    if (!vendor) continue;
    PciDevice d;
    d.address = NormalizePciAddress(name);
    d.vendor = static_cast<uint16_t>(ParseInt(*vendor).value_or(0));
    if (auto dev = root.ReadAttr(base + "/device")) {
      d.device = static_cast<uint16_t>(ParseInt(*dev).value_or(0));
    }
    if (auto cls = root.ReadAttr(base + "/class")) {
      d.class_code = static_cast<uint32_t>(ParseInt(*cls).value_or(0));
    }
    if (auto node = root.ReadAttr(base + "/numa_node")) {
      d.numa_node = static_cast<int>(ParseInt(*node).value_or(-1));
    }
    d.kind = ClassifyPci(d.vendor, d.device, d.class_code);
    if (auto nets = root.ListDir(base + "/net")) d.net_interfaces = *nets;
    if (auto irqs = root.ListDir(base + "/msi_irqs")) {
      for (const std::string& i : *irqs) {
        if (auto v = ParseInt(i)) d.msi_irqs.push_back(static_cast<int>(*v));
      }
      std::sort(d.msi_irqs.begin(), d.msi_irqs.end());
    }
    out.push_back(std::move(d));
  }
  return out;
}

namespace {
bool LooksLikeBusId(std::string_view s) {
  // dddd:bb:dd.f with an optional 8-digit domain.
  size_t dot = s.rfind('.');
  if (dot == std::string_view::npos || std::count(s.begin(), s.end(), ':') != 2) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
  }
  return true;
}

std::vector<std::string_view> Cells(std::string_view line) {
  std::vector<std::string_view> cells;
  for (std::string_view c : Split(line, '|')) cells.push_back(Trim(c));
  return cells;
}
}  // namespace

std::map<int, std::string> ParseNpuSmiBusIds(std::string_view text) {
  std::map<int, std::string> out;
  // A plain id with a sentinel rather than std::optional: g++ 12 at -O2 warns
  // (falsely) that the optional's value may be used uninitialised.
  constexpr int64_t kNone = -1;
  int64_t pending_npu = kNone;
  for (std::string_view line : SplitLines(text)) {
    if (line.empty() || line.front() != '|') {
      continue;  // borders (+---+, +===+) keep the pending NPU id
    }
    auto cells = Cells(line);
    if (cells.size() < 3) continue;
    std::string_view first = cells[1];
    auto words = SplitWords(first);
    std::string_view second = cells[2];
    if (pending_npu != kNone && LooksLikeBusId(second)) {
      out[static_cast<int>(pending_npu)] = NormalizePciAddress(second);
      pending_npu = kNone;
      continue;
    }
    // "| 0     910B2C | OK | ..." : an id followed by a model name.
    if (words.size() >= 2) {
      if (auto id = ParseInt(words[0]); id && *id >= 0) pending_npu = *id;
    }
  }
  return out;
}

std::map<int, std::string> ReadNvidiaMinors(const HostRoot& root) {
  std::map<int, std::string> out;
  auto gpus = root.ListDir("/proc/driver/nvidia/gpus");
  if (!gpus) return out;
  for (const std::string& bus : *gpus) {
    auto info = root.ReadFile("/proc/driver/nvidia/gpus/" + bus + "/information");
    if (!info) continue;
    for (std::string_view line : SplitLines(*info)) {
      if (!line.starts_with("Device Minor:")) continue;
      if (auto m = ParseInt(line.substr(13))) out[static_cast<int>(*m)] = NormalizePciAddress(bus);
    }
  }
  return out;
}

}  // namespace anxin::host
