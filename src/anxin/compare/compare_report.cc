#include "anxin/compare/compare_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "anxin/base/strings.h"

namespace anxin::compare {
namespace {

using nlohmann::json;

json Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string Short(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}

std::string Csv(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string Dtypes(const PairResult& p) {
  return p.out_dtype == p.ref_dtype ? p.out_dtype : p.out_dtype + "/" + p.ref_dtype;
}

// The number plotted along execution order: MaxAbsErr for tensors, the worst
// relative statistics difference otherwise.
double ChartValue(const PairResult& p) {
  if (p.metrics) return p.metrics->max_abs_err;
  if (p.stat_diffs) return p.stat_diffs->Worst();
  return HUGE_VAL;
}

// A pair (or a pair's metrics) as JSON text, indented by depth levels, the
// way nlohmann::json::dump(2) writes it: keys in the order it keeps them
// (sorted), numbers and strings through its serializer. Written straight to
// text because building a json object per pair took longer than the rest of
// writing a report of thousands of pairs; ToJson parses this text, so there
// is one definition of a pair's fields (compare_test holds the streamed text
// to ToJson's dump byte for byte).
class PairText {
 public:
  PairText(std::string& out, int depth) : out_(out), depth_(depth) {}

  void WriteMetrics(const anxin::compare::Metrics& m) { Metrics(m); }
  void Write(const CompareReport& r, size_t i) {
    const PairResult& p = r.pairs[i];
    Open('{');
    if (p.metrics) {
      Key("metrics");
      Metrics(*p.metrics);
    } else {
      Key("metrics");
      out_ += "null";
    }
    Key("mode");
    Str(PairModeName(p.mode));
    Key("name");
    Str(p.name);
    Key("op");
    Str(p.op);
    Key("order");
    out_ += std::to_string(i);
    Key("out_dtype");
    Str(p.out_dtype);
    Key("out_shape");
    Shape(p.out_shape);
    Key("out_stats");
    Stats(p.out_stats);
    Key("reasons");
    Strings(p.reasons);
    Key("ref_dtype");
    Str(p.ref_dtype);
    if (p.ref_name != p.name) {
      Key("ref_name");
      Str(p.ref_name);
    }
    Key("ref_shape");
    Shape(p.ref_shape);
    Key("ref_stats");
    Stats(p.ref_stats);
    if (p.stat_diffs) {
      Key("stat_rel_diff");
      Stats(TensorStats{p.stat_diffs->max, p.stat_diffs->min, p.stat_diffs->mean,
                        p.stat_diffs->norm});
    }
    Key("verdict");
    Str(VerdictName(p.verdict));
    Close('}');
  }

 private:
  void Indent() { out_.append(2 * static_cast<size_t>(depth_), ' '); }
  void Open(char c) {
    out_ += c;
    ++depth_;
    first_ = true;
  }
  void Close(char c) {
    --depth_;
    out_ += '\n';
    Indent();
    out_ += c;
    first_ = false;
  }
  void Key(std::string_view k) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    Indent();
    out_ += '"';
    out_ += k;
    out_ += "\": ";
  }
  void Item() {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    Indent();
  }
  void Str(std::string_view v) { out_ += json(v).dump(); }
  void Double(double v) { out_ += Num(v).dump(); }
  void Double(const std::optional<double>& v) {
    if (v) {
      Double(*v);
    } else {
      out_ += "null";
    }
  }
  void U64(uint64_t v) { out_ += std::to_string(v); }
  template <typename T, typename Each>
  void Array(const std::vector<T>& v, Each each) {
    if (v.empty()) {
      out_ += "[]";
      return;
    }
    Open('[');
    for (const T& x : v) {
      Item();
      each(x);
    }
    Close(']');
  }
  void Shape(const std::vector<int64_t>& shape) {
    Array(shape, [&](int64_t d) { out_ += std::to_string(d); });
  }
  void Strings(const std::vector<std::string>& v) {
    Array(v, [&](const std::string& x) { Str(x); });
  }
  void Stats(const std::optional<TensorStats>& st) {
    if (!st) {
      out_ += "null";
      return;
    }
    Open('{');
    Key("max");
    Double(st->max);
    Key("mean");
    Double(st->mean);
    Key("min");
    Double(st->min);
    Key("norm");
    Double(st->norm);
    Close('}');
  }
  void Metrics(const anxin::compare::Metrics& m) {
    Open('{');
    Key("allclose");
    out_ += m.allclose ? "true" : "false";
    Key("allclose_atol");
    out_ += json(m.allclose_atol).dump();
    Key("allclose_rtol");
    out_ += json(m.allclose_rtol).dump();
    Key("allclose_violations");
    U64(m.allclose_violations);
    Key("cosine");
    Double(m.cosine);
    Key("elements");
    U64(m.elements);
    Key("euclidean_distance");
    Double(m.euclidean_distance);
    Key("finite_pairs");
    U64(m.finite_pairs);
    Key("five_thousandth_ratio");
    Double(m.five_thousandth_ratio);
    Key("inf_mismatch");
    U64(m.inf_mismatch);
    Key("max_abs_err");
    Double(m.max_abs_err);
    Key("max_rel_err");
    Double(m.max_rel_err);
    Key("max_ulp_err");
    Double(m.max_ulp_err);
    Key("mean_abs_err");
    Double(m.mean_abs_err);
    Key("mean_rel_err");
    Double(m.mean_rel_err);
    Key("nan_mismatch");
    U64(m.nan_mismatch);
    Key("one_thousandth_ratio");
    Double(m.one_thousandth_ratio);
    Key("required_atol");
    Double(m.required_atol);
    Key("required_rtol");
    Double(m.required_rtol);
    Key("rmse");
    Double(m.rmse);
    Key("ulp_above_one_ratio");
    Double(m.ulp_above_one_ratio);
    Close('}');
  }

  std::string& out_;
  int depth_;
  bool first_ = true;
};

json PairJson(const CompareReport& r, size_t i) {
  std::string text;
  PairText(text, 0).Write(r, i);
  return json::parse(text);
}

}  // namespace

json MetricsToJson(const Metrics& m) {
  std::string text;
  PairText(text, 0).WriteMetrics(m);
  return json::parse(text);
}

namespace {

// Everything but the pairs, which are null.
json HeaderJson(const CompareReport& r) {
  json j;
  j["out"] = r.out_path;
  j["ref"] = r.ref_path;
  j["summary"] = {{"pairs", r.pairs.size()},
                  {"pass", r.pass},
                  {"warn", r.warn},
                  {"fail", r.fail},
                  {"unmatched_out", r.unmatched_out.size()},
                  {"unmatched_ref", r.unmatched_ref.size()},
                  {"bytes_compared", r.bytes_compared},
                  {"seconds", r.seconds},
                  {"threads", r.threads},
                  {"kernel_blocks",
                   {{"fast", r.kernel.fast_blocks},
                    {"zeros", r.kernel.zeros_blocks},
                    {"general", r.kernel.general_blocks},
                    {"retries", r.kernel.retries},
                    {"recounted", r.kernel.recounted_blocks}}}};
  j["pairs"] = nullptr;
  j["unmatched_out"] = r.unmatched_out;
  j["unmatched_ref"] = r.unmatched_ref;
  if (r.first_divergence) {
    j["first_divergence"] = {{"order", *r.first_divergence},
                             {"name", r.pairs[*r.first_divergence].name},
                             {"op", r.pairs[*r.first_divergence].op},
                             {"modules", r.first_divergence_modules},
                             {"stack", r.first_divergence_stack}};
  } else {
    j["first_divergence"] = nullptr;
  }
  return j;
}

}  // namespace

json ToJson(const CompareReport& r) {
  json j = HeaderJson(r);
  json pairs = json::array();
  for (size_t i = 0; i < r.pairs.size(); ++i) pairs.push_back(PairJson(r, i));
  j["pairs"] = std::move(pairs);
  return j;
}

void WriteJson(const CompareReport& r, std::FILE* f) {
  // The header is printed around the pairs, which are built and printed one
  // at a time. JSON strings never hold a raw newline, so the placeholder line
  // can only be the top-level "pairs" member.
  const std::string head = HeaderJson(r).dump(2);
  const std::string mark = "\n  \"pairs\": null";
  const size_t at = head.find(mark);
  std::fwrite(head.data(), 1, at + mark.size() - 4, f);
  if (r.pairs.empty()) {
    std::fputs("[]", f);
  } else {
    std::fputs("[\n", f);
    std::string text;
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      text.assign("    ");
      PairText(text, 2).Write(r, i);
      if (i + 1 < r.pairs.size()) text += ",\n";
      std::fwrite(text.data(), 1, text.size(), f);
    }
    std::fputs("\n  ]", f);
  }
  const size_t rest = at + mark.size();
  std::fwrite(head.data() + rest, 1, head.size() - rest, f);
}

