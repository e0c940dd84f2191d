#include "anxin/run/signatures.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace anxin::run {

using device::Severity;

const std::vector<LogSignature>& BuiltinSignatures() {
  // Specific before generic: the HCCL flavour of the watchdog message first.
  static const auto* library = new std::vector<LogSignature>{
      {"hccl_watchdog_timeout", "Watchdog caught collective operation timeout: WorkHCCL", false,
       "collective_timeout", Severity::kCritical, true,
       "an HCCL collective did not finish before the process group's timeout"},
      {"nccl_watchdog_timeout", "Watchdog caught collective operation timeout", false,
       "collective_timeout", Severity::kCritical, true,
       "a collective did not finish before the process group's timeout"},
      {"hccl_ops_failed", "Some HCCL operations have failed or timed out", false,
       "collective_timeout", Severity::kCritical, true,
       "torch_npu aborted after HCCL operations failed or timed out"},
      {"hccl_socket_timeout", "EI0006", false, "network", Severity::kCritical, true,
       "HCCL could not get a socket to a peer in time (link or peer down)"},
      {"hccl_notify_timeout", "EI0002", false, "collective_timeout", Severity::kCritical, true,
       "HCCL waited too long for a peer's notify (a rank is stuck or gone)"},
      {"hccl_ranktable_invalid", "EI0004", false, "configuration", Severity::kCritical, false,
       "the rank table is invalid; restarting will not fix it"},
      {"hccl_inconsistent_args", "EI0005", false, "configuration", Severity::kCritical, false,
       "ranks called a collective with inconsistent arguments"},
      {"hccl_internal", "EI9999", false, "device_error", Severity::kCritical, true,
       "CANN reported an internal error"},
      {"cann_alloc_failed", "EL0004", false, "out_of_memory", Severity::kMajor, true,
       "device memory allocation failed"},
      {"hccl_remote", "HCCL_E_REMOTE", false, "peer_failure", Severity::kCritical, true,
       "a remote HCCL rank failed"},
      {"hccl_timeout", "HCCL_E_TIMEOUT", false, "collective_timeout", Severity::kCritical, true,
       "an HCCL operation timed out"},
      {"hccl_cqe_error", "[Heartbeat]cqe err", false, "network", Severity::kCritical, true,
       "RDMA completion error seen by the HCCL heartbeat"},
      {"device_lost_heartbeat", "Device lost heartbeat", false, "device_lost", Severity::kCritical,
       true, "the runtime lost the device's heartbeat"},
      {"heartbeat_lost", "Heartbeat lost", false, "device_lost", Severity::kCritical, true,
       "a heartbeat between runtime and device or peer stopped"},
      {"stream_sync_timeout", "stream sync timeout", false, "device_error", Severity::kCritical,
       true, "waiting for a device stream timed out"},
      {"aicore_timeout", "aicore timeout", false, "device_error", Severity::kCritical, true,
       "an AI core task did not finish"},
      {"rdma_init_fail", "rdma init fail", false, "network", Severity::kCritical, true,
       "RDMA could not be set up"},
      {"nccl_remote_error", "ncclRemoteError", false, "peer_failure", Severity::kCritical, true,
       "a remote NCCL rank failed"},
      {"nccl_remote_exit", "remote process exited or there was a network error", false,
       "peer_failure", Severity::kCritical, true, "a peer process died or the network failed"},
      {"nccl_system_error", "unhandled system error", false, "network", Severity::kCritical, true,
       "NCCL hit a system error, often in the network"},
      {"nccl_cuda_error", "unhandled cuda error", false, "device_error", Severity::kCritical, true,
       "NCCL hit a CUDA error"},
      {"nccl_error", "NCCL error", false, "collective_error", Severity::kCritical, true,
       "NCCL reported an error"},
      {"dist_backend_error", "DistBackendError", false, "collective_error", Severity::kCritical,
       true, "torch.distributed raised a backend error"},
      {"cuda_oom", "CUDA out of memory", false, "out_of_memory", Severity::kMajor, true,
       "a CUDA allocation failed"},
      {"gpu_off_bus", "GPU has fallen off the bus", false, "device_lost", Severity::kCritical, true,
       "the GPU no longer answers on PCIe"},
      {"nvidia_xid", "NVRM: Xid", false, "device_error", Severity::kCritical, true,
       "the NVIDIA driver reported an Xid error"},
      {"nccl_warn", "NCCL WARN", false, "collective_warning", Severity::kMinor, true,
       "NCCL printed a warning (recorded, no recovery)"},
  };
  return *library;
}

