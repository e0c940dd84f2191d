// The lab's per-fault table: for every fault of the plan, when it was
// injected, when its alert fired in Prometheus, when the card reached the
// Feishu sink, when anxin run decided to recover, when every node was
// stepping again and when the resolved card came. Built from what the lab
// observed (Prometheus's alerts, the sink's cards, the nodes' step lines and
// the supervisors' journals); printed as text and written as JSON.
//
//   ClusterShape shape{.nodes = 4};
//   ANXIN_ASSIGN_OR_RETURN(FaultPlan plan, LoadFaultPlan("examples/lab/faults.yaml", shape));
//   std::vector<FaultRow> rows = PlanRows(plan, /*ranks_per_node=*/1);
//   Observations observations;                 // Prometheus, the sink, the nodes: now
//   UpdateRows(observations, rows);            // as observations come in
//   std::printf("%s", FormatReport(rows, observations.cards).c_str());
//
// Thread safety: pure functions over values.
#ifndef ANXIN_LAB_REPORT_H_
#define ANXIN_LAB_REPORT_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/lab/faults.h"
#include "anxin/run/journal.h"

namespace anxin::lab {

// One alert of a card the sink received (a card may hold several).
struct CardAlert {
  double time = 0;     // unix seconds the sink got it
  std::string status;  // "firing" | "resolved"
  std::string alertname;
  std::string node;
  std::string device;  // "" when the alert names none
  std::string since;   // the card's "Since:" text
  std::string text;    // the alert's text on the card, as shown
};

// Reads a Feishu/Lark bot message (interactive card or text) into its
// alerts. A message that is neither -> kInvalidArgument.
Result<std::vector<CardAlert>> ParseCard(const std::string& body, double time);

// An alert as Prometheus's /api/v1/alerts lists it.
struct PromAlert {
  std::string alertname, node, device, state;  // state: "pending" | "firing"
};

// One node's steps as the lab saw them: a step line's time.
struct NodeSteps {
  std::vector<double> times;  // unix seconds of each step line, in order (capped)
};

struct Observations {
  std::vector<PromAlert> alerts;  // Prometheus now
  double now = 0;
  std::vector<CardAlert> cards;  // every card alert, in arrival order
  // Per node (by index): the supervisor's journal, and its step lines.
  std::vector<std::vector<run::Incident>> incidents;
  std::vector<NodeSteps> steps;
  std::vector<bool> node_up;  // false while a node is lost
};

struct FaultRow {
  int fault = 0;           // index in the plan
  std::string kind;        // FaultKindName
  std::string fault_text;  // DescribeFault
  std::string node;
  int npu = -1;            // device faults
  std::string alert;       // the Prometheus alert, or AnxinRunFault (anxin run's notify step)
  bool prometheus = true;  // the alert comes from the shipped rules
  bool recovery_expected = false;
  bool resolve_expected = true;
  double injected = -1;  // unix seconds; -1 until injected
  double firing = -1;
  double card = -1;
  std::string card_text;
  double recovery = -1;
  std::string recovery_text;
  int generation = -1;
  double stepping = -1;
  double resolved = -1;
  bool done = false;
};

// The rows the plan calls for: one per expected alert of each fault, or one
// AnxinRunFault row for a fault only anxin run reports.
std::vector<FaultRow> PlanRows(const FaultPlan& plan, int ranks_per_node);

// Fills in what the observations show (never clears what is set).
void UpdateRows(const Observations& obs, std::vector<FaultRow>& rows);

// Cards delivered more than once (the same status, alert, node, device and
// start), as "FIRING AnxinLinkDown node-3 NPU 0 (2 times)".
std::vector<std::string> DuplicateCards(const std::vector<CardAlert>& cards);

// The table (text) and the document `anxin lab report --json` prints.
std::string FormatReport(const std::vector<FaultRow>& rows, const std::vector<CardAlert>& cards);
nlohmann::json ReportToJson(const std::vector<FaultRow>& rows, const std::vector<CardAlert>& cards);
Result<std::vector<FaultRow>> RowsFromJson(const nlohmann::json& j);
Result<std::vector<CardAlert>> CardsFromJson(const nlohmann::json& j);

}  // namespace anxin::lab

#endif  // ANXIN_LAB_REPORT_H_
