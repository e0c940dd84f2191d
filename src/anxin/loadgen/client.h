// The load tester's HTTP client: one thread, one epoll loop, non-blocking
// sockets, thousands of streams open at once. It sends each prompt when its
// arrival process says, reads the streamed response as it comes, and records
// per request when it was due, sent, its first token, every chunk and its end.
//
//   std::vector<Prompt> prompts = SyntheticPrompts(1000, *ParseLengthDist("512"),
//                                                  *ParseLengthDist("128"), /*seed=*/1);
//   ANXIN_ASSIGN_OR_RETURN(Slo slo, ParseSlo("ttft=500ms,tpot=50ms"));
//   ANXIN_ASSIGN_OR_RETURN(Target t, ParseUrl("http://127.0.0.1:8000"));
//   LoadOptions o{.target = t};
//   o.request = {.api = Api::kCompletions, .model = "m"};
//   o.arrivals = {.kind = ArrivalSpec::kPoisson, .rate = 50, .concurrency = 0};
//   ANXIN_ASSIGN_OR_RETURN(RunResult run, RunLoad(prompts, o));
//   Summary s = Summarize(run.records, run.duration_s, slo);
//
// A stop requested on options.stop (by StopOnSignals' watcher on Ctrl-C, say)
// wakes the loop at once.
//
// Failures of single requests (refused connections, timeouts, dropped
// streams, 5xx, malformed HTTP or SSE) are recorded in their RequestRecord and
// never end the run; RunLoad itself fails only when it cannot start (a host
// that does not resolve, no epoll). Every request has a deadline
// (timeout_s after it was sent), so a run always ends.
//
// Connections are kept alive and reused (HTTP/1.1); a reused connection that
// the server had closed is retried once on a fresh one. RunLoad raises the
// process's open-file limit to its hard limit so that many streams fit.
//
// Thread safety: RunLoad may run on several threads at once, each with its
// own prompts; the progress callback runs on the calling thread.
#ifndef ANXIN_LOADGEN_CLIENT_H_
#define ANXIN_LOADGEN_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/loadgen/api.h"
#include "anxin/loadgen/arrivals.h"
#include "anxin/loadgen/dataset.h"
#include "anxin/loadgen/latency_stats.h"
#include "anxin/loadgen/tokenizer.h"

namespace anxin::loadgen {

struct Target {
  std::string host{};
  uint16_t port = 80;
  // Empty: the API's default path (api.h DefaultPath).
  std::string path{};
};
// "http://HOST[:PORT][/PATH]". https is kUnimplemented (put a TLS-terminating
// proxy in front, or use the server's plain-HTTP port).
[[nodiscard]] Result<Target> ParseUrl(std::string_view url);

// Opens and closes one TCP connection: kUnavailable naming host:port and the
// reason when the server is not there.
[[nodiscard]] Status ProbeServer(const Target& target, double timeout_s);

struct Progress {
  double elapsed_s = 0;
  int64_t total = 0, sent = 0, done = 0, failed = 0, open = 0;
};

struct LoadOptions {
  Target target{};
  RequestSpec request{};
  // Extra request headers, e.g. {"Authorization", "Bearer ..."}.
  std::vector<std::pair<std::string, std::string>> headers{};
  ArrivalSpec arrivals{};
  uint64_t seed = 0;
  // Per request, from when it was sent.
  double timeout_s = 600;
  // Stop sending new requests this long after the start (0: send them all).
  double duration_s = 0;
  bool keep_alive = true;
  // Counts output tokens when the server sends no usage; not owned.
  const Tokenizer* tokenizer = nullptr;
  std::function<void(const Progress&)> progress{};
  double progress_interval_s = 1;
  // When requested (from any thread), the run stops sending, ends the open
  // requests as "cancelled" and returns what it has.
  std::stop_token stop{};
};

// The client's own cost, to show it was not the bottleneck.
struct LoopStats {
  double wall_s = 0;
  double cpu_s = 0;  // user + system time of the loop's thread
  int64_t peak_open = 0;
  int64_t connections = 0;  // TCP connections opened
  int64_t wakeups = 0;      // epoll waits that returned
  int64_t retries = 0;      // requests resent after a stale keep-alive connection
};

struct RunResult {
  // One per request sent, in prompt order.
  std::vector<RequestRecord> records;
  // From the start to the end of the last response.
  double duration_s = 0;
  LoopStats loop;
};

[[nodiscard]] Result<RunResult> RunLoad(const std::vector<Prompt>& prompts,
                                        const LoadOptions& options);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_CLIENT_H_
