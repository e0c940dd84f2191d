// `anxin doctor --hosts FILE`: the same checks on many hosts over ssh, and a
// check x host matrix that marks hosts differing from the majority (drift).
//
// Each host runs its own `anxin doctor --json` (the remote binary reads its
// own /sys and /proc, so one implementation of every check serves both
// modes; copying /proc files instead would lose the files that report size 0
// and the process state). ssh runs in batch mode (no password prompts), all
// hosts in parallel up to `parallel`, each under `timeout_s`.
//
//   std::string text = "# rack 3\nnode01\nops@node02:2222\n";   // the --hosts file
//   ANXIN_ASSIGN_OR_RETURN(auto hosts, ParseHostsFile(text));
//   RemoteOptions options;
//   options.timeout_s = 60;
//   auto results = RunOnHosts(hosts, options);
//   std::cout << RenderMatrix(results);
#ifndef ANXIN_DOCTOR_MULTI_HOST_H_
#define ANXIN_DOCTOR_MULTI_HOST_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/doctor/check_report.h"
#include "anxin/doctor/process_runner.h"

namespace anxin::doctor {

struct HostEntry {
  std::string target;  // [user@]host
  int port = 0;        // 0: ssh's default / ssh config
  std::string label;   // as written in the file
};

// One host per line: "[user@]host[:port]" or "[user@][v6addr]:port"; '#'
// comments. Names starting with '-' or holding characters outside
// [A-Za-z0-9._@:[]-] are refused (they would reach ssh as options).
Result<std::vector<HostEntry>> ParseHostsFile(std::string_view text);

struct RemoteOptions {
  std::string ssh = "ssh";
  std::string ssh_config;                // -F FILE
  std::vector<std::string> ssh_options;  // extra "-o Key=Value" values (Key=Value only)
  std::string remote_anxin = "anxin";    // the program on the remote host
  std::vector<std::string> remote_args;  // appended after `doctor --json`
  double timeout_s = 30;
  int parallel = 16;
};

struct HostResult {
  HostEntry host;
  Result<Report> report = Report{};
  double seconds = 0;
};

// The ssh argv for one host (exposed for tests and --dry-run listings).
std::vector<std::string> SshArgv(const HostEntry& host, const RemoteOptions& o);
// POSIX shell single-quoting (ssh passes the remote command to a shell).
std::string ShellQuote(std::string_view s);

std::vector<HostResult> RunOnHosts(const std::vector<HostEntry>& hosts, const RemoteOptions& o,
                                   const ProcessRunner& run = RunProcess);

// Rows: checks; columns: hosts; cells ok/warn/fail/skip, "-" where a host did
// not run the check, and a trailing '*' where the cell differs from the
// majority of hosts that answered. Unreachable hosts are listed with the reason.
std::string RenderMatrix(const std::vector<HostResult>& results);
nlohmann::json MatrixJson(const std::vector<HostResult>& results);
// The worst status over every answering host; kFail also when a host did not answer.
Severity WorstOverHosts(const std::vector<HostResult>& results);

}  // namespace anxin::doctor

#endif  // ANXIN_DOCTOR_MULTI_HOST_H_