void PrintTable(const CompareReport& r, std::FILE* f, size_t limit) {
  std::vector<size_t> order = r.WorstFirst();
  if (limit && order.size() > limit) order.resize(limit);
  // Every column but the last (WHY) is as wide as its widest cell, so a
  // long value (a ULP error of 7.93317e+07, a dtype pair) moves the columns
  // after it on every row alike instead of pushing its own row out of line.
  using Row = std::array<std::string, 9>;
  std::vector<Row> rows;
  rows.reserve(order.size() + 1);
  rows.push_back(
      {"VERDICT", "NAME", "DTYPE", "COSINE", "MAX_ABS", "MAX_REL", "1/1000", "MAX_ULP", "WHY"});
  for (size_t i : order) {
    const PairResult& p = r.pairs[i];
    Row& row = rows.emplace_back();
    row[0] = VerdictName(p.verdict);
    row[1] = p.name.size() > 60 ? "..." + p.name.substr(p.name.size() - 57) : p.name;
    row[2] = Dtypes(p);
    for (size_t c = 3; c < 8; ++c) row[c] = "-";
    if (p.metrics) {
      row[3] = Short(p.metrics->cosine);
      row[4] = Short(p.metrics->max_abs_err);
      row[5] = Short(p.metrics->max_rel_err);
      row[6] = fmt::format("{:.4f}", p.metrics->one_thousandth_ratio);
      if (p.metrics->max_ulp_err) row[7] = Short(*p.metrics->max_ulp_err);
    } else if (p.stat_diffs) {
      row[5] = "stat " + Short(p.stat_diffs->Worst());
    }
    for (size_t k = 0; k < p.reasons.size(); ++k) row[8] += (k ? "; " : "") + p.reasons[k];
  }
  std::array<size_t, 9> width{};
  for (const Row& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string line;
  for (const Row& row : rows) {
    line.clear();
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 1, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks when WHY is empty
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), f);
  }
  if (order.size() < r.pairs.size())
    std::fprintf(f, "... %zu more pairs (--top 0 shows all)\n", r.pairs.size() - order.size());
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::fprintf(f, "unmatched in %s (%zu):", what, names.size());
    for (size_t k = 0; k < names.size() && k < 10; ++k) std::fprintf(f, " %s", names[k].c_str());
    std::fprintf(f, names.size() > 10 ? " ...\n" : "\n");
  };
  list("output", r.unmatched_out);
  list("reference", r.unmatched_ref);
  if (r.first_divergence) {
    const PairResult& p = r.pairs[*r.first_divergence];
    std::fprintf(f, "first divergence (execution order %zu): %s [%s]\n", *r.first_divergence,
                 p.name.c_str(), std::string(VerdictName(p.verdict)).c_str());
    if (!r.first_divergence_modules.empty()) {
      std::fprintf(f, "  in");
      for (size_t k = 0; k < r.first_divergence_modules.size(); ++k)
        std::fprintf(f, "%s %s", k ? " <" : "", r.first_divergence_modules[k].c_str());
      std::fprintf(f, "\n");
    }
    for (const auto& line : r.first_divergence_stack) {
      std::string l = line;
      for (auto& c : l)
        if (c == '\n') c = ' ';
      std::fprintf(f, "    %s\n", l.c_str());
    }
  }
  double gbs = r.seconds > 0 ? r.bytes_compared / r.seconds / 1e9 : 0;
  std::fprintf(f,
               "%zu pair%s: %zu pass, %zu warn, %zu fail; %zu + %zu unmatched; "
               "%.3f GB in %.3f s (%.2f GB/s, %u thread%s)\n",
               r.pairs.size(), r.pairs.size() == 1 ? "" : "s", r.pass, r.warn, r.fail,
               r.unmatched_out.size(), r.unmatched_ref.size(), r.bytes_compared / 1e9, r.seconds,
               gbs, r.threads, r.threads == 1 ? "" : "s");
}

