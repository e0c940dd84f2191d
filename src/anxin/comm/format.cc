#include "anxin/comm/format.h"

#include <fmt/format.h>

#include <cmath>

#include "anxin/base/strings.h"

namespace anxin::comm {

std::string FitNumber(double value, int width) {
  for (int decimals : {2, 1, 0}) {
    std::string s = fmt::format("{:>{}.{}f}", value, width, decimals);
    if (static_cast<int>(s.size()) <= width) return s;
  }
  return fmt::format("{:>{}.{}e}", value, width, width >= 7 ? 1 : 0);
}

namespace {

std::string Cell(const std::optional<Sample>& s, bool has_check) {
  if (!s) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "", "", "", "");
  std::string wrong = (!has_check || s->wrong < 0) ? "N/A" : std::to_string(s->wrong);
  return fmt::format("  {}  {}  {}  {:>6}", FitNumber(s->time_us, 7), FitNumber(s->algbw, 6),
                     FitNumber(s->busbw, 6), wrong);
}

std::string Percentiles(const std::optional<Sample>& s) {
  if (!s || !s->p50_us || !s->p99_us) return fmt::format("  {:>7}  {:>7}", "", "");
  return fmt::format("  {}  {}", FitNumber(*s->p50_us, 7), FitNumber(*s->p99_us, 7));
}

bool HasPercentiles(const CommRun& run) {
  for (const Row& r : run.rows) {
    if ((r.out_of_place && r.out_of_place->p50_us) || (r.in_place && r.in_place->p50_us))
      return true;
  }
  return false;
}

std::string BwUnit(const CommRun& run) { return run.bw_unit_bytes == 1e9 ? "GB/s" : "GiB/s"; }

}  // namespace

std::string FormatTable(const CommRun& run) {
  std::string out;
  const bool pct = HasPercentiles(run);
  const std::string unit = "(" + BwUnit(run) + ")";
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                "
      "       in-place          {}\n",
      "", "", "", "", "", pct ? "  out-of-place      in-place" : "");
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  "
      "{:>6}  {:>6}  {:>6}{}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong",
      pct ? fmt::format("  {:>7}  {:>7}  {:>7}  {:>7}", "p50", "p99", "p50", "p99") : "");
  out += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  "
      "{:>6}  {:>6}  {:>6}{}\n",
      "(B)", "(elements)", "", "", "", "(us)", unit, unit, "", "(us)", unit, unit, "",
      pct ? fmt::format("  {:>7}  {:>7}  {:>7}  {:>7}", "(us)", "(us)", "(us)", "(us)") : "");
  // No trailing blanks in the header lines.
  std::string trimmed;
  for (size_t start = 0; start < out.size();) {
    size_t end = out.find('\n', start);
    std::string line = out.substr(start, end - start);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    trimmed += line + "\n";
    start = end + 1;
  }
  out = std::move(trimmed);
  const std::string redop = run.redop ? std::string(RedOpName(*run.redop)) : "none";
  for (const Row& r : run.rows) {
    out += fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", r.bytes, r.count, TypeName(run.type),
                       redop, run.root);
    out += Cell(r.out_of_place, run.checked);
    out += Cell(r.in_place, run.checked);
    if (pct) out += Percentiles(r.out_of_place) + Percentiles(r.in_place);
    // No trailing blanks when a side is missing.
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  if (run.checked) {
    const int64_t wrong = TotalWrong(run);
    out += fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  }
  if (run.avg_busbw) out += fmt::format("# Avg bus bandwidth    : {:g}\n", *run.avg_busbw);
  return out;
}

std::string FormatSkew(const SkewReport& skew) {
  std::string out = fmt::format(
      "#\n# Slow-rank finding: arrival skew at {} timed collectives (clocks aligned to rank 0)\n",
      skew.collectives);
  out += fmt::format("# {:>5}  {:<16}  {:>12}  {:>12}  {:>12}\n", "rank", "host", "median late",
                     "p99 late", "entered last");
  out += fmt::format("# {:>5}  {:<16}  {:>12}  {:>12}  {:>12}\n", "", "", "(us)", "(us)", "");
  for (const RankSkew& k : skew.ranks) {
    out += fmt::format("# {:>5}  {:<16}  {}  {}  {:>11.0f}%{}\n", k.rank,
                       k.host.empty() ? "-" : k.host, FitNumber(k.median_late_us, 12),
                       FitNumber(k.p99_late_us, 12), k.last_share * 100,
                       skew.slow_rank && *skew.slow_rank == k.rank ? "  <- slow" : "");
  }
  out += fmt::format("# Slow rank: {}{}\n", skew.slow_rank ? "" : "none; ", skew.why);
  return out;
}