Result<std::vector<LogSignature>> ParseSignatures(const ConfigNode& list) {
  std::vector<LogSignature> out;
  ANXIN_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, list.Elements());
  for (const ConfigNode& item : items) {
    ANXIN_TRY(
        item.CheckKeys({"id", "match", "regex", "class", "severity", "retryable", "meaning"}));
    LogSignature s;
    ANXIN_ASSIGN_OR_RETURN(s.id, item.Get<std::string>("id"));
    ANXIN_ASSIGN_OR_RETURN(std::string match, item.Get<std::string>("match", ""));
    ANXIN_ASSIGN_OR_RETURN(std::string regex, item.Get<std::string>("regex", ""));
    if (match.empty() == regex.empty()) {
      return std::unexpected(item.MakeError("give exactly one of match (literal text) or regex"));
    }
    s.regex = !regex.empty();
    s.match = s.regex ? regex : match;
    ANXIN_ASSIGN_OR_RETURN(s.fault_class, item.Get<std::string>("class"));
    ANXIN_ASSIGN_OR_RETURN(std::string severity, item.Get<std::string>("severity", "critical"));
    if (severity == "minor") {
      s.severity = Severity::kMinor;
    } else if (severity == "major") {
      s.severity = Severity::kMajor;
    } else if (severity == "critical") {
      s.severity = Severity::kCritical;
    } else {
      ANXIN_ASSIGN_OR_RETURN(ConfigNode sev, item.Child("severity"));
      return std::unexpected(
          sev.MakeError("unknown severity '" + severity + "': use minor, major or critical"));
    }
    ANXIN_ASSIGN_OR_RETURN(s.retryable, item.Get<bool>("retryable", true));
    ANXIN_ASSIGN_OR_RETURN(s.meaning, item.Get<std::string>("meaning", ""));
    if (s.regex) {
      try {
        std::regex test(s.match, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        ANXIN_ASSIGN_OR_RETURN(ConfigNode r, item.Child("regex"));
        return std::unexpected(r.MakeError(std::string("bad regex: ") + e.what()));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

struct LogMatcher::Compiled {
  using Searcher = std::boyer_moore_horspool_searcher<std::string::const_iterator>;
  std::vector<LogSignature> signatures;
  std::vector<std::optional<Searcher>> searchers;
  std::vector<std::optional<std::regex>> regexes;
};

Result<LogMatcher> LogMatcher::Compile(std::vector<LogSignature> signatures) {
  auto c = std::make_shared<Compiled>();
  c->signatures = std::move(signatures);
  c->searchers.reserve(c->signatures.size());
  for (const LogSignature& s : c->signatures) {
    if (s.match.empty()) return InvalidArgument("signature '" + s.id + "' matches nothing");
    if (s.regex) {
      try {
        c->regexes.emplace_back(std::regex(s.match, std::regex::ECMAScript | std::regex::optimize));
      } catch (const std::regex_error& e) {
        return InvalidArgument("signature '" + s.id + "': bad regex: " + e.what());
      }
      c->searchers.emplace_back(std::nullopt);
    } else {
      c->regexes.emplace_back(std::nullopt);
      c->searchers.emplace_back(Compiled::Searcher(s.match.begin(), s.match.end()));
    }
  }
  LogMatcher m;
  m.compiled_ = std::move(c);
  return m;
}

const std::vector<LogSignature>& LogMatcher::signatures() const { return compiled_->signatures; }

const LogSignature* LogMatcher::Match(std::string_view line) const {
  const Compiled& c = *compiled_;
  const LogSignature* best = nullptr;
  for (size_t i = 0; i < c.signatures.size(); ++i) {
    const LogSignature& s = c.signatures[i];
    if (best != nullptr && s.severity <= best->severity) continue;
    bool hit;
    if (c.searchers[i]) {
      hit = std::search(line.begin(), line.end(), *c.searchers[i]) != line.end();
    } else {
      hit = std::regex_search(line.begin(), line.end(), *c.regexes[i]);
    }
    if (hit) {
      best = &s;
      if (s.severity == Severity::kCritical) break;
    }
  }
  return best;
}

}  // namespace anxin::run
