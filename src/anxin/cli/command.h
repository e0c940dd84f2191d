// The registry of `anxin` subcommands.
//
// Each subcommand lives in its own file, src/anxin/cli/NAME_cmd.cc, and
// registers itself at start-up:
//
//   namespace {
//   struct Opts { std::string scenario; bool watch = false; };
//   anxin::cli::CommandMain Setup(CLI::App& app) {
//     auto opts = std::make_shared<Opts>();
//     app.add_option("--scenario", opts->scenario, "scenario YAML file");
//     return [opts](const anxin::cli::GlobalOptions& g) -> int { ...; return 0; };
//   }
//   ANXIN_REGISTER_COMMAND(devices, "show devices like npu-smi info", Setup);
//   }  // namespace
//
// The returned function runs after parsing and returns the exit status
// (exit_codes.h). Commands print results to stdout and diagnostics to stderr.
#ifndef ANXIN_CLI_COMMAND_H_
#define ANXIN_CLI_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/base/global_config.h"
#include "anxin/cli/exit_codes.h"

namespace anxin::cli {

// Options every subcommand understands; set before the command runs.
struct GlobalOptions {
  std::string config_path;   // --config FILE (or ANXIN_CONFIG)
  std::string log_level;     // --log-level
  std::string log_format;    // --log-format text|json
  bool json = false;         // --json: machine-readable output on stdout
  // The merged global configuration (file < ANXIN_* environment < flags;
  // docs/configuration.md). log_level and log_format above hold the same
  // values as config.log.
  GlobalConfig config;
};

using CommandMain = std::function<int(const GlobalOptions&)>;
using CommandSetup = std::function<CommandMain(CLI::App&)>;

struct CommandSpec {
  std::string name;
  std::string summary;
  CommandSetup setup;
};

// Adds a command; returns true so it can initialise a static.
bool RegisterCommand(CommandSpec spec);

// All registered commands, sorted by name.
std::vector<CommandSpec> RegisteredCommands();

// Prints "error: <description>" to stderr and returns the exit code for it.
int ReportError(const Error& error);

}  // namespace anxin::cli

#define ANXIN_REGISTER_COMMAND(name, summary, setup)                         \
  [[maybe_unused]] const bool anxin_registered_command_##name =              \
      ::anxin::cli::RegisterCommand({#name, summary, setup})

#endif  // ANXIN_CLI_COMMAND_H_