std::string FormatMatrix(const MatrixReport& m, const std::vector<std::string>& hosts) {
  std::string out;
  const int n = m.ranks;
  auto table = [&](const std::vector<double>& v, const std::vector<bool>& flag, bool lower) {
    out += fmt::format("# {:>9}", "from\\to");
    for (int j = 0; j < n; ++j) out += fmt::format("  {:>8}", j);
    out += "\n";
    for (int i = 0; i < n; ++i) {
      out += fmt::format("# {:>9}", i);
      for (int j = 0; j < n; ++j) {
        const size_t c = static_cast<size_t>(i * n + j);
        if (i == j || (lower && j < i)) {
          out += fmt::format("  {:>8}", "-");
        } else {
          out += fmt::format("  {}{}", FitNumber(v[c], 7), flag[c] ? "*" : " ");
        }
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      if (static_cast<size_t>(i) < hosts.size()) out += "   " + hosts[i];
      out += "\n";
    }
  };
  out += fmt::format(
      "#\n# Link matrix: {} ranks in {} rounds of disjoint pairs\n# Bandwidth (GB/s, {} "
      "messages streamed from the row rank to the column rank)\n",
      n, m.rounds, FormatBytes(m.bytes, ByteUnits::kExact));
  table(m.bw_gbs, m.bw_outlier, false);
  out += fmt::format("# Latency (us, half of a {} round trip)\n",
                     FormatBytes(m.lat_bytes, ByteUnits::kExact));
  table(m.lat_us, m.lat_outlier, true);
  out += fmt::format("# * outlier. {}\n", m.why);
  return out;
}

std::string FormatSoak(const SoakReport& soak) {
  std::string out =
      fmt::format("#\n# Soak: {:.1f} s, {} passes over the sizes\n", soak.seconds, soak.passes);
  out += fmt::format("# {:>10}  {:>10}  {:>10}  {:>8}  {:>10}  {:>10}  {:>10}\n", "size", "first",
                     "last", "drift", "p50", "p99", "max");
  out += fmt::format("# {:>10}  {:>10}  {:>10}  {:>8}  {:>10}  {:>10}  {:>10}\n", "(B)", "(us)",
                     "(us)", "(%)", "(us)", "(us)", "(us)");
  for (const SoakSize& s : soak.sizes) {
    out += fmt::format("  {:>10}  {}  {}  {:>+8.1f}  {}  {}  {}\n", s.bytes,
                       FitNumber(s.first_us, 10), FitNumber(s.last_us, 10), s.drift_pct,
                       FitNumber(s.p50_us, 10), FitNumber(s.p99_us, 10), FitNumber(s.max_us, 10));
  }
  return out;
}

std::string FormatRun(const CommRun& run) {
  std::string out;
  if (run.matrix && !run.op) {
    out += fmt::format("# anxin bench comm --matrix: {} ranks, {}\n", run.ranks,
                       run.engine.empty() ? "from " + run.source : "engine " + run.engine);
  } else {
    out += fmt::format(
        "# anxin bench comm: {} on {} ranks, {}{}, {} {}, root {}, iters {}, warmup {}, "
        "check {}\n",
        run.op ? std::string(OpName(*run.op)) : "unknown op", run.ranks,
        run.engine.empty() ? "from " + run.source : "engine " + run.engine,
        run.algo.empty() ? "" : ", algorithm " + run.algo, TypeName(run.type),
        run.redop ? std::string(RedOpName(*run.redop)) : "none", run.root, run.iters, run.warmup,
        run.checked ? "on" : "off");
  }
  if (!run.engine_version.empty() || !run.algo_effective.empty()) {
    out += fmt::format(
        "# library: {}{}\n", run.engine_version.empty() ? "?" : run.engine_version,
        run.algo_effective.empty() ? "" : "; algorithm in effect: " + run.algo_effective);
  }
  for (size_t r = 0; r < run.hosts.size(); ++r) {
    out += fmt::format("#  Rank {:>2} on {}\n", r, run.hosts[r]);
  }
  out += "#\n";
  if (!run.rows.empty()) out += FormatTable(run);
  if (run.skew) out += FormatSkew(*run.skew);
  if (run.matrix) out += FormatMatrix(*run.matrix, run.hosts);
  if (run.soak) out += FormatSoak(*run.soak);
  return out;
}

std::string FormatSweep(const SweepReport& sweep) {
  std::string out;
  if (sweep.runs.empty()) return out;
  const CommRun& first = sweep.runs[0];
  out += fmt::format("# Algorithm sweep: {} on {} ranks, engine {}, {} (out-of-place time, us)\n",
                     first.op ? std::string(OpName(*first.op)) : "?", first.ranks, first.engine,
                     TypeName(first.type));
  size_t width = 10;
  for (const auto& a : sweep.algos) width = std::max(width, a.size());
  out += fmt::format("# {:>10}", "size");
  for (const auto& a : sweep.algos) out += fmt::format("  {:>{}}", a, width);
  out += fmt::format("  {}\n", "fastest");
  for (size_t i = 0; i < first.rows.size(); ++i) {
    out += fmt::format("  {:>10}", first.rows[i].bytes);
    for (const CommRun& run : sweep.runs) {
      const Row* row = i < run.rows.size() ? &run.rows[i] : nullptr;
      const auto* s = row ? (row->out_of_place ? &row->out_of_place : &row->in_place) : nullptr;
      out += fmt::format("  {:>{}}", s && *s ? FitNumber((*s)->time_us, 10) : "-", width);
    }
    out += fmt::format("  {}\n", i < sweep.best.size() ? sweep.best[i] : "");
  }
  if (sweep.crossovers.empty()) {
    out += fmt::format("# Crossovers: none; {} is fastest at every size\n",
                       sweep.best.empty() ? "?" : sweep.best.front());
  } else {
    for (const Crossover& c : sweep.crossovers) {
      out += fmt::format("# Crossover at {} ({}): {} overtakes {}\n", c.bytes,
                         FormatBytes(c.bytes, ByteUnits::kExact), c.to, c.from);
    }
  }
  return out;
}

std::string FormatCompare(const CompareReport& r) {
  std::string out;
  out += fmt::format("# A: {}\n# B: {}\n", r.label_a, r.label_b);
  for (const auto& note : r.notes) out += "# note: " + note + "\n";
  out += fmt::format("# {:>10}  {:>10}  {:>10}  {:>8}  {:>9}  {:>9}  {:>8}\n", "size", "time A",
                     "time B", "change", r.bw_kind + " A", r.bw_kind + " B", "change");
  out += fmt::format("# {:>10}  {:>10}  {:>10}  {:>8}  {:>9}  {:>9}  {:>8}\n", "(B)", "(us)",
                     "(us)", "(%)", "(GB/s)", "(GB/s)", "(%)");
  for (const CompareRow& row : r.rows) {
    out +=
        fmt::format("  {:>10}  {}  {}  {:>+8.1f}  {}  {}  {:>+8.1f}\n", row.bytes,
                    FitNumber(row.time_a_us, 10), FitNumber(row.time_b_us, 10), row.time_change_pct,
                    FitNumber(row.bw_a, 9), FitNumber(row.bw_b, 9), row.bw_change_pct);
  }
  if (!r.only_a.empty() || !r.only_b.empty()) {
    out += fmt::format("# sizes only in A: {}; only in B: {}\n", r.only_a.size(), r.only_b.size());
  }
  if (r.mean_time_change_pct) {
    out += fmt::format("# Mean change: time {:+.1f}%, {} {:+.1f}%; worst {} change {:+.1f}%\n",
                       *r.mean_time_change_pct, r.bw_kind, r.mean_bw_change_pct.value_or(0),
                       r.bw_kind, r.worst_bw_change_pct.value_or(0));
  } else {
    out += "# No size is in both results.\n";
  }
  return out;
}

namespace {

std::string CsvSample(const std::optional<Sample>& s) {
  if (!s) return ",,,,,";
  auto opt = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.3f}", *v) : std::string();
  };
  return fmt::format("{:.3f},{:.4f},{:.4f},{},{},{}", s->time_us, s->algbw, s->busbw,
                     s->wrong < 0 ? std::string() : std::to_string(s->wrong), opt(s->p50_us),
                     opt(s->p99_us));
}

}  // namespace

std::string FormatCsv(const CommRun& run) {
  std::string out =
      "op,engine,ranks,algo,type,redop,root,size,count,"
      "oop_time_us,oop_algbw,oop_busbw,oop_wrong,oop_p50_us,oop_p99_us,"
      "ip_time_us,ip_algbw,ip_busbw,ip_wrong,ip_p50_us,ip_p99_us\n";
  for (const Row& r : run.rows) {
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n",
                    run.op ? std::string(OpName(*run.op)) : "", run.engine, run.ranks, run.algo,
                    TypeName(run.type), run.redop ? std::string(RedOpName(*run.redop)) : "none",
                    run.root, r.bytes, r.count, CsvSample(r.out_of_place), CsvSample(r.in_place));
  }
  return out;
}

}  // namespace anxin::comm
