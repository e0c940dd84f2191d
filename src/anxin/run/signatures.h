// The library of failure signatures the log detector looks for in every rank
// output line: NCCL, HCCL, CANN and CUDA messages with the fault class and
// severity each one means, compiled once into a matcher.
//
//   ANXIN_ASSIGN_OR_RETURN(LogMatcher m, LogMatcher::Compile(BuiltinSignatures()));
//   if (const LogSignature* s = m.Match("EI0006: Getting socket times out")) {
//     // prints "hccl_socket_timeout: network"
//     std::printf("%s: %s\n", s->id.c_str(), s->fault_class.c_str());
//   }
//
// A signature is a literal substring (the common case, found with a
// precomputed Boyer-Moore-Horspool search) or an ECMAScript regex. Where
// several match, the most severe wins, then the earliest in the list.
//
// Thread safety: a compiled LogMatcher is immutable; Match may run on many
// threads at once.
#ifndef ANXIN_RUN_SIGNATURES_H_
#define ANXIN_RUN_SIGNATURES_H_

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/device/backend.h"

namespace anxin::run {

struct LogSignature {
  std::string id;     // "nccl_watchdog_timeout"
  std::string match;  // literal text, or a regex when regex is set
  bool regex = false;
  std::string fault_class;  // "collective_timeout", "network", ...
  device::Severity severity = device::Severity::kCritical;
  // False for faults a restart cannot cure (a bad rank table, inconsistent
  // arguments): the supervisor stops the job instead of relaunching it.
  bool retryable = true;
  std::string meaning;  // one line for the incident record
};

// The shipped library, in matching order (docs/recovery.md lists it).
const std::vector<LogSignature>& BuiltinSignatures();

// Reads the `signatures:` list of run.detectors.log_patterns:
//   - {id: my_oom, match: "out of host memory", class: out_of_memory, severity: major}
//   - {id: loss_nan, regex: "loss (nan|inf)", class: divergence, retryable: false}
// Errors name file:line:col.
Result<std::vector<LogSignature>> ParseSignatures(const ConfigNode& list);

class LogMatcher {
 public:
  // A bad regex or an empty match -> kInvalidArgument naming the signature.
  static Result<LogMatcher> Compile(std::vector<LogSignature> signatures);

  // The signature the line shows, or nullptr.
  const LogSignature* Match(std::string_view line) const;
  const std::vector<LogSignature>& signatures() const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace anxin::run

#endif  // ANXIN_RUN_SIGNATURES_H_