Status WriteCsv(const CompareReport& r, const std::function<Status(std::string_view)>& write) {
  // Handed on in pieces of about 1 MiB: the text is never whole in memory.
  constexpr size_t kPiece = size_t{1} << 20;
  std::string s =
      "order,name,ref_name,dtype,ref_dtype,shape,ref_shape,mode,verdict,cosine,max_abs_err,"
      "max_rel_err,mean_abs_err,mean_rel_err,rmse,euclidean_distance,one_thousandth_ratio,"
      "five_thousandth_ratio,max_ulp_err,ulp_above_one_ratio,allclose,required_atol,"
      "required_rtol,nan_mismatch,inf_mismatch,out_max,out_min,out_mean,out_norm,ref_max,"
      "ref_min,ref_mean,ref_norm,stat_rel_diff,reasons\n";
  auto opt = [](const std::optional<double>& v) { return v ? Short(*v) : std::string(); };
  for (size_t i = 0; i < r.pairs.size(); ++i) {
    const PairResult& p = r.pairs[i];
    std::vector<std::string> c = {std::to_string(i),
                                  Csv(p.name),
                                  Csv(p.ref_name),
                                  p.out_dtype,
                                  p.ref_dtype,
                                  Csv(ShapeString(p.out_shape)),
                                  Csv(ShapeString(p.ref_shape)),
                                  std::string(PairModeName(p.mode)),
                                  std::string(VerdictName(p.verdict))};
    if (p.metrics) {
      const Metrics& m = *p.metrics;
      for (double v :
           {m.cosine, m.max_abs_err, m.max_rel_err, m.mean_abs_err, m.mean_rel_err, m.rmse,
            m.euclidean_distance, m.one_thousandth_ratio, m.five_thousandth_ratio})
        c.push_back(Short(v));
      c.push_back(opt(m.max_ulp_err));
      c.push_back(opt(m.ulp_above_one_ratio));
      c.push_back(m.allclose ? "true" : "false");
      c.push_back(Short(m.required_atol));
      c.push_back(Short(m.required_rtol));
      c.push_back(std::to_string(m.nan_mismatch));
      c.push_back(std::to_string(m.inf_mismatch));
    } else {
      c.insert(c.end(), 16, "");
    }
    for (const auto* s : {&p.out_stats, &p.ref_stats}) {
      if (*s) {
        for (double v : {(*s)->max, (*s)->min, (*s)->mean, (*s)->norm}) c.push_back(Short(v));
      } else {
        c.insert(c.end(), 4, "");
      }
    }
    c.push_back(p.stat_diffs ? Short(p.stat_diffs->Worst()) : "");
    std::string why;
    for (size_t k = 0; k < p.reasons.size(); ++k) why += (k ? "; " : "") + p.reasons[k];
    c.push_back(Csv(why));
    for (size_t k = 0; k < c.size(); ++k) s += (k ? "," : "") + c[k];
    s += "\n";
    if (s.size() >= kPiece) {
      ANXIN_TRY(write(s));
      s.clear();
    }
  }
  return s.empty() ? Ok() : write(s);
}

