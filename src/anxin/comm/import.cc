#include "anxin/comm/import.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

#include "anxin/base/strings.h"
#include "anxin/comm/stats.h"

namespace anxin::comm {
namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == text.size()) break;
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> Fields(std::string_view line, std::string_view separators = " \t") {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && separators.find(line[i]) != std::string_view::npos) ++i;
    size_t j = i;
    while (j < line.size() && separators.find(line[j]) == std::string_view::npos) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint64_t> ToU64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> ToI64(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// mpirun --tag-output prefixes ("[1,0]<stdout>:").
std::string_view StripTag(std::string_view line) {
  if (!line.empty() && line.front() == '[') {
    auto tag = line.find(">:");
    if (tag != std::string_view::npos && tag < 40) return line.substr(tag + 2);
  }
  return line;
}

// The first "NAME_perf" (nccl-tests) or "NAME_test" (hccl_test) word.
std::optional<CollOp> OpFromBinaryName(std::string_view text, std::string_view suffix) {
  size_t pos = 0;
  while ((pos = text.find(suffix, pos)) != std::string_view::npos) {
    size_t start = pos;
    while (start > 0 &&
           (std::isalnum(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '_')) {
      --start;
    }
    auto op = ParseOp(text.substr(start, pos - start));
    if (op) return *op;
    pos += suffix.size();
  }
  return std::nullopt;
}

Error LineError(const std::string& where, size_t line, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("{}:{}: {}", where, line, what));
}

// The operation that fits the printed busbw/algbw ratio, redop and root.
std::optional<CollOp> InferOp(const CommRun& run, std::string& note) {
  if (run.ranks < 2) {
    note = "the operation cannot be inferred without the rank count (give --op)";
    return std::nullopt;
  }
  std::vector<double> ratios;
  for (const Row& r : run.rows) {
    for (const auto* s : {&r.out_of_place, &r.in_place}) {
      // Two printed decimals: only large bandwidths give a precise ratio.
      if (*s && (*s)->algbw >= 1.0) ratios.push_back((*s)->busbw / (*s)->algbw);
    }
  }
  if (ratios.empty()) {
    note = "every algbw is below 1 GB/s, too coarse to infer the operation (give --op)";
    return std::nullopt;
  }
  const double ratio = Percentile(ratios, 50);
  std::vector<CollOp> fits;
  for (CollOp op : kAllOps) {
    if (std::abs(BusBandwidthFactor(op, run.ranks) - ratio) > 0.02 * ratio + 0.005) continue;
    if (OpHasRoot(op) != (run.root >= 0)) continue;
    // nccl-tests prints "none" for operations that do not reduce (sendrecv
    // prints the reduction it was given).
    if (!run.redop && OpReduces(op)) continue;
    if (run.redop && !OpReduces(op) && op != CollOp::kSendRecv) continue;
    fits.push_back(op);
  }
  if (fits.size() == 1) return fits[0];
  std::string names;
  for (CollOp op : fits) names += (names.empty() ? "" : " or ") + std::string(OpName(op));
  note = fmt::format("busbw/algbw = {:.3f} on {} ranks fits {} (give --op)", ratio, run.ranks,
                     fits.empty() ? std::string("no operation") : names);
  return std::nullopt;
}

}  // namespace

ImportFormat DetectFormat(std::string_view text) {
  std::string_view trimmed = Trim(text.substr(0, std::min<size_t>(text.size(), 64)));
  while (!trimmed.empty() && (trimmed.front() == '\n' || trimmed.front() == '\r'))
    trimmed.remove_prefix(1);
  if (!trimmed.empty() && trimmed.front() == '{') return ImportFormat::kAnxinJson;
  if (text.find("data_size(Bytes)") != std::string_view::npos) return ImportFormat::kHcclTest;
  if (text.find("busbw") != std::string_view::npos &&
      text.find("algbw") != std::string_view::npos) {
    return ImportFormat::kNcclTests;
  }
  return ImportFormat::kUnknown;
}

