// Device backends by name: "sim" (the default, a simulated node driven by a
// scenario file); hardware backends (nvml, ascend) join the same table.
//
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBackend> b,
//                          CreateBackend("sim", {.scenario = "examples/scenarios/demo.yaml"}));
//   // A command's --backend/--scenario over the configuration's device: section:
//   ANXIN_ASSIGN_OR_RETURN(b, CreateConfiguredBackend(/*flag_backend=*/"", /*flag_scenario=*/"",
//                                                     GlobalConfig{}));
//
// Thread safety: RegisterBackend and CreateBackend may be called from any
// thread.
#ifndef ANXIN_DEVICE_REGISTRY_H_
#define ANXIN_DEVICE_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/error.h"
#include "anxin/base/global_config.h"
#include "anxin/device/backend.h"

namespace anxin::device {

inline constexpr std::string_view kDefaultBackend = "sim";

struct BackendOptions {
  // sim: a scenario file, or the name of a built-in scenario ("" = default).
  std::string scenario;
  // The clock the backend runs on; nullptr = the wall clock. REQUIRES: it
  // outlives the backend.
  Clock* clock = nullptr;
};

using BackendFactory =
    std::function<Result<std::unique_ptr<DeviceBackend>>(const BackendOptions& options)>;

// Adds (or replaces) a backend. The built-in ones are present from the start.
void RegisterBackend(std::string name, std::string summary, BackendFactory factory);

// kInvalidArgument for an unknown name (the message lists the known ones);
// otherwise whatever the backend's factory returns (a bad scenario is
// kInvalidArgument, a missing vendor library kUnavailable).
Result<std::unique_ptr<DeviceBackend>> CreateBackend(std::string_view name,
                                                     const BackendOptions& options);

// The backend a command uses: the flag's name, else the configuration's
// device.backend, else kDefaultBackend; the flag's scenario, else the
// configuration's device.scenario. `clock` as in BackendOptions. A bad
// --scenario of sim says so ("...: --scenario").
Result<std::unique_ptr<DeviceBackend>> CreateConfiguredBackend(std::string_view flag_backend,
                                                               std::string_view flag_scenario,
                                                               const GlobalConfig& config,
                                                               Clock* clock = nullptr);

struct BackendEntry {
  std::string name;
  std::string summary;
};
// Sorted by name.
std::vector<BackendEntry> RegisteredBackends();

}  // namespace anxin::device

#endif  // ANXIN_DEVICE_REGISTRY_H_
