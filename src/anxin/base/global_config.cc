#include "anxin/base/global_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include "anxin/base/config.h"

namespace anxin {
namespace {

constexpr std::array<std::string_view, 6> kLogLevels = {"trace", "debug", "info",
                                                        "warn",  "error", "off"};
constexpr std::array<std::string_view, 2> kLogFormats = {"text", "json"};

// The device backends this build has (SetDeviceBackendNames); the default
// backend until the program says more.
std::mutex backend_names_mu;
std::vector<std::string>& BackendNames() {
  static auto* names = new std::vector<std::string>{"sim"};
  return *names;
}

template <size_t N>
bool OneOf(std::string_view value, const std::array<std::string_view, N>& allowed) {
  for (std::string_view a : allowed) {
    if (a == value) return true;
  }
  return false;
}

// "a, b or c"
template <size_t N>
std::string Choices(const std::array<std::string_view, N>& allowed) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += (i + 1 == N) ? " or " : ", ";
    out += allowed[i];
  }
  return out;
}

Status Problem(std::string_view origin, std::string problem) {
  if (origin.empty()) return InvalidArgument(std::move(problem));
  return InvalidArgument(fmt::format("{}: {}", origin, problem));
}

// "file:3:10: log.level" for a value read from the file.
std::string OriginOf(const ConfigNode& node) {
  return fmt::format("{}:{}:{}: {}", node.source(), node.line(), node.column(), node.path());
}

// "file:3:10" from an origin "file:3:10: log.level", for `anxin config`.
std::string ShortOrigin(const std::string& origin) {
  size_t cut = origin.rfind(": ");
  return cut == std::string::npos ? origin : origin.substr(0, cut);
}

// Reads one string key through a validating setter, so the file, the
// environment and flags all give the same message for the same mistake.
Status ReadString(const ConfigNode& parent, std::string_view key, GlobalConfig& config,
                  Status (*set)(GlobalConfig&, std::string_view, std::string_view)) {
  std::optional<ConfigNode> child = parent.Find(key);
  if (!child || child->IsNull()) return Ok();
  ANXIN_ASSIGN_OR_RETURN(std::string value, child->As<std::string>());
  return set(config, value, OriginOf(*child));
}

}  // namespace

Status SetLogLevel(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (!OneOf(value, kLogLevels)) {
    return Problem(origin,
                   fmt::format("unknown log level '{}': use {}", value, Choices(kLogLevels)));
  }
  config.log.level = value;
  config.origins["log.level"] = origin.empty() ? "(unnamed)" : std::string(origin);
  return Ok();
}

Status SetLogFormat(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (!OneOf(value, kLogFormats)) {
    return Problem(origin,
                   fmt::format("unknown log format '{}': use {}", value, Choices(kLogFormats)));
  }
  config.log.format = value;
  config.origins["log.format"] = origin.empty() ? "(unnamed)" : std::string(origin);
  return Ok();
}

void SetDeviceBackendNames(std::vector<std::string> names) {
  std::lock_guard lock(backend_names_mu);
  BackendNames() = std::move(names);
}

Status SetDeviceBackend(GlobalConfig& config, std::string_view value, std::string_view origin) {
  {
    std::lock_guard lock(backend_names_mu);
    const std::vector<std::string>& names = BackendNames();
    if (std::find(names.begin(), names.end(), value) == names.end()) {
      std::string list;
      for (size_t i = 0; i < names.size(); ++i) {
        if (i > 0) list += (i + 1 == names.size()) ? " or " : ", ";
        list += names[i];
      }
      return Problem(origin,
                     fmt::format("unknown device backend '{}': this build has {}", value, list));
    }
  }
  config.device.backend = value;
  config.origins["device.backend"] = origin.empty() ? "(unnamed)" : std::string(origin);
  return Ok();
}

Status SetScenario(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (value.find('\0') != std::string_view::npos) {
    return Problem(origin, "scenario path contains a NUL byte");
  }
  config.device.scenario = value;
  config.origins["device.scenario"] = origin.empty() ? "(unnamed)" : std::string(origin);
  return Ok();
}

