// comm.algo and comm.timeouts: the collective library's algorithm and
// timeouts, read from the ranks' environment.
#include <set>
#include <string>
#include <string_view>

#include "anxin/base/strings.h"
#include "anxin/doctor/check_util.h"
#include "anxin/doctor/qos_env.h"
#include "anxin/doctor/registry.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

constexpr int kRingLimitNodes = 64;

// The inter-node algorithm HCCL_ALGO selects: "level0:NA;level1:ring" -> "ring";
// older releases take a bare name ("ring").
std::string HcclInterNodeAlgo(std::string_view v) {
  for (std::string_view part : Split(v, ';')) {
    part = Trim(part);
    if (part.starts_with("level1:")) return ToLower(Trim(part.substr(7)));
  }
  return v.find(':') == std::string_view::npos ? ToLower(Trim(v)) : "";
}

// NCCL_ALGO lists allowed algorithms ("Ring", "Tree,Ring"); "^X" excludes.
bool NcclRingOnly(std::string_view v) {
  v = Trim(v);
  if (v.empty() || v.front() == '^') return false;
  std::set<std::string> algos;
  for (std::string_view a : Split(v, ',')) algos.insert(ToLower(Trim(a)));
  return algos == std::set<std::string>{"ring"};
}

Finding Algo(const HostFacts& f) {
  Finding r;
  std::vector<std::string> ring;
  if (auto v = f.Env("HCCL_ALGO")) {
    std::string a = HcclInterNodeAlgo(*v);
    if (a == "ring") ring.push_back("HCCL_ALGO=" + *v);
    r.evidence.push_back("HCCL_ALGO=" + *v);
  }
  if (auto v = f.Env("NCCL_ALGO")) {
    if (NcclRingOnly(*v)) ring.push_back("NCCL_ALGO=" + *v);
    r.evidence.push_back("NCCL_ALGO=" + *v);
  }
  std::string nodes = f.job_nodes
                          ? std::to_string(*f.job_nodes) + " nodes (" + f.job_nodes_source + ")"
                          : "node count unknown";
  r.evidence.push_back(nodes);
  r.evidence.push_back("environment: " + f.env_source);
  if (ring.empty()) {
    r.summary =
        r.evidence.size() > 2 ? "no ring-only algorithm forced" : "algorithm left to the library";
    return r;
  }
  if (!f.job_nodes) {
    r.severity = Severity::kSkip;
    r.summary = ring.front() +
                " but the node count is unknown (pass --nodes N or set WORLD_SIZE "
                "and LOCAL_WORLD_SIZE)";
    return r;
  }
  if (*f.job_nodes >= kRingLimitNodes) {
    r.severity = Severity::kWarn;
    r.summary = ring.front() + " at " + std::to_string(*f.job_nodes) +
                " nodes: ring latency grows "
                "with 2(n-1) steps; use tree (NCCL) or level1:H-D_R / NHR (HCCL)";
    return r;
  }
  r.summary = ring.front() + " at " + std::to_string(*f.job_nodes) + " nodes (< " +
              std::to_string(kRingLimitNodes) + ")";
  return r;
}

Finding Timeouts(const HostFacts& f) {
  Finding r;
  bool hccl = HcclDscp(f).in_use, nccl = NcclDscp(f).in_use;
  if (!hccl && !nccl) return Skip("neither HCCL nor NCCL in use on this host");
  auto seconds = [&](const char* var, int def, int warn_at, const char* what) {
    auto v = f.Env(var);
    if (!v) {
      Note(r, def >= warn_at ? Severity::kWarn : Severity::kOk,
           std::string(var) + " unset: default " + std::to_string(def) + " s" +
               (def >= warn_at ? std::string(" (") + what + ")" : ""));
      return;
    }
    auto n = ParseInt(*v);
    if (!n || *n < 0) {
      Note(r, Severity::kFail, std::string(var) + "=" + *v + " is not a number of seconds");
    } else if (*n == 0 || *n >= warn_at) {
      Note(r, Severity::kWarn,
           std::string(var) + "=" + *v + (*n == 0 ? " (never times out)" : " s (") +
               (*n == 0 ? "" : std::string(what) + ")"));
    } else {
      Note(r, Severity::kOk, std::string(var) + "=" + *v + " s");
    }
  };
  if (hccl) {
    seconds("HCCL_EXEC_TIMEOUT", 1836, 1800, "a hung collective takes 30 minutes to surface");
    seconds("HCCL_CONNECT_TIMEOUT", 120, 1200, "a missing peer takes 20 minutes to surface");
  }
  if (nccl) {
    for (const char* var : {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}) {
      if (auto v = f.Env(var); v && *v == "0") {
        Note(r, Severity::kWarn,
             std::string(var) +
                 "=0: the watchdog reports a timeout but "
                 "never tears the hung job down");
      }
    }
  }
  r.summary = r.severity == Severity::kOk ? "collective timeouts surface a hang in minutes"
                                          : "a hang would take too long (or forever) to surface";
  return r;
}

}  // namespace

Status RegisterCommChecks(CheckRegistry& r) {
  ANXIN_TRY(r.Add(
      {"comm.algo", "algorithm fits scale",
       "Ring AllReduce takes 2(n-1) steps; at 64+ nodes small and medium messages are latency "
       "bound. The field report's HCCL_ALGO=tree beat ring at 128 nodes and cut tail latency.",
       "unset NCCL_ALGO or allow Tree; HCCL_ALGO=\"level0:NA;level1:H-D_R\" (or NHR)", Algo}));
  ANXIN_TRY(
      r.Add({"comm.timeouts", "hangs surface quickly",
             "HCCL_EXEC_TIMEOUT defaults to 1836 s, so a hung collective surfaces after 30 minutes "
             "instead of triggering recovery; the field report's automatic recovery took 4 minutes "
             "only because hangs were detected early.",
             "export HCCL_EXEC_TIMEOUT=300 (seconds; above your slowest step), keep "
             "TORCH_NCCL_ASYNC_ERROR_HANDLING at its default",
             Timeouts}));
  return Ok();
}

}  // namespace anxin::doctor
