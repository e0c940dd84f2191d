// `anxin incidents [--state-dir DIR] [--json]`: the recoveries `anxin run`
// journaled, with per-phase durations and time to recovery. Docs:
// docs/recovery.md.
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/run/journal.h"

namespace anxin::cli {
namespace {

struct Options {
  std::string state_dir;
  bool json = false;
};

// A multi-node recovery: the generation, who opened it, the agreed step and
// each node's times, under the incident's row.
void PrintCluster(const run::ClusterView& c) {
  std::printf("  cluster: generation %d opened by %s (%s), %d node(s), agreed step %s",
              c.generation, c.fault_node.empty() ? "-" : c.fault_node.c_str(),
              c.fault_class.empty() ? "-" : c.fault_class.c_str(), c.nnodes,
              c.agreed_step >= 0 ? std::to_string(c.agreed_step).c_str() : "none (from scratch)");
  if (c.store_pauses > 0) std::printf(", %d store pause(s)", c.store_pauses);
  std::printf("\n");
  for (const run::ClusterNodeTimes& n : c.nodes) {
    std::printf(
        "    %-16s rank %-3d ready %7.2fs  barrier %6.2fs  newest intact %s\n", n.node.c_str(),
        n.node_rank, n.ready_seconds, n.barrier_seconds,
        n.newest_verified >= 0 ? ("step " + std::to_string(n.newest_verified)).c_str() : "-");
  }
}

int Run(const Options& o, const GlobalOptions& g) {
  std::string dir = o.state_dir;
  std::string origin = "--state-dir";
  if (dir.empty()) {
    if (auto section = FindSection(g.config, "run")) {
      auto s = section->Get<std::string>("state_dir", "");
      if (!s) return ReportError(s.error());
      dir = *s;
      origin = "run.state_dir";
    }
  }
  if (dir.empty()) {
    dir = ".anxin/run";
    origin = "the default state directory";
  }
  // A mistyped directory must not read as a clean history.
  if (auto s = RequireDirectory(dir, origin); !s) {
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
  // Columns: the phases in playbook order, seconds each.
  static const char* kPhases[] = {"stop_ranks",     "clear_device_memory", "reset_device",
                                  "wait_links_up",  "select_checkpoint",   "relaunch",
                                  "verify_progress"};
  static const char* kShort[] = {"stop", "clear", "reset", "links", "ckpt", "launch", "verify"};
  std::printf("%-28s %-20s %-5s %-12s", "INCIDENT", "FAULT", "RANK", "OUTCOME");
  for (const char* s : kShort) std::printf(" %7s", s);
  std::printf(" %7s", "other");
  std::printf(" %9s  %s\n", "RECOVERY", "RESUMED");
  for (const run::Incident& in : *incidents) {
    std::map<std::string, double> secs;
    for (const run::StepRecord& s : in.steps) {
      if (s.result != "skipped") secs[s.name] += s.seconds();
    }
    std::printf("%-28s %-20s %-5s %-12s", in.id.c_str(), in.fault.fault_class.c_str(),
                in.fault.rank >= 0 ? std::to_string(in.fault.rank).c_str() : "-",
                in.outcome.c_str());
    for (const char* p : kPhases) {
      auto it = secs.find(p);
      if (it == secs.end()) {
        std::printf(" %7s", "-");
      } else {
        std::printf(" %7.2f", it->second);
        secs.erase(it);
      }
    }
    // Steps of site playbooks (exec, notify) and escalation, together.
    double other = 0;
    for (const auto& [name, s] : secs) other += s;
    if (secs.empty()) {
      std::printf(" %7s", "-");
    } else {
      std::printf(" %7.2f", other);
    }
    if (in.time_to_recovery_seconds >= 0) {
      std::printf(" %8.2fs", in.time_to_recovery_seconds);
    } else {
      std::printf(" %9s", "-");
    }
    std::printf("  %s\n",
                in.resumed_step >= 0 ? ("step " + std::to_string(in.resumed_step)).c_str() : "-");
    if (in.cluster) PrintCluster(*in.cluster);
  }
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
}  // namespace anxin::cli
