#include "anxin/device/models.h"

#include <strings.h>

#include <array>

#include "anxin/base/strings.h"

namespace anxin::device {
namespace {

// Ascend chips throttle at 95 C (the field report's figure for the 910C);
// NVIDIA data-centre boards start slowing down in the high 80s.
constexpr std::array kModels = {
    ModelSpec{"Ascend910C", "910C", "huawei", 64 * kGiB, 400, 95, 1800, 1600},
    ModelSpec{"Ascend910B2C", "910B2C", "huawei", 64 * kGiB, 400, 95, 1800, 1600},
    ModelSpec{"Ascend910B3", "910B3", "huawei", 64 * kGiB, 400, 95, 1800, 1600},
    ModelSpec{"Ascend910B4", "910B4", "huawei", 32 * kGiB, 350, 95, 1650, 1600},
    ModelSpec{"A100", "A100", "nvidia", 81920 * kMiB, 400, 87, 1410, 1593},
    ModelSpec{"H100", "H100", "nvidia", 81559 * kMiB, 700, 87, 1980, 2619},
    ModelSpec{"H200", "H200", "nvidia", 143771 * kMiB, 700, 87, 1980, 3201},
};

}  // namespace

const ModelSpec* FindModel(std::string_view name) {
  for (const ModelSpec& m : kModels) {
    if (m.name.size() == name.size() && strncasecmp(m.name.data(), name.data(), name.size()) == 0) {
      return &m;
    }
  }
  return nullptr;
}

std::span<const ModelSpec> KnownModels() { return kModels; }

std::string KnownModelNames() {
  std::string out;
  for (const ModelSpec& m : kModels) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace anxin::device
