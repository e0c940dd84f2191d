// Text and CSV renderings of comm results. The sweep table keeps nccl-tests'
// columns and widths (size, count, type, redop, root, then time, algbw, busbw,
// #wrong out-of-place and in-place, the "# Avg bus bandwidth" footer), so that
// scripts written for nccl-tests read it; anxin's p50/p99 columns follow at the
// end of each line.
//
//   CommRun run;       // from a run, an import or a saved JSON file
//   SweepReport sweep;  // from --algo all
//   std::string text = FormatRun(run);           // the whole report
//   std::string csv = FormatCsv(run);            // one line per size
//   std::printf("%s", FormatSweep(sweep).c_str());
//
// Thread safety: pure functions.
#ifndef ANXIN_COMM_FORMAT_H_
#define ANXIN_COMM_FORMAT_H_

#include <string>

#include "anxin/comm/model.h"
#include "anxin/comm/result_diff.h"

namespace anxin::comm {

// value in at most `width` characters, right-aligned: two decimals when they
// fit, then one, then none, then an exponent (as nccl-tests prints numbers).
std::string FitNumber(double value, int width);

// The header, the table, the footer and any skew/matrix/soak sections.
std::string FormatRun(const CommRun& run);
std::string FormatTable(const CommRun& run);
std::string FormatSkew(const SkewReport& skew);
std::string FormatMatrix(const MatrixReport& matrix, const std::vector<std::string>& hosts);
std::string FormatSoak(const SoakReport& soak);
std::string FormatSweep(const SweepReport& sweep);
std::string FormatCompare(const CompareReport& report);
// Header line and one line per size.
std::string FormatCsv(const CommRun& run);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_FORMAT_H_
