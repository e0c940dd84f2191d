// The scenario files of examples/scenarios/, compiled into the program by
// CMake (builtin_scenarios.cc is generated from them at configure time).
#ifndef ANXIN_DEVICE_SIM_BUILTIN_SCENARIOS_H_
#define ANXIN_DEVICE_SIM_BUILTIN_SCENARIOS_H_

#include <span>
#include <string_view>

namespace anxin::device::sim::internal {

struct BuiltinScenarioText {
  std::string_view name;  // file name without .yaml
  std::string_view yaml;
};

std::span<const BuiltinScenarioText> BuiltinScenarios();

}  // namespace anxin::device::sim::internal

#endif  // ANXIN_DEVICE_SIM_BUILTIN_SCENARIOS_H_