Result<std::vector<CommRun>> ImportNcclTests(std::string_view text, const std::string& where,
                                             const ImportOptions& options) {
  CommRun base;
  base.source = "nccl-tests";
  int iters = 0, warmup = 0;
  bool validation = false;
  std::vector<std::string> hosts;
  std::optional<double> printed_avg;
  bool has_root = true;      // the root column exists (nccl-tests >= 2.10)
  bool error_style = false;  // the older "error" column instead of "#wrong"
  bool header_seen = false;
  // Rows grouped by (type, redop, root) in order of appearance.
  std::vector<CommRun> runs;
  std::map<std::string, size_t> run_index;

  const auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string_view line = Trim(StripTag(lines[n]));
    if (line.empty()) continue;
    const bool comment = line.front() == '#';
    std::string_view body = comment ? Trim(line.substr(1)) : line;
    auto f = Fields(body);
    if (f.empty()) continue;
    if (f[0] == "nThread") {
      for (size_t i = 0; i + 1 < f.size(); ++i) {
        if (f[i] == "iters:" && (i == 0 || f[i - 1] != "warmup") && (i == 0 || f[i - 1] != "agg")) {
          iters = static_cast<int>(ToI64(f[i + 1]).value_or(0));
        }
        if (f[i] == "warmup" && i + 2 < f.size() && f[i + 1] == "iters:")
          warmup = static_cast<int>(ToI64(f[i + 2]).value_or(0));
        if (f[i] == "validation:") validation = f[i + 1] != "0";
      }
      continue;
    }
    if (f[0] == "Rank" && f.size() >= 2 && ToI64(f[1])) {
      for (size_t i = 2; i + 1 < f.size(); ++i) {
        if (f[i] == "on") {
          hosts.emplace_back(f[i + 1]);
          break;
        }
      }
      continue;
    }
    if (f[0] == "size" && f.size() > 4 && f[1] == "count") {
      header_seen = true;
      has_root = std::find(f.begin(), f.end(), "root") != f.end();
      error_style = std::find(f.begin(), f.end(), "#wrong") == f.end() &&
                    std::find(f.begin(), f.end(), "error") != f.end();
      continue;
    }
    if (comment) {
      if (body.starts_with("Avg bus bandwidth")) {
        auto colon = body.find(':');
        if (colon != std::string_view::npos) {
          auto v = Fields(body.substr(colon + 1));
          if (!v.empty()) printed_avg = ParseDouble(v[0]);
        }
      }
      continue;
    }
    if (!header_seen || !ToU64(f[0])) continue;  // NCCL INFO lines and the like
    const size_t fixed = has_root ? 5 : 4;
    if (f.size() < fixed + 4) {
      return std::unexpected(LineError(
          where, n + 1,
          fmt::format("a result row needs at least {} columns, found {}", fixed + 4, f.size())));
    }
    Row row;
    row.bytes = *ToU64(f[0]);
    auto count = ToU64(f[1]);
    if (!count) return std::unexpected(LineError(where, n + 1, "count is not a number"));
    row.count = *count;
    ANXIN_ASSIGN_OR_RETURN(DataType type, ParseType(f[2]));
    std::optional<RedOp> redop;
    if (f[3] != "none") {
      auto r = ParseRedOp(f[3]);
      if (!r) return std::unexpected(LineError(where, n + 1, r.error().message()));
      redop = *r;
    }
    int root = -1;
    if (has_root) root = static_cast<int>(ToI64(f[4]).value_or(-1));
    // Then out-of-place and in-place, four columns each (time algbw busbw
    // wrong); trace-replay lines may leave out-of-place blank.
    const size_t rest = f.size() - fixed;
    auto sample = [&](size_t at) -> Result<Sample> {
      Sample s;
      auto time = ParseDouble(f[at]), alg = ParseDouble(f[at + 1]), bus = ParseDouble(f[at + 2]);
      if (!time || !alg || !bus) {
        return std::unexpected(
            LineError(where, n + 1,
                      fmt::format("expected time, algbw and busbw numbers, got '{} {} {}'", f[at],
                                  f[at + 1], f[at + 2])));
      }
      s.time_us = *time;
      s.algbw = *alg;
      s.busbw = *bus;
      std::string_view w = f[at + 3];
      if (w == "N/A") {
        s.wrong = -1;
      } else if (auto v = ParseDouble(w)) {
        s.wrong = error_style ? (*v == 0 ? 0 : 1) : static_cast<int64_t>(std::llround(*v));
      } else {
        return std::unexpected(LineError(where, n + 1, "#wrong is neither a number nor N/A"));
      }
      return s;
    };
    if (rest >= 8) {
      ANXIN_ASSIGN_OR_RETURN(row.out_of_place, sample(fixed));
      ANXIN_ASSIGN_OR_RETURN(row.in_place, sample(fixed + 4));
    } else {
      ANXIN_ASSIGN_OR_RETURN(row.in_place, sample(fixed));
    }
    const std::string key =
        fmt::format("{}/{}/{}", TypeName(type), redop ? RedOpName(*redop) : "none", root);
    auto [it, added] = run_index.try_emplace(key, runs.size());
    if (added) {
      CommRun run = base;
      run.type = type;
      run.redop = redop;
      run.root = root;
      runs.push_back(std::move(run));
    }
    runs[it->second].rows.push_back(std::move(row));
  }
  if (runs.empty()) {
    return std::unexpected(
        Error(ErrorCode::kInvalidArgument,
              where + ": no nccl-tests result rows (expected a '#  size  count  type ...' header "
                      "followed by rows of numbers)"));
  }
  const std::optional<CollOp> named = options.op ? options.op : OpFromBinaryName(text, "_perf");
  for (CommRun& run : runs) {
    run.iters = iters;
    run.warmup = warmup;
    run.checked = validation;
    run.hosts = hosts;
    run.ranks = options.ranks > 0 ? options.ranks : static_cast<int>(hosts.size());
    if (options.ranks > 0 && static_cast<int>(hosts.size()) != options.ranks) run.hosts.clear();
    std::string note;
    run.op = named ? named : InferOp(run, note);
    if (!run.op) run.command = note;
    UpdateAverageBusBandwidth(run);
    // One run: the footer is nccl-tests' own number, kept as printed.
    if (runs.size() == 1 && printed_avg) run.avg_busbw = printed_avg;
  }
  return runs;
}

