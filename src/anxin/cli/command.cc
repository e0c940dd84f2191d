#include "anxin/cli/command.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace anxin::cli {
namespace {

std::map<std::string, CommandSpec>& Registry() {
  static auto* registry = new std::map<std::string, CommandSpec>();
  return *registry;
}

}  // namespace

bool RegisterCommand(CommandSpec spec) {
  std::string name = spec.name;
  Registry().emplace(std::move(name), std::move(spec));
  return true;
}

bool RegisterCommandGroup(std::string name, std::string summary) {
  return RegisterCommand({std::move(name), std::move(summary), nullptr});
}

std::vector<CommandSpec> RegisteredCommands() {
  std::vector<CommandSpec> out;
  for (const auto& [name, spec] : Registry()) out.push_back(spec);
  return out;
}

int ReportError(const Error& error) {
  std::fprintf(stderr, "error: %s\n", error.Describe().c_str());
  return ExitCodeFor(error);
}

}  // namespace anxin::cli
