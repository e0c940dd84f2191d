// env.rank_consistency: every running rank has the same HCCL/NCCL/allocator
// settings.
#include <set>
#include <string>

#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

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

Status RegisterEnvChecks(CheckRegistry& r) {
  ANXIN_TRY(
      r.Add({"env.rank_consistency", "ranks agree on settings",
             "Ranks started with different HCCL/NCCL variables negotiate different traffic classes "
             "or algorithms and hang or run on a lossy priority.",
             "set HCCL_*/NCCL_*/PYTORCH_*_ALLOC_CONF once in the launcher, not per rank",
             RankConsistency}));
  return Ok();
}

}  // namespace anxin::doctor
