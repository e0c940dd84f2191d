// `anxin incidents [--state-dir DIR] [--json]`: the recoveries `anxin run`
// journaled, with per-phase durations and time to recovery. Docs:
// docs/recovery.md.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/run/journal.h"
#include "anxin/run/options.h"

namespace anxin::cli::incidents_cmd {
namespace {

struct Options {
  std::string state_dir;
  bool json = false;
};

int Run(const Options& o, const GlobalOptions& g) {
  auto state = run::ResolveStateDir(o.state_dir, g.config);
  if (!state) return ReportError(state.error());
  const std::string& dir = state->dir;
  // A mistyped directory must not read as a clean history.
  if (auto s = RequireDirectory(dir, state->origin); !s) {
    return ReportError(
        Error(s.error().code(), s.error().message() +
                                    ": give the directory anxin run kept its journal in (its "
                                    "--state-dir)"));
  }
  auto incidents = run::ReadIncidents(dir);
  if (!incidents) return ReportError(incidents.error());
  if (o.json || g.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const run::Incident& in : *incidents) out.push_back(run::IncidentToJson(in));
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  if (incidents->empty()) {
    std::printf("no incidents in %s\n", dir.c_str());
    return kExitOk;
  }
  std::fputs(run::FormatIncidentTable(*incidents).c_str(), stdout);
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("--state-dir", o->state_dir,
                 "the directory given to anxin run (default: run.state_dir, else .anxin/run)");
  app.add_flag("--json", o->json, "print the incident records as a JSON array");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(incidents, "recoveries anxin run made, phase by phase", Setup);

}  // namespace
}  // namespace anxin::cli::incidents_cmd
