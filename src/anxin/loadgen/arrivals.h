// When the requests of a load test are due.
//
//   ArrivalSpec a{.kind = ArrivalSpec::kPoisson, .rate = 20};
//   std::vector<double> due = ArrivalOffsets(a, 1000, /*seed=*/1);  // seconds from start
//
// Closed loop (kConcurrency): `concurrency` requests are in flight at all
// times; each is due when the one before it in its slot ends, so the offsets
// are not known ahead (ArrivalOffsets returns none). Open loop: requests are
// due at a rate whatever the server does, with gaps that are constant,
// exponential (Poisson) or gamma-distributed with shape `burstiness` and mean
// 1/rate (burstiness < 1 is burstier than Poisson, > 1 more even; 1 is
// Poisson). An open-loop run may also cap the requests in flight
// (`concurrency` > 0): a request that waits for a slot still counts its
// latency from when it was due, so a slow server is never hidden by the
// client waiting for it (no coordinated omission).
//
// Thread safety: free functions on values.
#ifndef ANXIN_LOADGEN_ARRIVALS_H_
#define ANXIN_LOADGEN_ARRIVALS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::loadgen {

struct ArrivalSpec {
  enum Kind { kConcurrency, kConstant, kPoisson, kGamma };
  Kind kind = kConcurrency;
  // Requests per second for the open-loop kinds; infinity sends all at once.
  double rate = 0;
  double burstiness = 1;
  // Closed loop: requests in flight. Open loop: the cap (0 for none).
  int64_t concurrency = 1;

  bool open_loop() const { return kind != kConcurrency; }
  // "concurrency 8", "poisson 20 req/s", "gamma 20 req/s burstiness 0.5 (cap 64)".
  std::string ToString() const;
};

// "constant", "poisson", "gamma".
[[nodiscard]] Result<ArrivalSpec::Kind> ParseArrivalKind(std::string_view name);

// Due times, in seconds from the start, of n open-loop requests (sorted,
// starting at 0); empty for a closed loop.
std::vector<double> ArrivalOffsets(const ArrivalSpec& spec, int64_t n, uint64_t seed);

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_ARRIVALS_H_
