// `anxin compare`: accuracy comparison of tensor dumps (docs/compare.md).
//
//   anxin compare NPU_DUMP GPU_DUMP [--fuzzy] [--map F] [--html F] [--csv F]
//   anxin compare ref OUT.npy REF.npy
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "anxin/base/file.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/compare/compare_report.h"
#include "anxin/compare/dump_compare.h"

namespace anxin::cli::compare_cmd {
namespace {

namespace cmp = anxin::compare;

struct Opts {
  std::string out, ref;
  bool fuzzy = false;
  std::string map_file, thresholds_file, void_as, csv, html;
  unsigned threads = 0;
  // Signed, so that a negative count is refused by name instead of wrapping.
  int64_t top = 30;
  int64_t html_rows = static_cast<int64_t>(cmp::kHtmlRows);
  // Progress on stderr: --progress, --no-progress, else when stderr is a terminal.
  bool progress = false, no_progress = false;
  // `ref` subcommand
  std::string one_out, one_ref;
  CLI::App* ref_cmd = nullptr;
};

// Threshold and rename files are small YAML documents.
constexpr size_t kMaxYamlBytes = size_t{64} << 20;

Result<cmp::ThresholdRules> Rules(const Opts& o, const GlobalOptions& g) {
  if (!o.thresholds_file.empty()) {
    ANXIN_ASSIGN_OR_RETURN(std::string text,
                           ReadInputFile(o.thresholds_file, "--thresholds", kMaxYamlBytes));
    return cmp::ThresholdRules::ParseYaml(text, o.thresholds_file);
  }
  // The `compare:` section of the global configuration (--config or
  // ANXIN_CONFIG), already parsed: errors point into that file.
  if (auto section = FindSection(g.config, "compare"))
    return cmp::ThresholdRules::FromConfig(*section);
  return cmp::ThresholdRules();
}

// Progress on stderr: rewritten in place on a terminal and cleared at the
// end (the summary line follows), a line per update otherwise (--progress
// into a log), the last one with the final state.
void SetProgress(const Opts& o, cmp::CompareOptions& options) {
  const bool tty = isatty(STDERR_FILENO) == 1;
  if (o.no_progress || !(o.progress || tty)) return;
  options.on_progress = [tty](const cmp::CompareProgress& p) {
    const bool done = p.bytes_done == p.bytes_total && p.tensors_done == p.tensors_total;
    if (tty && done) {
      std::fputs("\r\033[K", stderr);
    } else {
      const double pct = p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0;
      std::fprintf(stderr,
                   "%scompare: %.2f of %.2f GB (%.0f%%), %zu of %zu tensors, %.1f s, %.2f GB/s%s",
                   tty ? "\r\033[K" : "", p.bytes_done / 1e9, p.bytes_total / 1e9, pct,
                   p.tensors_done, p.tensors_total, p.seconds,
                   p.seconds > 0 ? p.bytes_done / p.seconds / 1e9 : 0.0, tty ? "" : "\n");
    }
    std::fflush(stderr);
  };
}

Result<cmp::LoadOptions> Load(const Opts& o) {
  cmp::LoadOptions l;
  if (!o.void_as.empty()) {
    auto dt = cmp::ParseDTypeName(o.void_as);
    if (!dt || (cmp::DTypeSize(*dt) != 2 && cmp::DTypeSize(*dt) != 1) || !cmp::IsFloating(*dt))
      return InvalidArgument("--void-as " + o.void_as +
                             ": expected bfloat16, float16, float8_e4m3fn or float8_e5m2");
    l.npy.void_as = dt;
  }
  return l;
}

// Loads both sides at once: each opens and parses the headers of thousands of
// files, on one thread per side.
std::pair<Result<cmp::Dump>, Result<cmp::Dump>> LoadBoth(const std::string& out,
                                                         const std::string& ref,
                                                         const cmp::LoadOptions& load) {
  std::optional<Result<cmp::Dump>> r;
  std::thread side([&] { r.emplace(cmp::LoadDump(ref, load)); });
  Result<cmp::Dump> o = cmp::LoadDump(out, load);
  side.join();
  return {std::move(o), std::move(*r)};
}

int Finish(const cmp::CompareReport& report, const Opts& o, const GlobalOptions& g) {
  if (!o.csv.empty()) {
    // Written as it is made (it can be 100 MB), replacing the file at the end.
    auto w = AtomicFileWriter::Open(o.csv);
    if (!w) return ReportError(w.error());
    Status s = cmp::WriteCsv(report, [&](std::string_view piece) { return w->Write(piece); });
    if (s) s = w->Commit();
    if (!s) return ReportError(s.error());
  }
  if (!o.html.empty()) {
    if (auto s = WriteFileAtomic(o.html, cmp::RenderHtml(report, static_cast<size_t>(o.html_rows)));
        !s)
      return ReportError(s.error());
  }
  if (g.json) {
    cmp::WriteJson(report, stdout);
    std::printf("\n");
  } else {
    cmp::PrintTable(report, stdout, static_cast<size_t>(o.top));
  }
  // Nothing compared is not a pass: a CI gate pointed at the wrong
  // directory, or at two dumps whose names never meet, must fail.
  if (report.pairs.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "error: no tensor pairs matched (%zu output and %zu reference tensors without a "
                 "partner): check the two paths, or pair renamed tensors with --fuzzy or --map; "
                 "`anxin compare ref OUT REF` pairs two single tensors whatever their names\n",
                 report.unmatched_out.size(), report.unmatched_ref.size());
    return kExitCheckFailed;
  }
  return report.fail > 0 ? kExitCheckFailed : kExitOk;
}

int RunDumps(const Opts& o, const GlobalOptions& g) {
  auto load = Load(o);
  if (!load) return ReportError(load.error());
  auto rules = Rules(o, g);
  if (!rules) return ReportError(rules.error());
  cmp::CompareOptions options;
  options.thresholds = *rules;
  options.threads = o.threads;
  options.match.fuzzy = o.fuzzy;
  SetProgress(o, options);
  if (!o.map_file.empty()) {
    auto text = ReadInputFile(o.map_file, "--map", kMaxYamlBytes);
    if (!text) return ReportError(text.error());
    auto renames = cmp::ParseRenames(*text, o.map_file);
    if (!renames) return ReportError(renames.error());
    options.match.renames = *renames;
  }
  auto [out, ref] = LoadBoth(o.out, o.ref, *load);
  if (!out) return ReportError(out.error().With("reading the output dump"));
  if (!ref) return ReportError(ref.error().With("reading the reference dump"));
  return Finish(cmp::CompareDumps(*out, *ref, options), o, g);
}

int RunRef(const Opts& o, const GlobalOptions& g) {
  auto load = Load(o);
  if (!load) return ReportError(load.error());
  auto rules = Rules(o, g);
  if (!rules) return ReportError(rules.error());
  auto out = cmp::LoadDump(o.one_out, *load);
  if (!out) return ReportError(out.error().With("reading the output"));
  auto ref = cmp::LoadDump(o.one_ref, *load);
  if (!ref) return ReportError(ref.error().With("reading the reference"));
  for (const auto* d : {&*out, &*ref}) {
    if (d->tensors.size() != 1)
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               d->path + " holds " + std::to_string(d->tensors.size()) +
                                   " tensors; `compare ref` takes one tensor per side (use "
                                   "`anxin compare OUT REF` for whole dumps)"));
  }
  // One tensor each: pair them whatever their names.
  out->tensors[0].name = ref->tensors[0].name;
  cmp::CompareOptions options;
  options.thresholds = *rules;
  options.threads = o.threads;
  SetProgress(o, options);
  cmp::CompareReport report = cmp::CompareDumps(*out, *ref, options);
  report.pairs[0].name = o.one_out;
  if (g.json) {
    nlohmann::json j = cmp::ToJson(report)["pairs"][0];
    std::printf("%s\n", j.dump(2).c_str());
    return report.fail > 0 ? kExitCheckFailed : kExitOk;
  }
  const cmp::PairResult& p = report.pairs[0];
  std::printf("%s vs %s: %s\n", o.one_out.c_str(), o.one_ref.c_str(),
              std::string(cmp::VerdictName(p.verdict)).c_str());
  for (const auto& why : p.reasons) std::printf("  why: %s\n", why.c_str());
  std::printf("  dtype %s vs %s, shape %s\n", p.out_dtype.c_str(), p.ref_dtype.c_str(),
              cmp::ShapeString(p.out_shape).c_str());
  if (p.metrics) {
    nlohmann::json m = cmp::MetricsToJson(*p.metrics);
    for (auto it = m.begin(); it != m.end(); ++it)
      std::printf("  %-22s %s\n", it.key().c_str(), it.value().dump().c_str());
  }
  return report.fail > 0 ? kExitCheckFailed : kExitOk;
}

