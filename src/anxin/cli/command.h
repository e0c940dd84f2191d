// The registry of `anxin` subcommands.
//
// Each subcommand lives in its own file, src/anxin/cli/NAME_cmd.cc, keeps its
// names in namespace anxin::cli::NAME_cmd (the command files compile together
// in unity batches, where two files' Opts and Setup would meet), and registers
// itself at start-up:
//
//   namespace {
//   struct Opts { std::string scenario; bool watch = false; };
//   anxin::cli::CommandMain Setup(CLI::App& app) {
//     auto opts = std::make_shared<Opts>();
//     app.add_option("--scenario", opts->scenario, "scenario YAML file");
//     return [opts](const anxin::cli::GlobalOptions& g) -> int {
//       std::printf("%s%s\n", opts->scenario.c_str(), g.json ? " (json)" : "");
//       return 0;
//     };
//   }
//   ANXIN_REGISTER_COMMAND(devices, "show devices like npu-smi info", Setup);
//   }  // namespace
//
// The returned function runs after parsing and returns the exit status
// (exit_codes.h). Commands print results to stdout and diagnostics to stderr.
//
// Commands that share a parent (`anxin bench comm`, `anxin bench serve`) each
// live in a file of their own, and the parent is a group with a summary:
//
//   ANXIN_REGISTER_COMMAND_GROUP(bench, "stress tests and load tests");   // bench_cmd.cc
//   ANXIN_REGISTER_SUBCOMMAND(bench, comm, "collective stress tests", Setup);
//
// A group runs nothing itself: `anxin bench` alone is a usage error that
// lists its commands.
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
  std::string config_path;  // --config FILE (or ANXIN_CONFIG)
  std::string log_level;    // --log-level
  std::string log_format;   // --log-format text|json
  bool json = false;        // --json: machine-readable output on stdout
  // The merged global configuration (file < ANXIN_* environment < flags;
  // docs/configuration.md). log_level and log_format above hold the same
  // values as config.log.
  GlobalConfig config;
};

using CommandMain = std::function<int(const GlobalOptions&)>;
using CommandSetup = std::function<CommandMain(CLI::App&)>;

struct CommandSpec {
  // "devices", or "bench comm" for a command inside the group "bench".
  std::string name;
  std::string summary;
  // Unset for a group.
  CommandSetup setup;
};

// Adds a command; returns true so it can initialise a static.
bool RegisterCommand(CommandSpec spec);
// Adds a group of commands (a CommandSpec without setup).
bool RegisterCommandGroup(std::string name, std::string summary);

// All registered commands and groups, sorted by name (so a group comes
// before its members).
std::vector<CommandSpec> RegisteredCommands();

// What parsing the command line fills in (BuildApp).
struct ParsedCommandLine {
  GlobalOptions global;
  std::string level_flag;   // --log-level as given
  std::string format_flag;  // --log-format as given
  CommandMain chosen;       // the command the arguments selected
};

// Builds the whole `anxin` program's CLI11 app into app (global flags and every
// registered command) without running anything; parsing fills *parsed, whose
// address must stay valid while app is used. The sweep of every numeric flag
// (tests/cli/flag_sweep_test.cc) walks the app this builds.
[[nodiscard]] Status BuildApp(CLI::App& app, ParsedCommandLine* parsed);

// Prints "error: <description>" to stderr and returns the exit code for it.
int ReportError(const Error& error);

// For a failed parse of args (argv without the program name) by app: help and
// version requests are printed as asked (status 0); every other problem is one
// line on stderr in the format of docs/exit-codes.md, naming the command that
// was not understood and the nearest known name, e.g.
//   error: unknown command 'devics' (did you mean 'devices'?); see 'anxin --help'
// and returns kExitUsage.
int ReportParseError(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args);

// The name in `names` nearest to `word` (edit distance at most 2, or a name
// that starts with it); "" when none is near.
std::string NearestName(const std::string& word, const std::vector<std::string>& names);

}  // namespace anxin::cli

#define ANXIN_REGISTER_COMMAND(name, summary, setup)            \
  [[maybe_unused]] const bool anxin_registered_command_##name = \
      ::anxin::cli::RegisterCommand({#name, summary, setup})

#define ANXIN_REGISTER_COMMAND_GROUP(name, summary)           \
  [[maybe_unused]] const bool anxin_registered_group_##name = \
      ::anxin::cli::RegisterCommandGroup(#name, summary)

#define ANXIN_REGISTER_SUBCOMMAND(group, name, summary, setup)            \
  [[maybe_unused]] const bool anxin_registered_command_##group##_##name = \
      ::anxin::cli::RegisterCommand({#group " " #name, summary, setup})

#endif  // ANXIN_CLI_COMMAND_H_
