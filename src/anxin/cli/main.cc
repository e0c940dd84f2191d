// The `anxin` program: global flags, then one registered subcommand.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "anxin/base/log.h"
#include "anxin/cli/command.h"
#include "anxin/cli/version.h"

int main(int argc, char** argv) {
  using namespace anxin::cli;
  CLI::App app("anxin (安心): operations toolkit for accelerator clusters", "anxin");
  app.set_version_flag("--version", std::string("anxin ") + kVersion);
  app.require_subcommand(1);
  app.fallthrough();

  GlobalOptions global;
  global.log_level = "info";
  global.log_format = "text";
  if (const char* env = std::getenv("ANXIN_CONFIG")) global.config_path = env;
  if (const char* env = std::getenv("ANXIN_LOG_LEVEL")) global.log_level = env;
  if (const char* env = std::getenv("ANXIN_LOG_FORMAT")) global.log_format = env;
  app.add_option("--config", global.config_path, "configuration file (YAML); env ANXIN_CONFIG")
      ->check(CLI::ExistingFile);
  app.add_option("--log-level", global.log_level,
                 "trace, debug, info, warn, error or off; env ANXIN_LOG_LEVEL");
  app.add_option("--log-format", global.log_format, "text or json; env ANXIN_LOG_FORMAT");
  app.add_flag("--json", global.json, "machine-readable JSON on stdout");

  CommandMain chosen;
  for (auto& spec : RegisteredCommands()) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
    CommandMain run = spec.setup(*sub);
    sub->callback([&chosen, run] { chosen = run; });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (auto st = anxin::InitLogging(global.log_level, global.log_format); !st) {
    return ReportError(st.error());
  }
  if (!chosen) return kExitUsage;
  return chosen(global);
}
