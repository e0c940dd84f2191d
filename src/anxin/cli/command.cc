#include "anxin/cli/command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "anxin/cli/version.h"

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

Status BuildApp(CLI::App& app, ParsedCommandLine* parsed) {
  app.set_version_flag("--version", std::string("anxin ") + kVersion);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--config", parsed->global.config_path,
                 "global configuration file (YAML, docs/configuration.md); env ANXIN_CONFIG");
  app.add_option("--log-level", parsed->level_flag,
                 "trace, debug, info, warn, error or off (default info); env ANXIN_LOG_LEVEL");
  app.add_option("--log-format", parsed->format_flag,
                 "text or json (default text); env ANXIN_LOG_FORMAT");
  app.add_flag("--json", parsed->global.json, "machine-readable JSON on stdout");

  std::map<std::string, CLI::App*> apps;
  const std::vector<CommandSpec> specs = RegisteredCommands();
  for (const auto& spec : specs) {
    // A group none of whose commands is built in is left out.
    if (!spec.setup && std::none_of(specs.begin(), specs.end(), [&](const CommandSpec& m) {
          return m.name.starts_with(spec.name + " ");
        })) {
      continue;
    }
    // "bench comm": the command "comm" inside the group "bench", which sorts
    // (and so is added) before its members.
    CLI::App* parent = &app;
    std::string leaf = spec.name;
    if (auto space = spec.name.rfind(' '); space != std::string::npos) {
      auto it = apps.find(spec.name.substr(0, space));
      if (it == apps.end()) {
        return MakeError(ErrorCode::kInternal,
                         "internal: command '" + spec.name + "' has no group");
      }
      parent = it->second;
      leaf = spec.name.substr(space + 1);
    }
    CLI::App* sub = parent->add_subcommand(leaf, spec.summary);
    apps[spec.name] = sub;
    if (!spec.setup) {
      sub->require_subcommand(1);
      continue;
    }
    CommandMain run = spec.setup(*sub);
    sub->callback([parsed, run] { parsed->chosen = run; });
  }
  return Ok();
}

int ReportError(const Error& error) {
  std::fprintf(stderr, "error: %s\n", error.Describe().c_str());
  return ExitCodeFor(error);
}

std::string NearestName(const std::string& word, const std::vector<std::string>& names) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = 3;
  for (const std::string& name : names) {
    size_t d = (!word.empty() && name.starts_with(word)) ? 0 : distance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

namespace {

// The option named by token ("--config" or "--config=x") in app or the apps above it.
const CLI::Option* FindOption(const CLI::App* app, const std::string& token) {
  const std::string name = token.substr(0, token.find('='));
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* o = app->get_option_no_throw(name)) return o;
  }
  return nullptr;
}

}  // namespace

int ReportParseError(CLI::App& app, const CLI::ParseError& e,
                     const std::vector<std::string>& args) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  // Walk the command words to find the first one that names no command.
  CLI::App* current = &app;
  std::string path = app.get_name();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") break;
    if (token.size() > 1 && token[0] == '-') {
      const CLI::Option* option = FindOption(current, token);
      if (option != nullptr && token.find('=') == std::string::npos &&
          option->get_items_expected_max() > 0) {
        ++i;  // its value
      }
      continue;
    }
    auto found = current->get_subcommands([&](CLI::App* sub) { return sub->get_name() == token; });
    if (!found.empty()) {
      current = found.front();
      path += " " + token;
      continue;
    }
    if (current->get_require_subcommand_min() > 0) {
      std::vector<std::string> names;
      for (const CLI::App* sub : current->get_subcommands([](CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
      }
      std::string nearest = NearestName(token, names);
      std::fprintf(stderr, "error: unknown command '%s'%s%s; see '%s --help'\n", token.c_str(),
                   path == app.get_name() ? "" : (" for '" + path + "'").c_str(),
                   nearest.empty() ? "" : (" (did you mean '" + nearest + "'?)").c_str(),
                   path.c_str());
      return kExitUsage;
    }
  }
  // CLI11's own message, on one line.
  std::string message = e.what();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  if (current->get_require_subcommand_min() > 0 && current != &app &&
      message.find("subcommand") != std::string::npos) {
    std::vector<std::string> names;
    for (const CLI::App* sub : current->get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
    }
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    message = "'" + path + "' needs a command: " + list;
  } else if (current == &app && message.find("subcommand") != std::string::npos) {
    message = "a command is required";
  }
  std::fprintf(stderr, "error: %s; see '%s --help'\n", message.c_str(), path.c_str());
  return kExitUsage;
}

}  // namespace anxin::cli