std::string RenderCsv(const CompareReport& r) {
  std::string text;
  (void)WriteCsv(r, [&](std::string_view piece) {
    text += piece;
    return Ok();
  });
  return text;
}

namespace {

// The page's head: its title and style sheet.
constexpr std::string_view kHtmlHead = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>anxin compare</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}.sub{color:#5b6475;margin-bottom:16px}
.cards{display:flex;gap:12px;margin:12px 0}.card{background:#fff;border:1px solid #dde1e8;
border-radius:6px;padding:8px 14px}.card b{font-size:20px;display:block}
.pass{color:#17803d}.warn{color:#b7791f}.fail{color:#c53030}
table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e6e9ef;padding:4px 8px;text-align:left;white-space:nowrap}
th{cursor:pointer;background:#eef1f6;position:sticky;top:0}th:hover{background:#dfe5ee}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.name{max-width:420px;overflow:hidden;text-overflow:ellipsis}
.box{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px;margin:12px 0}
pre{font-size:12px;white-space:pre-wrap;margin:4px 0}
svg text{font:11px system-ui,sans-serif;fill:#5b6475}
</style></head><body>
)";

// Sorts the table by the column clicked (data-v holds a cell's sort key).
constexpr std::string_view kHtmlSortScript = R"(<script>
(function(){
  var t=document.getElementById('t'),dir={};
  t.querySelectorAll('th').forEach(function(th,c){
    th.addEventListener('click',function(){
      var rows=Array.prototype.slice.call(t.tBodies[0].rows);
      dir[c]=!dir[c];
      rows.sort(function(a,b){
        var x=a.cells[c],y=b.cells[c],u=x.dataset.v,w=y.dataset.v,r;
        if(u!==undefined&&w!==undefined){r=parseFloat(u)-parseFloat(w);}
        else{r=x.textContent.localeCompare(y.textContent);}
        return dir[c]?r:-r;
      });
      rows.forEach(function(r){t.tBodies[0].appendChild(r);});
    });
  });
})();
</script></body></html>
)";

// The title and the cards with the counts.
std::string HtmlSummary(const CompareReport& r) {
  std::string h;
  h += "<h1>anxin compare</h1><div class=\"sub\">output <code>" + XmlEscape(r.out_path) +
       "</code> against reference <code>" + XmlEscape(r.ref_path) + "</code></div>\n";
  h += fmt::format(
      "<div class=\"cards\"><div class=\"card\"><b>{}</b>pairs</div>"
      "<div class=\"card pass\"><b>{}</b>pass</div><div class=\"card warn\"><b>{}</b>warn</div>"
      "<div class=\"card fail\"><b>{}</b>fail</div><div class=\"card\"><b>{} / {}</b>unmatched "
      "out / ref</div><div class=\"card\"><b>{:.3f} GB</b>compared in {:.2f} s</div></div>\n",
      r.pairs.size(), r.pass, r.warn, r.fail, r.unmatched_out.size(), r.unmatched_ref.size(),
      r.bytes_compared / 1e9, r.seconds);
  return h;
}

// Chart: log10 of the error along execution order, with the failing and
// warning pairs marked and the first divergence drawn as a line.
std::string HtmlChart(const CompareReport& r) {
  std::string h;
  const double W = 1000, H = 260, L = 60, R = 10, T = 10, B = 30;
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  std::vector<double> ys(r.pairs.size(), std::nan(""));
  for (size_t i = 0; i < r.pairs.size(); ++i) {
    double v = ChartValue(r.pairs[i]);
    if (std::isfinite(v)) {
      ys[i] = std::log10(std::max(v, 1e-12));
      lo = std::min(lo, ys[i]);
      hi = std::max(hi, ys[i]);
    }
  }
  if (!(lo <= hi)) lo = -12, hi = 0;
  lo = std::floor(lo);
  hi = std::max(std::ceil(hi), lo + 1);
  const size_t n = std::max<size_t>(r.pairs.size(), 2);
  auto X = [&](size_t i) { return L + (W - L - R) * static_cast<double>(i) / (n - 1); };
  // Up to kChartPoints pairs are drawn one by one; more are drawn as that
  // many runs of consecutive pairs, each at its worst error, marked when it
  // holds a failing or warning pair (four points per unit of the 930-unit
  // plot: finer than any screen shows).
  constexpr size_t kChartPoints = 4000;
  const size_t per = std::max<size_t>(1, (r.pairs.size() + kChartPoints - 1) / kChartPoints);
  auto Y = [&](double y) { return T + (H - T - B) * (hi - y) / (hi - lo); };
  h += "<div class=\"box\"><b>Error along execution order</b> (MaxAbsErr for tensors, worst "
       "relative statistics difference otherwise; log scale; red = fail, amber = warn)\n";
  h += fmt::format("<svg viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\">\n", W, H);
  for (double y = lo; y <= hi; y += 1)
    h += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e6e9ef\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">1e{5}</text>\n",
        L, W - R, Y(y), L - 6, Y(y) + 4, static_cast<int>(y));
  std::string path, marks;
  for (size_t b = 0; b < r.pairs.size(); b += per) {
    const size_t e = std::min(r.pairs.size(), b + per);
    // The run's worst error, and its worst pair (fail before warn, then the
    // larger error) with the counts of each.
    size_t top = b, fails = 0, warns = 0;
    double y = std::nan("");
    for (size_t i = b; i < e; ++i) {
      if (!std::isnan(ys[i]) && !(ys[i] <= y)) y = ys[i];
      const Verdict v = r.pairs[i].verdict;
      fails += v == Verdict::kFail;
      warns += v == Verdict::kWarn;
      const double yi = std::isnan(ys[i]) ? hi : ys[i], yt = std::isnan(ys[top]) ? hi : ys[top];
      const int ri = VerdictRank(v), rt = VerdictRank(r.pairs[top].verdict);
      if (ri > rt || (ri == rt && yi > yt)) top = i;
    }
    const double x = X(e - 1 == b ? b : (b + e - 1) / 2);
    if (!std::isnan(y)) path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x, Y(y));
    if (fails + warns == 0) continue;
    const PairResult& p = r.pairs[top];
    const double yt = std::isnan(ys[top]) ? hi : ys[top];
    std::string title = e - b == 1 ? fmt::format("{}: {}", b, XmlEscape(p.name))
                                   : fmt::format("{} .. {}: {} fail, {} warn; worst {}: {}", b,
                                                 e - 1, fails, warns, top, XmlEscape(p.name));
    marks += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>\n", x,
        Y(yt), p.verdict == Verdict::kFail ? "#c53030" : "#d69e2e", title);
  }
  h += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#7f9cc8\" stroke-width=\"1\"/>\n";
  h += marks;
  if (r.first_divergence)
    h += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" "
        "stroke=\"#c53030\" stroke-dasharray=\"4 3\"/><text x=\"{3:.1f}\" y=\"{4}\" "
        "fill=\"#c53030\">first divergence</text>\n",
        X(*r.first_divergence), T, H - B, X(*r.first_divergence) + 4, T + 10);
  h += fmt::format("<text x=\"{}\" y=\"{}\">execution order (0 .. {}{})</text></svg></div>\n", L,
                   H - 8, r.pairs.empty() ? 0 : r.pairs.size() - 1,
                   per > 1 ? fmt::format("; each point the worst of {} pairs", per) : "");
  return h;
}

