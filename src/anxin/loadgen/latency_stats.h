// What one request of a load test measured, and the aggregate over a run:
// TTFT, ITL, TPOT, end-to-end latency, throughput, goodput under SLOs and
// errors by kind.
//
//   std::vector<RequestRecord> records;  // filled in by the client (client.h)
//   ANXIN_ASSIGN_OR_RETURN(Slo slo, ParseSlo("ttft=500ms,tpot=50ms"));
//   Summary s = Summarize(records, /*duration_s=*/12.5, slo);
//   // s.ttft.p99, s.goodput, s.errors["http_503"], ...
//
// Definitions (times from when the request was due, not when it was sent):
//   TTFT  first chunk with generated text - due
//   E2E   end of the response - due
//   TPOT  (E2E - TTFT) / (output tokens - 1), for requests with >= 2 tokens
//   ITL   gaps between successive chunks with text, pooled over requests
//   goodput  successful requests meeting every SLO, per second of the run
// Failed requests count in `errors` and against SLO attainment, never in the
// latency figures.
//
// Thread safety: free functions on values.
#ifndef ANXIN_LOADGEN_LATENCY_STATS_H_
#define ANXIN_LOADGEN_LATENCY_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::loadgen {

enum class TokenSource { kUsage, kTokenizer, kEstimate };
std::string_view TokenSourceName(TokenSource s);  // "usage", "tokenizer", "estimated"

struct RequestRecord {
  int64_t index = 0;
  // Nanoseconds from the start of the run.
  int64_t due_ns = 0;
  int64_t sent_ns = -1;
  int64_t first_token_ns = -1;
  int64_t end_ns = -1;
  // Arrival of each chunk that carried generated text.
  std::vector<int64_t> chunk_ns;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t requested_tokens = 0;
  TokenSource input_source = TokenSource::kEstimate;
  TokenSource output_source = TokenSource::kEstimate;
  int http_status = 0;
  // Empty for success; else one of: connect, timeout, dropped, malformed_http,
  // malformed_event, server_error, incomplete, http_NNN, cancelled.
  std::string error;
  std::string error_detail;

  bool ok() const { return error.empty(); }
  double ttft_s() const { return (first_token_ns - due_ns) * 1e-9; }
  double e2e_s() const { return (end_ns - due_ns) * 1e-9; }
  // -1 when fewer than 2 output tokens.
  double tpot_s() const;
};

struct Stats {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};
// Percentiles by linear interpolation between order statistics (numpy's
// default). REQUIRES: nothing; an empty input gives all zeros.
Stats ComputeStats(std::vector<double> values);

// Per-request service level objectives, in seconds.
struct Slo {
  std::optional<double> ttft, tpot, e2e;
  bool empty() const { return !ttft && !tpot && !e2e; }
  bool Met(const RequestRecord& r) const;
  std::string ToString() const;  // "ttft=500ms,tpot=50ms"
};
// "ttft=500ms,tpot=50ms,e2e=10s" (durations as base/config.h ParseSeconds).
[[nodiscard]] Result<Slo> ParseSlo(std::string_view text);

struct Summary {
  int64_t requests = 0, completed = 0, failed = 0;
  double duration_s = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Stats ttft, tpot, itl, e2e;
  // sent - due: the wait for a free slot under a concurrency cap plus the
  // client's own dispatch delay.
  Stats send_delay;
  std::map<std::string, int64_t> errors;
  // SLO results; meaningful when slo is not empty.
  Slo slo;
  int64_t good = 0;
  double goodput = 0;     // good requests per second
  double attainment = 0;  // good / requests
  // Where the output token counts came from: "usage", "tokenizer",
  // "estimated", or several joined with "+" when requests differed.
  std::string output_token_source;
  std::string input_token_source;
};

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_LATENCY_STATS_H_
