// Readers of other tools' outputs into the comm result model
// (`anxin bench comm import FILE`):
//
// - nccl-tests (all_reduce_perf and friends): the "# nThread ..." line (iters,
//   warmup, validation), the "#  Rank N ... on HOST" lines (ranks and hosts),
//   the column header (with or without the root column; "#wrong" or the older
//   "error"), the rows, and the "# Avg bus bandwidth" footer. Lines prefixed by
//   mpirun's --tag-output ("[1,0]<stdout>:") are read too. A run that mixes
//   types or reductions (-d all, -o all) becomes one CommRun per combination.
//   The operation comes from the options, else from a "NAME_perf" word in the
//   text, else from the busbw/algbw ratio and the redop and root columns.
// - hccl_test (all_reduce_test and friends): "the minbytes is ..., iters is N,
//   warmup_iters is M", the "data_size(Bytes): | aveg_time(us): |
//   alg_bandwidth(GB/s): | check_result:" header and its rows. hccl_test's
//   GB/s is 2^30 bytes per second (the printed numbers are size / time / 2^30),
//   kept as printed with bw_unit_bytes = 2^30; check_result success -> 0 wrong,
//   failed -> 1 (it prints no count), NULL -> not checked. It prints neither the
//   rank count nor busbw: give ranks to get busbw.
//
//   #include "anxin/base/file.h"
//
//   std::string path = "all_reduce_perf.txt";
//   ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//   ANXIN_ASSIGN_OR_RETURN(std::vector<CommRun> runs, ImportText(text, path, {}));
//
// Thread safety: pure functions.
#ifndef ANXIN_COMM_IMPORT_H_
#define ANXIN_COMM_IMPORT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/comm/model.h"

namespace anxin::comm {

struct ImportOptions {
  std::optional<CollOp> op{};  // overrides what the text says
  int ranks = 0;               // overrides the count of "Rank" lines; needed for hccl_test busbw
  std::optional<DataType> type{};  // hccl_test prints none (default float, its -d default)
};

enum class ImportFormat { kNcclTests, kHcclTest, kAnxinJson, kUnknown };
ImportFormat DetectFormat(std::string_view text);

// `where` names the input in errors ("file.txt:12: ...").
[[nodiscard]] Result<std::vector<CommRun>> ImportText(std::string_view text,
                                                      const std::string& where,
                                                      const ImportOptions& options);
[[nodiscard]] Result<std::vector<CommRun>> ImportNcclTests(std::string_view text,
                                                           const std::string& where,
                                                           const ImportOptions& options);
[[nodiscard]] Result<std::vector<CommRun>> ImportHcclTest(std::string_view text,
                                                          const std::string& where,
                                                          const ImportOptions& options);

}  // namespace anxin::comm

#endif  // ANXIN_COMM_IMPORT_H_
