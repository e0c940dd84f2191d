// The DCMI source of the ascend backend: Huawei's device management library,
// libdcmi.so, through dlopen. The prototypes, structures and codes are
// declared here from the DCMI API reference (no header copied).
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "anxin/base/dynamic_library.h"
#include "anxin/base/strings.h"
#include "anxin/device/ascend/source.h"

namespace anxin::device::ascend {
namespace {

constexpr int kDcmiOk = 0;
constexpr int kDcmiNotReady = -8012;      // the chip is starting or resetting
constexpr int kDcmiNotSupported = -8255;  // this chip or driver lacks the reading
constexpr int kAiCoreUtilisation = 2;     // dcmi_get_device_utilization_rate input_type
constexpr unsigned int kHealthAbsent = 0xFFFFFFFF;

struct dcmi_hbm_info {
  unsigned long long memory_size;   // MB
  unsigned int freq;                // MHz
  unsigned long long memory_usage;  // MB
  int temp;
  unsigned int bandwith_util_rate;
};
struct dcmi_chip_info {
  unsigned char chip_type[32];
  unsigned char chip_name[32];
  unsigned char chip_ver[32];
  unsigned int aicore_cnt;
};
struct dcmi_pcie_info_all {
  unsigned int venderid;
  unsigned int subvenderid;
  unsigned int deviceid;
  unsigned int subdeviceid;
  int domain;
  unsigned int bdf_busid;
  unsigned int bdf_deviceid;
  unsigned int bdf_funcid;
  unsigned char reserve[32];
};

struct Api {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*card_list)(int*, int*, int) = nullptr;
  int (*devices_in_card)(int, int*) = nullptr;
  int (*health)(int, int, unsigned int*) = nullptr;
  int (*errorcodes)(int, int, int*, unsigned int*, unsigned int) = nullptr;
  int (*temperature)(int, int, int*) = nullptr;
  int (*power)(int, int, int*) = nullptr;
  int (*hbm)(int, int, dcmi_hbm_info*) = nullptr;
  int (*utilisation)(int, int, int, unsigned int*) = nullptr;
  int (*chip_info)(int, int, dcmi_chip_info*) = nullptr;
  // Optional.
  int (*pcie_info)(int, int, dcmi_pcie_info_all*) = nullptr;
  int (*logic_id)(int*, int, int) = nullptr;
  int (*network_health)(int, int, int*) = nullptr;
};

// dcmi_get_device_network_health: 0 is a healthy RoCE port; 6 means the
// detection has not been set up (no address to probe), which says nothing
// about the link; any other value (socket failure, timeout, unreachable,
// fault, ...) is a port that cannot carry traffic now.
constexpr int kNetworkOk = 0;
constexpr int kNetworkInit = 6;

std::string Text(const unsigned char* s, size_t n) {
  const char* c = reinterpret_cast<const char*>(s);
  return std::string(c, strnlen(c, n));
}

Health HealthFromDcmi(unsigned int h) {
  switch (h) {
    case 0:
      return Health::kOk;
    case 1:
      return Health::kWarning;
    case 2:
      return Health::kAlarm;
    default:
      return Health::kCritical;
  }
}

class DcmiSource final : public ChipSource {
 public:
  DcmiSource(Api api, Clock& clock) : api_(api), clock_(clock) {}
  ~DcmiSource() override { dlclose(api_.lib); }

  std::string Describe() const override { return "dcmi"; }

  Result<std::vector<Chip>> List() override {
    std::lock_guard lock(mu_);
    int cards[64] = {};
    int count = 0;
    int rc = api_.card_list(&count, cards, 64);
    if (rc != kDcmiOk) {
      return Unavailable(
          fmt::format("ascend: dcmi_get_card_num_list failed ({}): check the "
                      "driver with npu-smi info",
                      rc));
    }
    std::vector<Chip> chips;
    for (int k = 0; k < count && k < 64; ++k) {
      int n = 0;
      rc = api_.devices_in_card(cards[k], &n);
      if (rc != kDcmiOk) {
        return Unavailable(
            fmt::format("ascend: dcmi_get_device_num_in_card({}) failed ({})", cards[k], rc));
      }
      for (int d = 0; d < n; ++d) {
        Chip c;
        c.card = cards[k];
        c.chip = d;
        c.logic = static_cast<int>(chips.size());
        if (api_.logic_id) {
          int logic = 0;
          if (api_.logic_id(&logic, c.card, d) == kDcmiOk) c.logic = logic;
        }
        dcmi_chip_info info{};
        std::string name;
        if (api_.chip_info(c.card, d, &info) == kDcmiOk) {
          name = Text(info.chip_name, sizeof info.chip_name);
        }
        FillModel(name, c.info);
        dcmi_pcie_info_all pci{};
        if (api_.pcie_info && api_.pcie_info(c.card, d, &pci) == kDcmiOk) {
          c.info.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bdf_busid,
                                          pci.bdf_deviceid, pci.bdf_funcid);
          c.info.numa_node = NumaNodeOf(c.info.pci_bus_id);
        }
        dcmi_hbm_info hbm{};
        if (api_.hbm(c.card, d, &hbm) == kDcmiOk) c.info.hbm_total_bytes = hbm.memory_size * kMiB;
        chips.push_back(std::move(c));
      }
    }
    // Numbered as npu-smi numbers them: by card when each card has one chip.
    bool one_per_card = true;
    for (size_t i = 1; i < chips.size(); ++i) one_per_card &= chips[i].card != chips[i - 1].card;
    for (size_t i = 0; i < chips.size(); ++i) {
      chips[i].info.index = one_per_card ? chips[i].card : static_cast<int>(i);
    }
    return chips;
  }

