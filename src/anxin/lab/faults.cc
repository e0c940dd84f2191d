// The faults file: parsing and what each fault should cause (faults.h).
#include "anxin/lab/faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "anxin/base/config.h"
#include "anxin/base/file.h"

namespace anxin::lab {
namespace {

struct KindSpelling {
  FaultKind kind;
  std::string_view name;
};
constexpr std::array<KindSpelling, 7> kKinds = {{
    {FaultKind::kTemperature, "temperature"},
    {FaultKind::kHbm, "hbm"},
    {FaultKind::kLinkDown, "link_down"},
    {FaultKind::kHcclError, "hccl_error"},
    {FaultKind::kHang, "hang"},
    {FaultKind::kCrash, "crash"},
    {FaultKind::kLostNode, "lost_node"},
}};

std::string KnownKinds() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

std::string Seconds(double s) {
  if (s == std::floor(s)) return fmt::format("{:.0f} s", s);
  return fmt::format("{:.1f} s", s);
}

Result<LabFault> ParseOne(const ConfigNode& n, const ClusterShape& shape) {
  LabFault f;
  f.where = fmt::format("{}:{}:{}", n.source(), n.line(), n.column());
  if (!n.IsMap())
    return std::unexpected(n.MakeError("expected a map like {at: 40s, kind: crash, node: 1}"));
  ANXIN_ASSIGN_OR_RETURN(ConfigNode kind_node, n.Child("kind"));
  ANXIN_ASSIGN_OR_RETURN(std::string kind, kind_node.As<std::string>());
  const auto* spelling = std::find_if(kKinds.begin(), kKinds.end(),
                                      [&](const KindSpelling& k) { return k.name == kind; });
  if (spelling == kKinds.end()) {
    return std::unexpected(
        kind_node.MakeError("unknown kind '" + kind + "' (known: " + KnownKinds() + ")"));
  }
  f.kind = spelling->kind;
  switch (f.kind) {
    case FaultKind::kTemperature:
      ANXIN_TRY(n.CheckKeys({"at", "kind", "node", "npu", "to", "for"}));
      break;
    case FaultKind::kHbm:
      ANXIN_TRY(n.CheckKeys({"at", "kind", "node", "npu", "to", "for"}));
      break;
    case FaultKind::kLinkDown:
      ANXIN_TRY(n.CheckKeys({"at", "kind", "node", "npu", "port", "for"}));
      break;
    case FaultKind::kHcclError:
    case FaultKind::kHang:
    case FaultKind::kCrash:
      ANXIN_TRY(n.CheckKeys({"at", "kind", "node", "rank"}));
      break;
    case FaultKind::kLostNode:
      ANXIN_TRY(n.CheckKeys({"at", "kind", "node", "for"}));
      break;
  }
  ANXIN_ASSIGN_OR_RETURN(f.at_seconds, n.GetSeconds("at"));
  if (f.at_seconds > 3600) {
    ANXIN_ASSIGN_OR_RETURN(ConfigNode at, n.Child("at"));
    return std::unexpected(at.MakeError("faults start within the first hour (at <= 1h)"));
  }
  ANXIN_ASSIGN_OR_RETURN(f.node, n.GetInRange<int>("node", 0, shape.nodes - 1));
  const bool device = f.kind == FaultKind::kTemperature || f.kind == FaultKind::kHbm ||
                      f.kind == FaultKind::kLinkDown;
  if (device) {
    ANXIN_ASSIGN_OR_RETURN(f.npu, n.GetInRange<int>("npu", 0, shape.npus_per_node - 1));
  }
  if (f.kind == FaultKind::kLinkDown) {
    ANXIN_ASSIGN_OR_RETURN(f.port, n.GetInRange<int>("port", 0, 0, 0));
  }
  if (f.kind == FaultKind::kHcclError || f.kind == FaultKind::kHang ||
      f.kind == FaultKind::kCrash) {
    ANXIN_ASSIGN_OR_RETURN(f.rank, n.GetInRange<int>("rank", 0, shape.ranks_per_node - 1, 0));
  }
  if (f.kind == FaultKind::kTemperature) {
    ANXIN_ASSIGN_OR_RETURN(f.to, n.GetInRange<double>("to", 20.0, 150.0));
  } else if (f.kind == FaultKind::kHbm) {
    ANXIN_ASSIGN_OR_RETURN(f.to, n.GetInRange<double>("to", 0.01, 1.0));
  }
  // Long enough by default for the rule's `for:` to pass and the alert to fire.
  const double default_for = f.kind == FaultKind::kHbm        ? 75
                             : f.kind == FaultKind::kLostNode ? 0
                                                              : 45;
  if (device || f.kind == FaultKind::kLostNode) {
    ANXIN_ASSIGN_OR_RETURN(f.for_seconds, n.GetSeconds("for", default_for));
    if (f.for_seconds > 3600 || (device && f.for_seconds < 1)) {
      ANXIN_ASSIGN_OR_RETURN(ConfigNode fn, n.Child("for"));
      return std::unexpected(fn.MakeError("expected a duration between 1s and 1h"));
    }
    // AnxinAgentDown waits `for: 1m` of failed scrapes; a node back sooner
    // would leave its row waiting for an alert that cannot fire.
    if (f.kind == FaultKind::kLostNode && f.for_seconds > 0 && f.for_seconds < 75) {
      ANXIN_ASSIGN_OR_RETURN(ConfigNode fn, n.Child("for"));
      return std::unexpected(
          fn.MakeError("a node back within 75s never fires AnxinAgentDown (its rule's for: 1m, "
                       "then a scrape and an evaluation); give 75s or more, or 0 to keep it lost"));
    }
  }
  return f;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) {
  for (const auto& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

std::string NodeName(int index) { return "node-" + std::to_string(index); }

Result<FaultPlan> ParseFaultPlan(std::string_view yaml, const std::string& source,
                                 const ClusterShape& shape) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(yaml, source));
  if (!root.IsMap()) {
    return std::unexpected(
        root.MakeError("expected a map with the key 'faults', got " + root.DescribeKind()));
  }
  ANXIN_TRY(root.CheckKeys({"faults"}));
  ANXIN_ASSIGN_OR_RETURN(ConfigNode list, root.Child("faults"));
  if (!list.IsSequence()) {
    return std::unexpected(list.MakeError("expected a list of faults, got " + list.DescribeKind()));
  }
  ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, list.Elements());
  FaultPlan plan;
  plan.source = source;
  for (const ConfigNode& item : items) {
    ANXIN_ASSIGN_OR_RETURN(LabFault f, ParseOne(item, shape));
    plan.faults.push_back(std::move(f));
  }
  std::stable_sort(
      plan.faults.begin(), plan.faults.end(),
      [](const LabFault& a, const LabFault& b) { return a.at_seconds < b.at_seconds; });
  return plan;
}

Result<FaultPlan> LoadFaultPlan(const std::string& path, const ClusterShape& shape) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, "--faults " + path, 1 << 20));
  return ParseFaultPlan(text, path, shape);
}