Result<std::vector<CommRun>> ImportHcclTest(std::string_view text, const std::string& where,
                                            const ImportOptions& options) {
  CommRun run;
  run.source = "hccl_test";
  run.bw_unit_bytes = 1024.0 * 1024.0 * 1024.0;
  run.type = options.type.value_or(DataType::kFloat);
  run.ranks = options.ranks;
  run.op = options.op ? options.op : OpFromBinaryName(text, "_test");
  if (run.op && OpReduces(*run.op)) run.redop = RedOp::kSum;
  if (run.op && OpHasRoot(*run.op)) run.root = 0;
  // "the minbytes is 8192, maxbytes is 67108864, iters is 20, warmup_iters is 5"
  auto number_after = [&](std::string_view key) -> int {
    size_t at = text.find(key);
    if (at == std::string_view::npos) return 0;
    std::string_view rest = text.substr(at + key.size());
    size_t end = 0;
    while (end < rest.size() && std::isdigit(static_cast<unsigned char>(rest[end]))) ++end;
    return static_cast<int>(ToI64(rest.substr(0, end)).value_or(0));
  };
  run.iters = number_after(", iters is ");
  run.warmup = number_after("warmup_iters is ");
  bool header = false;
  bool any_checked = false;
  const auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string_view line = Trim(StripTag(lines[n]));
    if (line.find("data_size(Bytes)") != std::string_view::npos) {
      header = true;
      continue;
    }
    if (!header || line.empty()) continue;
    auto cols = Fields(line, "|");
    if (cols.size() < 4) continue;
    auto bytes = ToU64(Trim(cols[0]));
    if (!bytes) continue;  // log lines between rows
    auto time = ParseDouble(cols[1]);
    auto alg = ParseDouble(cols[2]);
    if (!time || !alg) {
      return std::unexpected(LineError(
          where, n + 1, "expected 'data_size | time | bandwidth | check_result' numbers"));
    }
    Sample s;
    s.time_us = *time;
    s.algbw = *alg;
    s.busbw = run.op && run.ranks > 0 ? *alg * BusBandwidthFactor(*run.op, run.ranks) : 0;
    std::string_view check = Trim(cols[3]);
    if (check == "success") {
      s.wrong = 0;
      any_checked = true;
    } else if (check == "failed") {
      s.wrong = 1;
      any_checked = true;
    } else {
      s.wrong = -1;
    }
    Row row;
    row.bytes = *bytes;
    row.count = *bytes / TypeSize(run.type);
    row.out_of_place = s;
    run.rows.push_back(std::move(row));
  }
  if (run.rows.empty()) {
    return std::unexpected(
        Error(ErrorCode::kInvalidArgument, where + ": no hccl_test result rows after the "
                                                   "'data_size(Bytes): | ...' header"));
  }
  run.checked = any_checked;
  if (run.op && run.ranks > 0) UpdateAverageBusBandwidth(run);
  if (!run.op) run.command = "hccl_test output names no operation (give --op)";
  return std::vector<CommRun>{std::move(run)};
}

Result<std::vector<CommRun>> ImportText(std::string_view text, const std::string& where,
                                        const ImportOptions& options) {
  switch (DetectFormat(text)) {
    case ImportFormat::kNcclTests:
      return ImportNcclTests(text, where, options);
    case ImportFormat::kHcclTest:
      return ImportHcclTest(text, where, options);
    case ImportFormat::kAnxinJson: {
      nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return InvalidArgument(where + ": not valid JSON");
      ANXIN_ASSIGN_OR_RETURN(CommRun run, CommRunFromJson(j, where));
      return std::vector<CommRun>{std::move(run)};
    }
    case ImportFormat::kUnknown:
      break;
  }
  return InvalidArgument(where +
                         ": not nccl-tests output (no 'algbw'/'busbw' header), not hccl_test "
                         "output (no 'data_size(Bytes)' header) and not anxin JSON");
}

}  // namespace anxin::comm
