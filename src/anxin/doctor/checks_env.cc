// comm.algo, comm.timeouts, mem.alloc_conf, env.rank_consistency: the job's
// collective and memory-pool settings, read from the ranks' environment.
#include <set>

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

// Splits "a:1,b:[x:1,y:2]" on top-level commas.
std::vector<std::string> SplitOptions(std::string_view v) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : v) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void CheckAllocConf(const std::string& var, const std::string& value, Finding& r) {
  static const std::set<std::string> kBool = {
      "expandable_segments", "pinned_use_cuda_host_register", "release_lock_on_cudamalloc",
      "pinned_use_background_threads"};
  static const std::set<std::string> kKnown = {"max_split_size_mb",
                                               "garbage_collection_threshold",
                                               "roundup_power2_divisions",
                                               "backend",
                                               "pinned_num_register_threads",
                                               "expandable_segments",
                                               "pinned_use_cuda_host_register",
                                               "release_lock_on_cudamalloc",
                                               "pinned_use_background_threads"};
  bool expandable = false;
  for (const std::string& opt : SplitOptions(value)) {
    std::string_view o = Trim(opt);
    if (o.empty()) continue;
    size_t colon = o.find(':');
    std::string key(Trim(o.substr(0, colon)));
    std::string val = colon == std::string_view::npos ? "" : std::string(Trim(o.substr(colon + 1)));
    std::string at = var + ": " + key;
    if (colon == std::string_view::npos || val.empty()) {
      Note(r, Severity::kFail, at + ": expected key:value, got '" + std::string(o) + "'");
    } else if (!kKnown.contains(key)) {
      std::string known;
      for (const auto& k : kKnown) known += (known.empty() ? "" : ", ") + k;
      Note(r, Severity::kWarn,
           at +
               ": unknown option (PyTorch rejects unknown keys at the first "
               "allocation; known: " +
               known + ")");
    } else if (kBool.contains(key)) {
      if (val != "True" && val != "False" && val != "true" && val != "false") {
        Note(r, Severity::kFail, at + ": expected True or False, got '" + val + "'");
      } else if (key == "expandable_segments") {
        expandable = val == "True" || val == "true";
      }
    } else if (key == "max_split_size_mb") {
      auto n = ParseInt(val);
      if (!n || *n <= 20)
        Note(r, Severity::kFail, at + ": must be an integer > 20 (MB), got '" + val + "'");
    } else if (key == "garbage_collection_threshold") {
      char* end = nullptr;
      double d = std::strtod(val.c_str(), &end);
      if (end == val.c_str() || *end != '\0' || d <= 0.0 || d >= 1.0) {
        Note(r, Severity::kFail, at + ": must be in (0, 1), got '" + val + "'");
      }
    } else if (key == "backend") {
      if (val != "native" && val != "cudaMallocAsync") {
        Note(r, Severity::kFail, at + ": expected native or cudaMallocAsync, got '" + val + "'");
      } else if (val == "cudaMallocAsync" && var == "PYTORCH_NPU_ALLOC_CONF") {
        Note(r, Severity::kFail, at + ": cudaMallocAsync does not exist on NPUs");
      }
    } else if (key == "pinned_num_register_threads") {
      auto n = ParseInt(val);
      if (!n || *n < 1 || *n > 128 || (*n & (*n - 1)) != 0) {
        Note(r, Severity::kFail, at + ": must be a power of 2 in [1, 128], got '" + val + "'");
      }
    } else if (key == "roundup_power2_divisions" && val.front() != '[') {
      auto n = ParseInt(val);
      if (!n || *n < 1 || (*n & (*n - 1)) != 0) {
        Note(r, Severity::kFail, at + ": must be a power of 2, got '" + val + "'");
      }
    }
  }
  Note(r, Severity::kOk, var + "=" + value + (expandable ? "" : " (expandable_segments off)"));
}

