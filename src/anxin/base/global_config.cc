#include "anxin/base/global_config.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>

#include "anxin/base/config.h"

namespace anxin {
namespace {

constexpr std::array<std::string_view, 6> kLogLevels = {"trace", "debug", "info",
                                                        "warn",  "error", "off"};
constexpr std::array<std::string_view, 2> kLogFormats = {"text", "json"};
constexpr std::array<std::string_view, 3> kBackends = {"sim", "nvml", "ascend"};

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
  return Ok();
}

Status SetLogFormat(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (!OneOf(value, kLogFormats)) {
    return Problem(origin,
                   fmt::format("unknown log format '{}': use {}", value, Choices(kLogFormats)));
  }
  config.log.format = value;
  return Ok();
}

Status SetDeviceBackend(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (!OneOf(value, kBackends)) {
    return Problem(origin,
                   fmt::format("unknown device backend '{}': use {}", value, Choices(kBackends)));
  }
  config.device.backend = value;
  return Ok();
}

Status SetScenario(GlobalConfig& config, std::string_view value, std::string_view origin) {
  if (value.find('\0') != std::string_view::npos) {
    return Problem(origin, "scenario path contains a NUL byte");
  }
  config.device.scenario = value;
  return Ok();
}

namespace {

Result<GlobalConfig> FromNode(const ConfigNode& root) {
  GlobalConfig config;
  config.source = root.source();
  ANXIN_TRY(root.CheckKeys({"log", "device"}));
  if (auto log = root.Find("log")) {
    ANXIN_TRY(log->CheckKeys({"level", "format"}));
    ANXIN_TRY(ReadString(*log, "level", config, SetLogLevel));
    ANXIN_TRY(ReadString(*log, "format", config, SetLogFormat));
  }
  if (auto device = root.Find("device")) {
    ANXIN_TRY(device->CheckKeys({"backend", "scenario"}));
    ANXIN_TRY(ReadString(*device, "backend", config, SetDeviceBackend));
    ANXIN_TRY(ReadString(*device, "scenario", config, SetScenario));
  }
  return config;
}

}  // namespace

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
