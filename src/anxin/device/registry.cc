#include "anxin/device/registry.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "anxin/device/ascend/ascend_backend.h"
#include "anxin/device/nvml/nvml_backend.h"
#include "anxin/device/sim/scenario.h"
#include "anxin/device/sim/sim_backend.h"

namespace anxin::device {
namespace {

struct Entry {
  std::string summary;
  BackendFactory factory;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry, std::less<>> entries;
};

Result<std::unique_ptr<DeviceBackend>> MakeSim(const BackendOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(sim::Scenario scenario, sim::ResolveScenario(options.scenario));
  Clock& clock = options.clock ? *options.clock : RealClock();
  return std::unique_ptr<DeviceBackend>(
      std::make_unique<sim::SimBackend>(std::move(scenario), clock));
}

Result<std::unique_ptr<DeviceBackend>> MakeNvml(const BackendOptions& options) {
  return nvml::MakeNvmlBackend({}, options.clock ? *options.clock : RealClock());
}

Result<std::unique_ptr<DeviceBackend>> MakeAscend(const BackendOptions& options) {
  return ascend::MakeAscendBackend({}, options.clock ? *options.clock : RealClock());
}

// The built-in backends are listed here rather than registered from static
// initialisers, which a static library's linker would drop.
Registry& TheRegistry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->entries.emplace(
        "sim", Entry{"simulated devices driven by a scenario file (--scenario)", MakeSim});
    reg->entries.emplace(
        "ascend", Entry{"Huawei Ascend NPUs through DCMI, or npu-smi and hccn_tool", MakeAscend});
    reg->entries.emplace("nvml",
                         Entry{"NVIDIA GPUs through the driver's libnvidia-ml.so.1", MakeNvml});
    return reg;
  }();
  return *r;
}

}  // namespace

void RegisterBackend(std::string name, std::string summary, BackendFactory factory) {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  r.entries.insert_or_assign(std::move(name), Entry{std::move(summary), std::move(factory)});
}

Result<std::unique_ptr<DeviceBackend>> CreateBackend(std::string_view name,
                                                     const BackendOptions& options) {
  BackendFactory factory;
  {
    Registry& r = TheRegistry();
    std::lock_guard lock(r.mu);
    auto it = r.entries.find(name);
    if (it == r.entries.end()) {
      std::string known;
      for (const auto& [n, e] : r.entries) known += (known.empty() ? "" : ", ") + n;
      return InvalidArgument(fmt::format("unknown device backend '{}' (known: {})", name, known));
    }
    factory = it->second.factory;
  }
  return factory(options);
}

Result<std::unique_ptr<DeviceBackend>> CreateConfiguredBackend(std::string_view flag_backend,
                                                               std::string_view flag_scenario,
                                                               const GlobalConfig& config,
                                                               Clock* clock) {
  std::string_view name = !flag_backend.empty() ? flag_backend : config.device.backend;
  if (name.empty()) name = kDefaultBackend;
  const std::string_view scenario = !flag_scenario.empty() ? flag_scenario : config.device.scenario;
  auto backend = CreateBackend(name, {.scenario = std::string(scenario), .clock = clock});
  if (!backend) {
    // A scenario file that cannot be what was meant names the flag that gave it.
    Error e = backend.error();
    const bool input = e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kNotFound;
    if (input && !flag_scenario.empty() && name == "sim") e.With("--scenario");
    return std::unexpected(std::move(e));
  }
  return backend;
}

std::vector<BackendEntry> RegisteredBackends() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  std::vector<BackendEntry> out;
  for (const auto& [n, e] : r.entries) out.push_back({n, e.summary});
  return out;
}

}  // namespace anxin::device
