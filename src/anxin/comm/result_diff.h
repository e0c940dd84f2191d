// Before/after comparison of two comm results (`anxin bench comm compare A B`):
// per size present in both, the time and bus bandwidth of each and the change
// in percent. Bandwidths in different units (hccl_test's GiB/s against GB/s)
// are brought to GB/s first.
//
//   ANXIN_ASSIGN_OR_RETURN(CommRun before, LoadResult("before.json"));
//   ANXIN_ASSIGN_OR_RETURN(CommRun after, LoadResult("after.txt"));   // nccl-tests output
//   CompareReport r = CompareRuns(before, after);
//   if (r.worst_bw_change_pct && *r.worst_bw_change_pct < -10) {
//     std::printf("%s dropped %.1f%%\n", r.bw_kind.c_str(), -*r.worst_bw_change_pct);
//   }
//
// Thread safety: pure functions.
#ifndef ANXIN_COMM_RESULT_DIFF_H_
#define ANXIN_COMM_RESULT_DIFF_H_

#include <optional>
#include <string>
#include <vector>

#include "anxin/comm/model.h"

namespace anxin::comm {

struct CompareRow {
  uint64_t bytes = 0;
  double time_a_us = 0, time_b_us = 0;
  double time_change_pct = 0;  // (b - a) / a: negative is faster
  // Bus bandwidth when both sides have it, else algorithm bandwidth (GB/s).
  double bw_a = 0, bw_b = 0;
  double bw_change_pct = 0;  // (b - a) / a: positive is better
};

struct CompareReport {
  std::string label_a, label_b;
  std::string bw_kind = "busbw";  // or "algbw" when either side lacks busbw
  std::vector<CompareRow> rows{};
  // Sizes only one side has.
  std::vector<uint64_t> only_a{}, only_b{};
  std::optional<double> mean_time_change_pct{};
  std::optional<double> mean_bw_change_pct{};
  // The largest drop in bandwidth (most negative change), if any row.
  std::optional<double> worst_bw_change_pct{};
  std::vector<std::string> notes{};  // differing ranks, ops or engines
};

CompareReport CompareRuns(const CommRun& a, const CommRun& b, std::string label_a = "A",
                          std::string label_b = "B");

// Reads a result file: anxin's JSON (`anxin --json bench comm ... > F`),
// or raw nccl-tests or hccl_test output (import.h).
[[nodiscard]] Result<CommRun> LoadResult(const std::string& path);

nlohmann::json ToJson(const CompareReport& report);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_RESULT_DIFF_H_