  Result<DeviceSample> Read(const Chip& chip) override {
    std::lock_guard lock(mu_);
    const int card = chip.card, dev = chip.chip;
    DeviceSample s;
    s.time = clock_.Now();
    s.core_clock_mhz = kNotReported;
    s.memory_clock_mhz = kNotReported;
    s.ecc = {kNotReportedCount, kNotReportedCount};
    // One DCMI call: true when it answered, false for "not supported"; a chip
    // that is not ready, or any other failure, ends the reading.
    auto read = [&](int rc, const char* what) -> Result<bool> {
      if (rc == kDcmiOk) return true;
      if (rc == kDcmiNotSupported) return false;
      if (rc == kDcmiNotReady) {
        return Unavailable(fmt::format(
            "NPU {}: not ready (DCMI {} from {}): it is starting or resetting; retry in a few "
            "seconds",
            chip.info.index, rc, what));
      }
      return Unavailable(
          fmt::format("NPU {}: {} failed (DCMI {}): check npu-smi info -t "
                      "health -i {} -c {}",
                      chip.info.index, what, rc, card, dev));
    };
    unsigned int health = 0;
    ANXIN_ASSIGN_OR_RETURN(bool ok,
                           read(api_.health(card, dev, &health), "dcmi_get_device_health"));
    if (ok && health == kHealthAbsent) {
      return Unavailable(
          fmt::format("NPU {}: DCMI reports the chip absent: check the card and "
                      "the driver (dmesg)",
                      chip.info.index));
    }
    s.health = ok ? HealthFromDcmi(health) : Health::kOk;
    int count = 0;
    unsigned int codes[128] = {};
    ANXIN_ASSIGN_OR_RETURN(
        ok, read(api_.errorcodes(card, dev, &count, codes, 128), "dcmi_get_device_errorcode_v2"));
    for (int i = 0; ok && i < count && i < 128; ++i) {
      s.error_codes.push_back({fmt::format("{:08X}", codes[i]), SeverityFor(s.health), ""});
    }
    int temp = 0;
    ANXIN_ASSIGN_OR_RETURN(ok,
                           read(api_.temperature(card, dev, &temp), "dcmi_get_device_temperature"));
    s.temperature_celsius = ok ? temp : kNotReported;
    int power = 0;
    ANXIN_ASSIGN_OR_RETURN(ok, read(api_.power(card, dev, &power), "dcmi_get_device_power_info"));
    s.power_watts = ok ? power / 10.0 : kNotReported;  // in 0.1 W
    dcmi_hbm_info hbm{};
    ANXIN_ASSIGN_OR_RETURN(ok, read(api_.hbm(card, dev, &hbm), "dcmi_get_device_hbm_info"));
    s.hbm_used_bytes = ok ? hbm.memory_usage * kMiB : kNotReportedCount;
    if (ok && hbm.freq > 0) s.memory_clock_mhz = hbm.freq;
    unsigned int rate = 0;
    ANXIN_ASSIGN_OR_RETURN(ok, read(api_.utilisation(card, dev, kAiCoreUtilisation, &rate),
                                    "dcmi_get_device_utilization_rate"));
    s.utilisation_percent = ok ? rate : kNotReported;
    if (api_.network_health != nullptr) {
      int network = 0;
      ANXIN_ASSIGN_OR_RETURN(
          ok, read(api_.network_health(card, dev, &network), "dcmi_get_device_network_health"));
      if (ok && network != kNetworkInit) s.links.push_back({0, network == kNetworkOk});
    }
    return s;
  }

 private:
  const Api api_;
  Clock& clock_;
  std::mutex mu_;  // DCMI calls one at a time
};

}  // namespace

Result<std::unique_ptr<ChipSource>> MakeDcmiSource(const AscendOptions& options, Clock& clock) {
  std::string library = LibraryPath(options.dcmi_library, "ANXIN_DCMI_LIBRARY", "libdcmi.so");
  Api api;
  ANXIN_ASSIGN_OR_RETURN(api.lib, OpenLibrary("", library, ""));
  bool ok = LoadSymbol(api.lib, "dcmi_init", api.init) &&
            LoadSymbol(api.lib, "dcmi_get_card_num_list", api.card_list) &&
            LoadSymbol(api.lib, "dcmi_get_device_num_in_card", api.devices_in_card) &&
            LoadSymbol(api.lib, "dcmi_get_device_health", api.health) &&
            LoadSymbol(api.lib, "dcmi_get_device_errorcode_v2", api.errorcodes) &&
            LoadSymbol(api.lib, "dcmi_get_device_temperature", api.temperature) &&
            LoadSymbol(api.lib, "dcmi_get_device_power_info", api.power) &&
            LoadSymbol(api.lib, "dcmi_get_device_hbm_info", api.hbm) &&
            LoadSymbol(api.lib, "dcmi_get_device_utilization_rate", api.utilisation) &&
            LoadSymbol(api.lib, "dcmi_get_device_chip_info", api.chip_info);
  if (!ok) {
    dlclose(api.lib);
    return Unavailable(
        fmt::format("{} lacks DCMI functions this backend needs (update the "
                    "Ascend driver)",
                    library));
  }
  LoadSymbol(api.lib, "dcmi_get_device_pcie_info", api.pcie_info);
  LoadSymbol(api.lib, "dcmi_get_device_logic_id", api.logic_id);
  LoadSymbol(api.lib, "dcmi_get_device_network_health", api.network_health);
  int rc = api.init();
  if (rc != kDcmiOk) {
    dlclose(api.lib);
    return Unavailable(fmt::format("dcmi_init failed ({})", rc));
  }
  return std::unique_ptr<ChipSource>(std::make_unique<DcmiSource>(api, clock));
}

}  // namespace anxin::device::ascend
