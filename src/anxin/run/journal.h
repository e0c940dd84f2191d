// The incident journal of `anxin run`: one JSON file per incident under
// STATE_DIR/incidents/, rewritten atomically (fsync, rename) after every
// recovery step, so that what happened survives a crash of the supervisor.
//
//   Incident inc;
//   inc.id = NewIncidentId();
//   inc.fault.summary = "rank 1 exited 1";
//   const std::string dir = "/tmp/anxin-state";
//   ANXIN_TRY(WriteIncident(dir, inc));
//   ANXIN_ASSIGN_OR_RETURN(std::vector<Incident> all, ReadIncidents(dir));
//
// Thread safety: plain functions; one writer per incident.
#ifndef ANXIN_RUN_JOURNAL_H_
#define ANXIN_RUN_JOURNAL_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/run/fault.h"

namespace anxin::run {

struct StepRecord {
  std::string name;  // "stop_ranks", "reset_device", ...
  std::chrono::system_clock::time_point start{};
  std::chrono::system_clock::time_point end{};  // == start while running
  std::string result;                           // "running", "ok", "failed", "skipped"
  std::string detail;                           // what it did or why it failed
  int tries = 0;
  double seconds() const { return std::chrono::duration<double>(end - start).count(); }
};

// A recovery seen by every node of a multi-node job (docs/recovery.md,
// "Many nodes"): who saw the fault, the generation it opened, the step all
// nodes agreed on and how long each node took to be ready.
struct ClusterNodeTimes {
  std::string node;
  int node_rank = -1;            // in the relaunch; -1: left out of it
  double ready_seconds = -1;     // from learning of the fault to ready (stopped, playbook run)
  double barrier_seconds = -1;   // from ready to the barrier closing
  int64_t newest_verified = -1;  // the newest checkpoint step it holds intact
};
struct ClusterView {
  std::string fault_node;   // the node that saw the fault first
  std::string fault_class;  // as that node classed it
  int generation = 0;
  int64_t agreed_step = -1;  // -1: from scratch
  int nnodes = 0;            // nodes in the relaunch
  std::vector<ClusterNodeTimes> nodes;
  int store_pauses = 0;  // decisions this node held back while the store had no quorum
};

struct Incident {
  std::string id;
  std::string job;  // the command line
  int attempt = 0;  // the launch the fault ended
  Fault fault;
  std::vector<StepRecord> steps;
  // "recovering", "recovered", "relaunched" (no verify_progress step),
  // "failed_again", "gave_up" (budget, storm, a failed step), "fatal" (not
  // retryable), "escalated" (a failing device the job cannot do without),
  // "stopped" (asked to stop, or a playbook without relaunch),
  // "supervisor_restarted" (its supervisor died during the recovery).
  std::string outcome = "recovering";
  std::string playbook;    // the playbook that ran
  std::string checkpoint;  // what the relaunch resumed from ("" = from scratch)
  // How the ranks came back: "in-process" (every rank rejoined in its own
  // process), "spare" (warm spares took the place of dead ranks, the rest
  // rejoined in-process), "relaunch" (some or all ranks were started anew);
  // "" for a record older than the field.
  std::string recovery_path;
  int64_t resumed_step = -1;
  // From the fault to the first progress after the relaunch; < 0 until then.
  double time_to_recovery_seconds = -1;
  // From the evidence (the line, the exit) to the detector's report.
  double detection_seconds = -1;
  // Multi-node jobs only.
  std::optional<ClusterView> cluster;
};

// base's FormatRfc3339 with milliseconds, "2026-12-02T13:05:01.250Z", and ""
// for the epoch: a step or fault time that was never set.
std::string FormatRfc3339(std::chrono::system_clock::time_point t);

// "20261202T130501-12345-1": time, supervisor pid, a counter.
std::string NewIncidentId();

nlohmann::json IncidentToJson(const Incident& incident);
Result<Incident> IncidentFromJson(const nlohmann::json& j);

// Writes STATE_DIR/incidents/ID.json atomically, creating the directories.
Status WriteIncident(const std::string& state_dir, const Incident& incident);
// Every incident, oldest first. A missing directory is an empty list; an
// unreadable record -> kDataLoss naming the file.
Result<std::vector<Incident>> ReadIncidents(const std::string& state_dir);

// The table `anxin incidents` prints: a row per incident with the seconds of each playbook phase
// (stop, clear, reset, links, ckpt, launch, verify; an in-process restart's abort_ranks counts as
// stop and its rejoin as launch; site steps and escalation together as "other"), the time to
// recovery and the step resumed; under an in-process or spare recovery a "path:" line with its
// abort and rejoin; under a multi-node incident, its cluster view. "" for none.
std::string FormatIncidentTable(const std::vector<Incident>& incidents);

}  // namespace anxin::run

#endif  // ANXIN_RUN_JOURNAL_H_
