// Renders a CompareReport: a terminal table (worst first), CSV, JSON and a
// self-contained HTML page (inline CSS and JavaScript, no network access)
// with a sortable table and a chart of the error along execution order.
//
//   #include "anxin/base/file.h"
//
//   CompareReport report;   // from CompareDumps (dump_compare.h)
//   PrintTable(report, stdout, /*limit=*/20);
//   ANXIN_TRY(WriteFileAtomic("report.html", RenderHtml(report)));
//   std::string json = ToJson(report).dump(2);
#ifndef ANXIN_COMPARE_COMPARE_REPORT_H_
#define ANXIN_COMPARE_COMPARE_REPORT_H_

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/error.h"
#include "anxin/compare/dump_compare.h"

namespace anxin::compare {

// The worst `limit` pairs (0: all), the unmatched tensors, the first
// divergence and a summary line.
void PrintTable(const CompareReport& report, std::FILE* out, size_t limit);

// One row per pair in execution order; non-finite numbers as nan/inf.
// WriteCsv hands the text to write in pieces of about 1 MiB (stopping at the
// first error write returns); RenderCsv returns it whole.
Status WriteCsv(const CompareReport& report, const std::function<Status(std::string_view)>& write);
std::string RenderCsv(const CompareReport& report);

// Non-finite numbers become the strings "nan", "inf", "-inf".
nlohmann::json ToJson(const CompareReport& report);
nlohmann::json MetricsToJson(const Metrics& m);
// Writes ToJson(report).dump(2) to out, building one pair at a time: memory
// does not grow with the number of pairs.
void WriteJson(const CompareReport& report, std::FILE* out);

// At most max_rows pairs in the table (0: all): the worst ones, in execution
// order; the chart draws at most 4000 points (runs of pairs at their worst
// error beyond that), so the page stays small for any number of pairs.
constexpr size_t kHtmlRows = 5000;
std::string RenderHtml(const CompareReport& report, size_t max_rows = kHtmlRows);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_COMPARE_REPORT_H_