namespace {

Result<GlobalConfig> FromNode(const ConfigNode& root) {
  GlobalConfig config;
  config.source = root.source();
  config.root = root;
  if (!root.IsMap() && !root.IsNull()) {
    return std::unexpected(
        root.MakeError("expected a map of sections, got " + root.DescribeKind()));
  }
  ANXIN_TRY(root.CheckKeys(GlobalConfigSections()));
  ANXIN_ASSIGN_OR_RETURN(auto entries, root.Entries());
  for (const auto& [key, node] : entries) {
    if (!node.IsMap() && !node.IsNull()) {
      return std::unexpected(node.MakeError("expected a map, got " + node.DescribeKind()));
    }
  }
  if (auto log = root.Find("log")) {
    ANXIN_TRY(log->CheckKeys({"level", "format"}));
    ANXIN_TRY(ReadString(*log, "level", config, SetLogLevel));
    ANXIN_TRY(ReadString(*log, "format", config, SetLogFormat));
  }
  if (auto device = root.Find("device")) {
    ANXIN_TRY(device->CheckKeys({"backend", "scenario"}));
    ANXIN_TRY(ReadString(*device, "backend", config, SetDeviceBackend));
    ANXIN_TRY(ReadString(*device, "scenario", config, SetScenario));
    // A relative path in a file means "next to this file", so that
    // /etc/anxin/anxin.yaml can say `scenario: node8.yaml` wherever anxin runs.
    std::string& scenario = config.device.scenario;
    size_t slash = config.source.rfind('/');
    if (!scenario.empty() && scenario.front() != '/' && slash != std::string::npos) {
      scenario = config.source.substr(0, slash + 1) + scenario;
    }
  }
  return config;
}

}  // namespace

const std::vector<std::string_view>& GlobalConfigSections() {
  // log and device are read here; each other one is read by the module of
  // that name (FindSection), which adds it here when it starts reading one.
  static const auto* sections =
      new std::vector<std::string_view>{"log", "device", "compare", "agent", "run", "notify"};
  return *sections;
}

std::optional<ConfigNode> FindSection(const GlobalConfig& config, std::string_view name) {
  if (!config.root) return std::nullopt;
  std::optional<ConfigNode> section = config.root->Find(name);
  if (!section || section->IsNull()) return std::nullopt;
  return section;
}

Result<GlobalConfig> ParseGlobalConfig(std::string_view yaml, const std::string& source_name) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(yaml, source_name));
  return FromNode(root);
}

Result<GlobalConfig> LoadGlobalConfig(const std::string& path) {
  if (path.empty()) return GlobalConfig{};
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  return FromNode(root);
}

EnvironmentLookup SystemEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

const std::vector<EnvironmentOverride>& EnvironmentOverrides() {
  static const auto* overrides = new std::vector<EnvironmentOverride>{
      {"ANXIN_LOG_LEVEL", "log.level"},
      {"ANXIN_LOG_FORMAT", "log.format"},
      {"ANXIN_DEVICE_BACKEND", "device.backend"},
      {"ANXIN_SCENARIO", "device.scenario"},
  };
  return *overrides;
}

std::vector<GlobalConfigEntry> DescribeGlobalConfig(const GlobalConfig& config) {
  std::vector<GlobalConfigEntry> out = {
      {"log.level", config.log.level, "", "ANXIN_LOG_LEVEL"},
      {"log.format", config.log.format, "", "ANXIN_LOG_FORMAT"},
      {"device.backend", config.device.backend, "", "ANXIN_DEVICE_BACKEND"},
      {"device.scenario", config.device.scenario, "", "ANXIN_SCENARIO"},
  };
  for (auto& e : out) {
    auto it = config.origins.find(e.key);
    if (it == config.origins.end()) {
      e.origin = "default";
    } else if (it->second.starts_with("environment variable ")) {
      // "environment variable ANXIN_X=v" -> "ANXIN_X"
      std::string rest = it->second.substr(21);
      e.origin = rest.substr(0, rest.find('='));
    } else {
      e.origin = ShortOrigin(it->second);
    }
  }
  return out;
}

Status ApplyEnvironment(GlobalConfig& config, const EnvironmentLookup& env) {
  using Setter = Status (*)(GlobalConfig&, std::string_view, std::string_view);
  static constexpr std::array<std::pair<std::string_view, Setter>, 4> kSetters = {{
      {"ANXIN_LOG_LEVEL", SetLogLevel},
      {"ANXIN_LOG_FORMAT", SetLogFormat},
      {"ANXIN_DEVICE_BACKEND", SetDeviceBackend},
      {"ANXIN_SCENARIO", SetScenario},
  }};
  for (const auto& [name, set] : kSetters) {
    std::optional<std::string> value = env(name);
    if (!value) continue;
    ANXIN_TRY(set(config, *value, fmt::format("environment variable {}={}", name, *value)));
  }
  return Ok();
}

}  // namespace anxin