std::string DescribeFault(const LabFault& f) {
  const std::string node = NodeName(f.node);
  switch (f.kind) {
    case FaultKind::kTemperature:
      return fmt::format("{} NPU {} to {:.0f} C for {}", node, f.npu, f.to, Seconds(f.for_seconds));
    case FaultKind::kHbm:
      return fmt::format("{} NPU {} HBM {:.0f}% used for {}", node, f.npu, f.to * 100,
                         Seconds(f.for_seconds));
    case FaultKind::kLinkDown:
      return fmt::format("{} NPU {} port {} link down for {}", node, f.npu, f.port,
                         Seconds(f.for_seconds));
    case FaultKind::kHcclError:
      return fmt::format("{} rank {}: HCCL error line (EI0006)", node, f.rank);
    case FaultKind::kHang:
      return fmt::format("{} rank {}: hang (stops calling the collective)", node, f.rank);
    case FaultKind::kCrash:
      return fmt::format("{} rank {}: crash (exit 1)", node, f.rank);
    case FaultKind::kLostNode:
      if (f.for_seconds > 0) {
        return fmt::format("{} lost (supervisor and agent killed), back after {}", node,
                           Seconds(f.for_seconds));
      }
      return fmt::format("{} lost (supervisor and agent killed)", node);
  }
  return node;
}

bool NeedsRecovery(const LabFault& f) {
  return f.kind != FaultKind::kTemperature && f.kind != FaultKind::kHbm;
}

std::vector<std::string> ExpectedAlerts(const LabFault& f) {
  // The thresholds of deploy/prometheus/rules/anxin.rules.yml.
  switch (f.kind) {
    case FaultKind::kTemperature:
      if (f.to >= 95) return {"AnxinDeviceTemperatureHigh", "AnxinDeviceTemperatureCritical"};
      if (f.to >= 85) return {"AnxinDeviceTemperatureHigh"};
      return {};
    case FaultKind::kHbm:
      return f.to > 0.90 ? std::vector<std::string>{"AnxinHbmUsageHigh"}
                         : std::vector<std::string>{};
    case FaultKind::kLinkDown:
      return {"AnxinLinkDown"};
    case FaultKind::kLostNode:
      return {"AnxinAgentDown"};
    default:
      return {};
  }
}

}  // namespace anxin::lab
