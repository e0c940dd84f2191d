// Scenario files of the `sim` device backend: which devices a simulated node
// has, what they read when all is well, and what goes wrong when.
//
//   ANXIN_ASSIGN_OR_RETURN(Scenario s, LoadScenario("examples/scenarios/demo.yaml"));
//   ANXIN_ASSIGN_OR_RETURN(Scenario d, BuiltinScenario("default"));  // 8 x Ascend910C
//
// Every problem in a file is an error "file:line:col: key.path: problem"
// (kInvalidArgument); a missing file is kNotFound. The file format is
// documented key by key in docs/devices.md.
#ifndef ANXIN_DEVICE_SIM_SCENARIO_H_
#define ANXIN_DEVICE_SIM_SCENARIO_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"
#include "anxin/device/models.h"

namespace anxin::device::sim {

// What a device reads with no event acting on it.
struct Baseline {
  double temperature_celsius = 0;
  double power_watts = 0;
  double utilisation_percent = 0;
  uint64_t hbm_used_bytes = 0;
};

// Amplitude of the smooth random wobble on each reading (0 = none), and how
// often it picks a new direction.
struct Noise {
  double temperature_celsius = 0;
  double power_watts = 0;
  double utilisation_percent = 0;
  uint64_t hbm_used_bytes = 0;
  double period_seconds = 1;
};

struct ResetBehaviour {
  double duration_seconds = 0;  // how long Reset() takes
  int fail_first = 0;           // the first K resets of the device fail
};

struct SimDevice {
  DeviceInfo info;
  ModelSpec model;
  Baseline baseline;
  Noise noise;
  ResetBehaviour reset;
  int ports = 1;
};

enum class EventKind {
  kTemperatureRamp,  // to, over
  kHbmLeak,          // rate (bytes/s), [duration]
  kHbmStep,          // bytes (may be negative)
  kErrorRaise,       // code, severity, text
  kErrorClear,       // [code]: one code, or all
  kLinkDown,         // port, [duration]
  kLinkUp,           // port
  kHang,             // [utilisation], [duration]: readings go flat
  kDeviceLost,       // the device falls off the bus until reset
  kEccErrors,        // single_bit, double_bit: added to the counters
};
std::string_view EventKindName(EventKind k);  // the YAML spelling: "temperature_ramp"

inline constexpr double kForever = std::numeric_limits<double>::infinity();

struct SimEvent {
  double at_seconds = 0;
  int device = 0;
  EventKind kind = EventKind::kTemperatureRamp;
  double to_celsius = 0;
  double over_seconds = 0;
  double rate_bytes_per_second = 0;
  int64_t step_bytes = 0;
  double duration_seconds = kForever;
  std::string code;
  Severity severity = Severity::kMajor;
  std::string text;
  int port = 0;
  double hang_utilisation = -1;  // < 0: freeze at the value the hang began with
  uint64_t single_bit = 0;
  uint64_t double_bit = 0;
  std::string where;  // "file:line:col" of the event, for messages
};

// Operations that a scenario can declare unsupported, to stand in for a
// backend that lacks them.
struct Capabilities {
  bool reset = true;
  bool clear_memory = true;
  bool fault_events = true;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file name, or "builtin:NAME"
  uint64_t seed = 1;
  std::vector<SimDevice> devices;
  std::vector<SimEvent> events;  // by time; file order among equal times
  Capabilities capabilities;
};

Result<Scenario> ParseScenario(const ConfigNode& root);
Result<Scenario> ParseScenarioText(std::string_view yaml, std::string source_name);
Result<Scenario> LoadScenario(const std::string& path);

// The scenarios shipped in examples/scenarios/, compiled in so that the
// program needs no files at run time: "default", "demo", ...
Result<Scenario> BuiltinScenario(std::string_view name);
std::vector<std::string> BuiltinScenarioNames();

// A path to a file, or the name of a built-in scenario when no such file
// exists; "" means "default".
Result<Scenario> ResolveScenario(const std::string& path_or_name);

}  // namespace anxin::device::sim

#endif  // ANXIN_DEVICE_SIM_SCENARIO_H_
