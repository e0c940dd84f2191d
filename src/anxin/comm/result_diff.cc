#include "anxin/comm/result_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "anxin/base/file.h"
#include "anxin/comm/import.h"
#include "anxin/comm/stats.h"

namespace anxin::comm {
namespace {

// Out-of-place when there, else in-place.
const Sample* Primary(const Row& r) {
  if (r.out_of_place) return &*r.out_of_place;
  if (r.in_place) return &*r.in_place;
  return nullptr;
}

bool HasBusBw(const CommRun& run) {
  for (const Row& r : run.rows)
    if (const Sample* s = Primary(r); s && s->busbw > 0) return true;
  return false;
}

double Change(double a, double b) { return a != 0 ? (b - a) / a * 100.0 : 0; }

}  // namespace

CompareReport CompareRuns(const CommRun& a, const CommRun& b, std::string label_a,
                          std::string label_b) {
  CompareReport report;
  report.label_a = std::move(label_a);
  report.label_b = std::move(label_b);
  const bool bus = HasBusBw(a) && HasBusBw(b);
  report.bw_kind = bus ? "busbw" : "algbw";
  if (a.op != b.op) {
    report.notes.push_back(fmt::format("operations differ: {} vs {}",
                                       a.op ? OpName(*a.op) : "unknown",
                                       b.op ? OpName(*b.op) : "unknown"));
  }
  if (a.ranks != b.ranks && a.ranks > 0 && b.ranks > 0) {
    report.notes.push_back(fmt::format("rank counts differ: {} vs {}", a.ranks, b.ranks));
  }
  if (a.type != b.type) {
    report.notes.push_back(
        fmt::format("types differ: {} vs {}", TypeName(a.type), TypeName(b.type)));
  }
  if (a.bw_unit_bytes != b.bw_unit_bytes) {
    report.notes.push_back("bandwidth units differ (hccl_test prints GiB/s); both shown in GB/s");
  }
  std::map<uint64_t, const Sample*> in_b;
  for (const Row& r : b.rows)
    if (const Sample* s = Primary(r)) in_b.emplace(r.bytes, s);
  std::vector<double> time_changes, bw_changes;
  std::map<uint64_t, bool> seen_a;
  for (const Row& r : a.rows) {
    const Sample* sa = Primary(r);
    if (!sa) continue;
    seen_a[r.bytes] = true;
    auto it = in_b.find(r.bytes);
    if (it == in_b.end()) {
      report.only_a.push_back(r.bytes);
      continue;
    }
    const Sample* sb = it->second;
    CompareRow row;
    row.bytes = r.bytes;
    row.time_a_us = sa->time_us;
    row.time_b_us = sb->time_us;
    row.time_change_pct = Change(row.time_a_us, row.time_b_us);
    row.bw_a = (bus ? sa->busbw : sa->algbw) * a.bw_unit_bytes / 1e9;
    row.bw_b = (bus ? sb->busbw : sb->algbw) * b.bw_unit_bytes / 1e9;
    row.bw_change_pct = Change(row.bw_a, row.bw_b);
    time_changes.push_back(row.time_change_pct);
    // Bandwidths printed as 0.00 carry no information.
    if (row.bw_a > 0 && row.bw_b > 0) bw_changes.push_back(row.bw_change_pct);
    report.rows.push_back(row);
  }
  for (const Row& r : b.rows)
    if (Primary(r) && !seen_a.contains(r.bytes)) report.only_b.push_back(r.bytes);
  if (!time_changes.empty()) report.mean_time_change_pct = Mean(time_changes);
  if (!bw_changes.empty()) {
    report.mean_bw_change_pct = Mean(bw_changes);
    report.worst_bw_change_pct = *std::min_element(bw_changes.begin(), bw_changes.end());
  }
  return report;
}

Result<CommRun> LoadResult(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 256u << 20));
  ANXIN_ASSIGN_OR_RETURN(std::vector<CommRun> runs, ImportText(text, path, {}));
  if (runs.size() > 1) {
    return InvalidArgument(fmt::format(
        "{}: holds {} runs (several types or reductions); compare takes one run per file", path,
        runs.size()));
  }
  return std::move(runs[0]);
}

nlohmann::json ToJson(const CompareReport& r) {
  nlohmann::json j;
  j["a"] = r.label_a;
  j["b"] = r.label_b;
  j["bw_kind"] = r.bw_kind;
  nlohmann::json rows = nlohmann::json::array();
  for (const CompareRow& row : r.rows) {
    rows.push_back({{"size", row.bytes},
                    {"time_a_us", row.time_a_us},
                    {"time_b_us", row.time_b_us},
                    {"time_change_pct", row.time_change_pct},
                    {"bw_a", row.bw_a},
                    {"bw_b", row.bw_b},
                    {"bw_change_pct", row.bw_change_pct}});
  }
  j["rows"] = std::move(rows);
  j["only_a"] = r.only_a;
  j["only_b"] = r.only_b;
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j["mean_time_change_pct"] = opt(r.mean_time_change_pct);
  j["mean_bw_change_pct"] = opt(r.mean_bw_change_pct);
  j["worst_bw_change_pct"] = opt(r.worst_bw_change_pct);
  j["notes"] = r.notes;
  return j;
}

}  // namespace anxin::comm