// The first divergence: its reasons, enclosing modules and stack.
std::string HtmlFirstDivergence(const CompareReport& r) {
  if (!r.first_divergence) return "";
  std::string h;
  const PairResult& p = r.pairs[*r.first_divergence];
  h += "<div class=\"box\"><b>First divergence</b>: #" + std::to_string(*r.first_divergence) +
       " <code>" + XmlEscape(p.name) + "</code> <span class=\"" +
       std::string(VerdictName(p.verdict)) + "\">" + std::string(VerdictName(p.verdict)) +
       "</span>";
  for (const auto& why : p.reasons) h += " &middot; " + XmlEscape(why);
  if (!r.first_divergence_modules.empty()) {
    h += "<br>in";
    for (size_t k = 0; k < r.first_divergence_modules.size(); ++k)
      h += std::string(k ? " &lt;" : "") + " <code>" + XmlEscape(r.first_divergence_modules[k]) +
           "</code>";
  }
  if (!r.first_divergence_stack.empty()) {
    h += "<pre>";
    for (const auto& line : r.first_divergence_stack) h += XmlEscape(line) + "\n";
    h += "</pre>";
  }
  h += "</div>\n";
  return h;
}

// The table: every pair, or the worst max_rows of them in execution order.
std::string HtmlTable(const CompareReport& r, size_t max_rows) {
  std::string h;
  std::vector<size_t> rows;
  if (max_rows && r.pairs.size() > max_rows) {
    rows = r.WorstFirst();
    rows.resize(max_rows);
    std::sort(rows.begin(), rows.end());
    h += fmt::format(
        "<div class=\"sub\">The table holds the {} worst of the {} pairs, in execution order "
        "(the CSV and JSON reports hold all of them).</div>\n",
        max_rows, r.pairs.size());
  } else {
    rows.resize(r.pairs.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  }
  h += "<table id=\"t\"><thead><tr>";
  const char* cols[] = {"#",         "verdict",   "name",       "dtype",     "shape",  "cosine",
                        "MaxAbsErr", "MaxRelErr", "MeanAbsErr", "RMSE",      "1/1000", "5/1000",
                        "max ULP",   "req. atol", "req. rtol",  "stat diff", "why"};
  for (const char* c : cols) h += std::string("<th>") + c + "</th>";
  h += "</tr></thead><tbody>\n";
  auto num = [](double v) {
    // data-v carries the sort key; non-finite values sort as extremes.
    double key = std::isnan(v) ? -1e308 : std::isinf(v) ? (v > 0 ? 1e308 : -1e308) : v;
    return fmt::format("<td class=\"num\" data-v=\"{:.17g}\">{}</td>", key, Short(v));
  };
  auto none = [] { return std::string("<td class=\"num\" data-v=\"-1e308\">-</td>"); };
  for (size_t i : rows) {
    const PairResult& p = r.pairs[i];
    std::string v(VerdictName(p.verdict));
    h += fmt::format(
        "<tr><td class=\"num\" data-v=\"{}\">{}</td><td class=\"{}\" data-v=\"{}\">"
        "{}</td><td class=\"name\" title=\"{}\">{}</td><td>{}</td><td>{}</td>",
        i, i, v, VerdictRank(p.verdict), v, XmlEscape(p.name), XmlEscape(p.name),
        XmlEscape(Dtypes(p)), XmlEscape(ShapeString(p.out_shape)));
    if (p.metrics) {
      const Metrics& m = *p.metrics;
      for (double x : {m.cosine, m.max_abs_err, m.max_rel_err, m.mean_abs_err, m.rmse,
                       m.one_thousandth_ratio, m.five_thousandth_ratio})
        h += num(x);
      h += m.max_ulp_err ? num(*m.max_ulp_err) : none();
      h += num(m.required_atol);
      h += num(m.required_rtol);
    } else {
      for (int k = 0; k < 10; ++k) h += none();
    }
    h += p.stat_diffs ? num(p.stat_diffs->Worst()) : none();
    std::string why;
    for (size_t k = 0; k < p.reasons.size(); ++k) why += (k ? "; " : "") + p.reasons[k];
    h += "<td>" + XmlEscape(why) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
  return h;
}

std::string HtmlUnmatched(const CompareReport& r) {
  std::string h;
  if (!r.unmatched_out.empty() || !r.unmatched_ref.empty()) {
    h += "<div class=\"box\"><b>Unmatched</b>";
    for (const auto& n : r.unmatched_out) h += "<br>output only: <code>" + XmlEscape(n) + "</code>";
    for (const auto& n : r.unmatched_ref)
      h += "<br>reference only: <code>" + XmlEscape(n) + "</code>";
    h += "</div>\n";
  }
  return h;
}

}  // namespace

std::string RenderHtml(const CompareReport& r, size_t max_rows) {
  std::string h(kHtmlHead);
  h += HtmlSummary(r);
  h += HtmlChart(r);
  h += HtmlFirstDivergence(r);
  h += HtmlTable(r, max_rows);
  h += HtmlUnmatched(r);
  h += kHtmlSortScript;
  return h;
}

}  // namespace anxin::compare
