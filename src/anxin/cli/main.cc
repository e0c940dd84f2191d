// The `anxin` program: global flags, the global configuration, then one
// registered subcommand.
//
// Settings resolve in this order, later ones winning (docs/configuration.md):
// built-in default < configuration file (--config or ANXIN_CONFIG) <
// ANXIN_* environment variables < command-line flags.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/base/global_config.h"
#include "anxin/base/log.h"
#include "anxin/cli/command.h"
#include "anxin/cli/version.h"
#include "anxin/device/registry.h"

namespace {

// Builds the effective configuration from the file, the environment and the
// flags that were given on the command line.
anxin::Result<anxin::GlobalConfig> ResolveConfig(const CLI::App& app,
                                                 const std::string& config_flag,
                                                 const std::string& level_flag,
                                                 const std::string& format_flag) {
  std::string path = config_flag;
  std::string origin = "--config";
  if (app.count("--config") == 0) {
    origin = "ANXIN_CONFIG";
    const char* env = std::getenv("ANXIN_CONFIG");
    if (env != nullptr) path = env;
  }
  anxin::Result<anxin::GlobalConfig> config;
  if (path.empty()) {
    config = anxin::GlobalConfig{};
  } else {
    // Whatever is wrong with the file itself names the flag or variable that
    // gave it; errors in its contents name the file, line and column.
    ANXIN_ASSIGN_OR_RETURN(std::string text, anxin::ReadInputFile(path, origin, 16 << 20));
    config = anxin::ParseGlobalConfig(text, path);
    if (!config) return config;
  }
  ANXIN_TRY(anxin::ApplyEnvironment(*config, anxin::SystemEnvironment()));
  if (app.count("--log-level") > 0) {
    ANXIN_TRY(anxin::SetLogLevel(*config, level_flag, "--log-level"));
  }
  if (app.count("--log-format") > 0) {
    ANXIN_TRY(anxin::SetLogFormat(*config, format_flag, "--log-format"));
  }
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace anxin::cli;
  CLI::App app("anxin (安心): operations toolkit for accelerator clusters", "anxin");
  ParsedCommandLine parsed;
  if (auto built = BuildApp(app, &parsed); !built) {
    std::fprintf(stderr, "error: %s\n", built.error().Describe().c_str());
    return kExitUsage;
  }
  GlobalOptions& global = parsed.global;
  const CommandMain& chosen = parsed.chosen;

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e, std::vector<std::string>(argv + 1, argv + argc));
  }

  // device.backend may name only a backend this build has.
  std::vector<std::string> backends;
  for (const auto& b : anxin::device::RegisteredBackends()) backends.push_back(b.name);
  anxin::SetDeviceBackendNames(std::move(backends));
  auto config = ResolveConfig(app, global.config_path, parsed.level_flag, parsed.format_flag);
  if (!config) return ReportError(config.error());
  global.config = *std::move(config);
  global.config_path = global.config.source;
  global.log_level = global.config.log.level;
  global.log_format = global.config.log.format;
  if (auto st = anxin::InitLogging(global.log_level, global.log_format); !st) {
    return ReportError(st.error());
  }
  // What a bug report needs first: the version and where settings came from.
  spdlog::debug("anxin {}; configuration file: {}", kVersion,
                global.config_path.empty() ? "none" : global.config_path);
  for (const auto& e : anxin::DescribeGlobalConfig(global.config)) {
    spdlog::debug("config {} = '{}' (from {})", e.key, e.value, e.origin);
  }
  if (!chosen) return kExitUsage;
  return chosen(global);
}
