// The global configuration of the `anxin` program (docs/configuration.md):
// settings every command shares, read from a YAML file (`--config FILE` or
// ANXIN_CONFIG), then overridden by ANXIN_* environment variables, then by
// command-line flags. Precedence: flag > environment > file > default.
//
//   std::string path = "/etc/anxin/anxin.yaml";                         // "" = defaults
//   ANXIN_ASSIGN_OR_RETURN(GlobalConfig config, LoadGlobalConfig(path));
//   ANXIN_TRY(ApplyEnvironment(config, SystemEnvironment()));
//   std::optional<std::string> level_flag = "debug";                    // when given
//   if (level_flag) ANXIN_TRY(SetLogLevel(config, *level_flag, "--log-level"));
//
// Example file (other modules read their own sections of it, e.g. compare:):
//   log:
//     level: debug        # trace, debug, info, warn, error, off
//     format: json        # text or json
//   device:
//     backend: sim        # a device backend of this build
//     scenario: examples/scenarios/node8.yaml
//
// Thread safety: plain values; load once at start-up.
#ifndef ANXIN_BASE_GLOBAL_CONFIG_H_
#define ANXIN_BASE_GLOBAL_CONFIG_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"

namespace anxin {

struct GlobalConfig {
  struct Log {
    std::string level = "info";   // trace, debug, info, warn, error or off
    std::string format = "text";  // text or json
  };
  struct Device {
    std::string backend = "sim";  // a device backend name: sim, nvml, ascend
    // sim scenario file; "" = the backend's built-in default. A relative path
    // read from a file is made relative to that file's directory.
    std::string scenario;
  };
  Log log;
  Device device;
  // The file it was read from; "" when only defaults and overrides apply.
  std::string source;
  // The whole file, for the sections other modules own (`compare:`, ...);
  // unset when no file was read. See Section().
  std::optional<ConfigNode> root;
  // Where each key's value came from, by key ("log.level"): "file:2:10",
  // "environment variable ANXIN_LOG_LEVEL=warn", "--log-level". Keys still at
  // their default are absent.
  std::map<std::string, std::string> origins;
};

// The top-level sections a configuration file may have: "log" and "device"
// are read here; the others belong to the modules of the same name, which
// validate them when they read them (FindSection). A key not in this list is
// an error ("unknown key 'compar' (known: log, device, compare, ...)"); a
// module that starts reading a new section adds its name in global_config.cc.
const std::vector<std::string_view>& GlobalConfigSections();

// The named module section of the file, with positions for error messages;
// nullopt when there is no file or no such section.
std::optional<ConfigNode> FindSection(const GlobalConfig& config, std::string_view name);

// One key of the effective configuration, for `anxin config`.
struct GlobalConfigEntry {
  std::string key;          // "log.level"
  std::string value;        // "debug"
  std::string origin;       // "default", "g.yaml:2:10", "--log-level", ...
  std::string environment;  // the variable that overrides it: "ANXIN_LOG_LEVEL"
};
// Every key, in documentation order.
std::vector<GlobalConfigEntry> DescribeGlobalConfig(const GlobalConfig& config);

// Reads and validates the file; an empty path gives the defaults. Missing file
// -> kNotFound; bad contents -> kInvalidArgument "file:line:col: key: problem".
Result<GlobalConfig> LoadGlobalConfig(const std::string& path);
// Parses YAML text (tests, or a config held in memory).
Result<GlobalConfig> ParseGlobalConfig(std::string_view yaml, const std::string& source_name);

// Looks up an environment variable; nullopt when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;
// The process environment (getenv).
EnvironmentLookup SystemEnvironment();

// The environment variables that override keys, in documentation order.
struct EnvironmentOverride {
  std::string_view variable;  // "ANXIN_LOG_LEVEL"
  std::string_view key;       // "log.level"
};
const std::vector<EnvironmentOverride>& EnvironmentOverrides();

// Applies ANXIN_LOG_LEVEL, ANXIN_LOG_FORMAT, ANXIN_DEVICE_BACKEND and
// ANXIN_SCENARIO. A bad value -> kInvalidArgument naming the variable:
// "ANXIN_LOG_LEVEL=loud: unknown log level 'loud': use trace, ...".
Status ApplyEnvironment(GlobalConfig& config, const EnvironmentLookup& env);

// Setters that validate; `origin` names where the value came from in errors
// ("--log-level", "ANXIN_LOG_LEVEL=loud", "file:3:10: log.level").
Status SetLogLevel(GlobalConfig& config, std::string_view value, std::string_view origin);
Status SetLogFormat(GlobalConfig& config, std::string_view value, std::string_view origin);
// The device backends this build has; device.backend must name one of them.
// The program sets them from the device registry before reading the
// configuration; until then only "sim", the default, is accepted.
void SetDeviceBackendNames(std::vector<std::string> names);
Status SetDeviceBackend(GlobalConfig& config, std::string_view value, std::string_view origin);
Status SetScenario(GlobalConfig& config, std::string_view value, std::string_view origin);

}  // namespace anxin

#endif  // ANXIN_BASE_GLOBAL_CONFIG_H_