Finding AllocConf(const HostFacts& f) {
  Finding r;
  bool any = false;
  for (const char* var :
       {"PYTORCH_NPU_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    if (auto v = f.Env(var)) {
      any = true;
      CheckAllocConf(var, *v, r);
    }
  }
  r.evidence.push_back("environment: " + f.env_source);
  if (!any) {
    r.summary =
        "no memory-pool options set (PyTorch defaults; consider expandable_segments:True "
        "against fragmentation)";
    return r;
  }
  r.summary = r.severity == Severity::kOk ? "memory-pool options valid"
                                          : "memory-pool options that PyTorch rejects or misreads";
  return r;
}

bool Shared(const std::string& key) {
  return key.starts_with("HCCL_") || key.starts_with("NCCL_") || key.starts_with("TORCH_NCCL_") ||
         (key.starts_with("PYTORCH_") && key.find("ALLOC_CONF") != std::string::npos);
}

Finding RankConsistency(const HostFacts& f) {
  if (!f.processes || f.processes->size() < 2)
    return Skip("fewer than two running ranks to compare");
  Finding r;
  const host::ProcessInfo& ref = f.processes->front();
  size_t differ = 0;
  for (size_t i = 1; i < f.processes->size(); ++i) {
    const host::ProcessInfo& p = (*f.processes)[i];
    std::set<std::string> keys;
    for (const auto& [k, v] : ref.env)
      if (Shared(k)) keys.insert(k);
    for (const auto& [k, v] : p.env)
      if (Shared(k)) keys.insert(k);
    bool bad = false;
    for (const std::string& k : keys) {
      auto a = ref.env.find(k), b = p.env.find(k);
      std::string va = a == ref.env.end() ? "(unset)" : a->second;
      std::string vb = b == p.env.end() ? "(unset)" : b->second;
      if (va != vb) {
        Note(r, Severity::kFail,
             "pid " + std::to_string(p.pid) + ": " + k + "=" + vb + " but pid " +
                 std::to_string(ref.pid) + " has " + va);
        bad = true;
      }
    }
    if (bad) ++differ;
  }
  r.summary =
      differ == 0
          ? std::to_string(f.processes->size()) + " ranks share HCCL/NCCL/allocator settings"
          : std::to_string(differ) + " ranks differ from pid " + std::to_string(ref.pid);
  return r;
}

}  // namespace

void RegisterEnvChecks(CheckRegistry& r) {
  r.Add({"comm.algo", "algorithm fits scale",
         "Ring AllReduce takes 2(n-1) steps; at 64+ nodes small and medium messages are latency "
         "bound. The field report's HCCL_ALGO=tree beat ring at 128 nodes and cut tail latency.",
         "unset NCCL_ALGO or allow Tree; HCCL_ALGO=\"level0:NA;level1:H-D_R\" (or NHR)", Algo});
  r.Add({"comm.timeouts", "hangs surface quickly",
         "HCCL_EXEC_TIMEOUT defaults to 1836 s, so a hung collective surfaces after 30 minutes "
         "instead of triggering recovery; the field report's automatic recovery took 4 minutes "
         "only because hangs were detected early.",
         "export HCCL_EXEC_TIMEOUT=300 (seconds; above your slowest step), keep "
         "TORCH_NCCL_ASYNC_ERROR_HANDLING at its default",
         Timeouts});
  r.Add({"env.rank_consistency", "ranks agree on settings",
         "Ranks started with different HCCL/NCCL variables negotiate different traffic classes "
         "or algorithms and hang or run on a lossy priority.",
         "set HCCL_*/NCCL_*/PYTORCH_*_ALLOC_CONF once in the launcher, not per rank",
         RankConsistency});
  r.Add({"mem.alloc_conf", "allocator options valid",
         "The field report's fragmentation OOM at step ~200 (78% used) came from the memory pool's "
         "settings; an option PyTorch does not understand fails the job at its first allocation, "
         "one it misreads silently changes the pool.",
         "fix the option named in the evidence; expandable_segments:True reduces fragmentation",
         AllocConf});
}

}  // namespace anxin::doctor
