// mem.alloc_conf and mem.hugepages: the memory pool's options (from the
// ranks' environment) and the host's hugepage settings.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/strings.h"
#include "anxin/doctor/check_util.h"
#include "anxin/doctor/registry.h"

namespace anxin::doctor {
namespace {

using internal::Note;
using internal::Skip;

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
      const std::optional<double> d = ParseDouble(val);
      if (!d || *d <= 0.0 || *d >= 1.0) {
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

Finding HugePagesCheck(const HostFacts& f) {
  if (!f.hugepages) return Skip("could not read /proc/meminfo: " + f.hugepages.error().Describe());
  const host::HugePages& h = *f.hugepages;
  Finding r;
  int64_t pool_kb = h.total * h.page_size_kb;
  r.evidence.push_back("static pool " + std::to_string(h.total) + " x " +
                       std::to_string(h.page_size_kb) + " kB, " + std::to_string(h.free) +
                       " free; MemTotal " + std::to_string(h.mem_total_kb) + " kB; THP " +
                       (h.thp_enabled.empty() ? "n/a" : h.thp_enabled));
  if (h.mem_total_kb > 0 && pool_kb * 10 > h.mem_total_kb * 9) {
    Note(r, Severity::kFail,
         "static hugepages reserve " + std::to_string(pool_kb * 100 / h.mem_total_kb) +
             "% of memory: data loaders and the host side of the job starve");
  }
  if (h.total > 0 && h.free == 0) {
    Note(r, Severity::kWarn, "the static hugepage pool is exhausted (HugePages_Free 0)");
  }
  if (h.thp_enabled == "always") {
    Note(r, Severity::kWarn,
         "transparent hugepages 'always': khugepaged compaction stalls the "
         "host threads that feed the devices; use madvise");
  }
  r.summary =
      r.severity == Severity::kOk ? "hugepage settings sane" : "hugepage settings hurt the job";
  return r;
}

}  // namespace

Status RegisterMemChecks(CheckRegistry& r) {
  ANXIN_TRY(r.Add(
      {"mem.alloc_conf", "allocator options valid",
       "The field report's fragmentation OOM at step ~200 (78% used) came from the memory pool's "
       "settings; an option PyTorch does not understand fails the job at its first allocation, "
       "one it misreads silently changes the pool.",
       "fix the option named in the evidence; expandable_segments:True reduces fragmentation",
       AllocConf}));
  ANXIN_TRY(r.Add(
      {"mem.hugepages", "hugepages sane",
       "A static hugepage pool sized for another workload takes host memory from the data "
       "loaders; THP 'always' adds compaction stalls on the threads that feed the devices.",
       "size vm.nr_hugepages for what the job maps (sysctl -w vm.nr_hugepages=N); echo madvise > "
       "/sys/kernel/mm/transparent_hugepage/enabled",
       HugePagesCheck}));
  return Ok();
}

}  // namespace anxin::doctor