void AddCommon(CLI::App& app, Opts& o) {
  app.add_option("--thresholds", o.thresholds_file,
                 "YAML file of pass/fail thresholds per dtype and per op (docs/compare.md); "
                 "default: the compare: section of --config");
  app.add_option("--void-as", o.void_as,
                 "read raw <V2/|V1 .npy elements as this dtype (bfloat16, float16, "
                 "float8_e4m3fn, float8_e5m2) when no sidecar says");
  app.add_option("--threads", o.threads, "worker threads (default: all hardware threads)")
      ->check(AtLeast(0));
  app.add_flag("--progress", o.progress,
               "show progress on stderr every half second (default: when stderr is a terminal)");
  app.add_flag("--no-progress", o.no_progress, "never show progress");
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("OUT", o->out, "output dump: msprobe dump dir, directory or tensor file");
  app.add_option("REF", o->ref, "reference dump of the same kind");
  app.add_flag("--fuzzy", o->fuzzy,
               "match by name without the call index, in order (msprobe "
               "fuzzy mode)");
  app.add_option("--map", o->map_file, "YAML file 'out name: ref name' for renamed layers");
  app.add_option("--csv", o->csv, "also write every pair as CSV to this file");
  app.add_option("--html", o->html, "also write a self-contained HTML report to this file");
  app.add_option("--top", o->top, "rows in the terminal table, worst first (0: all)")
      ->check(AtLeast(0));
  app.add_option("--html-rows", o->html_rows,
                 "rows in the HTML table at most, the worst in execution order (0: all; "
                 "default 5000)")
      ->check(AtLeast(0));
  AddCommon(app, *o);
  o->ref_cmd = app.add_subcommand("ref", "compare one output tensor file with a reference");
  o->ref_cmd
      ->add_option("OUT", o->one_out,
                   "output tensor: a .npy file, or a .npz or .safetensors file holding one tensor")
      ->required();
  o->ref_cmd
      ->add_option("REF", o->one_ref,
                   "reference tensor, in any of the same formats (e.g. written by NumPy)")
      ->required();
  AddCommon(*o->ref_cmd, *o);
  return [o](const GlobalOptions& g) -> int {
    for (const auto& [flag, value] : {std::pair{"--top", o->top}, {"--html-rows", o->html_rows}}) {
      if (value < 0)
        return ReportError(Error(
            ErrorCode::kInvalidArgument,
            std::string(flag) + " " + std::to_string(value) + ": expected a count >= 0 (0: all)"));
    }
    if (o->ref_cmd->parsed()) return RunRef(*o, g);
    if (o->out.empty() || o->ref.empty())
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "compare needs OUT and REF (see anxin compare --help)"));
    return RunDumps(*o, g);
  };
}

ANXIN_REGISTER_COMMAND(compare, "compare tensor dumps between two platforms (msprobe metrics)",
                       Setup);

}  // namespace
}  // namespace anxin::cli::compare_cmd
