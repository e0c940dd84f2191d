#include "anxin/loadgen/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "anxin/base/strings.h"

namespace anxin::loadgen {
namespace {

using nlohmann::json;

json StatsJson(const Stats& s, double scale) {
  return {{"count", s.count},     {"mean", s.mean * scale}, {"p50", s.p50 * scale},
          {"p90", s.p90 * scale}, {"p99", s.p99 * scale},   {"min", s.min * scale},
          {"max", s.max * scale}};
}

std::string StatsLine(const char* name, const Stats& s) {
  if (s.count == 0) return fmt::format("{:<6} (no samples)\n", name);
  return fmt::format("{:<6}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}\n", name, s.mean * 1e3,
                     s.p50 * 1e3, s.p90 * 1e3, s.p99 * 1e3, s.max * 1e3);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::string Value(double v) { return fmt::format("{:g}", v); }

}  // namespace

std::string OverheadWarning(const LoopStats& loop) {
  if (loop.wall_s <= 0 || loop.cpu_s / loop.wall_s <= kBusyLoopShare) return "";
  return fmt::format(
      "warning: the load tester itself used {:.0f}% of a core; the figures may be limited by "
      "the client, not the server (run it on a less loaded machine or with less load)",
      100 * loop.cpu_s / loop.wall_s);
}

std::string AllFailedHeadline(const Summary& s, std::string_view path, std::string_view api_path) {
  if (s.requests == 0 || s.completed != 0 || s.errors.size() != 1) return "";
  const auto& [kind, count] = *s.errors.begin();
  if (count != s.requests) return "";
  int status = 0;
  if (kind.starts_with("http_")) {
    std::from_chars(kind.data() + 5, kind.data() + kind.size(), status);
  }
  std::string what = status > 0 ? fmt::format("HTTP {}", status) : kind;
  std::string cause;
  if (status == 404 && (path.ends_with("/v1") || path.ends_with("/v1/"))) {
    cause = fmt::format(
        "the URL already ends in /v1; give --url http://HOST:PORT (the API adds {}) or the "
        "whole path with --endpoint",
        api_path);
  } else if (status == 404) {
    cause = "the server has no such path; check --api and --endpoint";
  } else if (status == 401 || status == 403) {
    cause = "the server wants a key; set OPENAI_API_KEY or give -H 'Authorization: Bearer KEY'";
  } else if (status == 400 || status == 422) {
    cause = "the server refused the request body; check --model and --api";
  } else if (status == 405) {
    cause = "the path does not take POST; check --api and --endpoint";
  } else if (status >= 500) {
    cause = "the server failed on every request; read its log";
  } else if (kind == "connect") {
    cause = "no connection could be made; is the server up at --url?";
  } else if (kind == "timeout") {
    cause = "no response within --timeout";
  } else {
    cause = "see the errors line below";
  }
  return fmt::format("every request ({} of {}) failed with {} at {}: {}", count, s.requests, what,
                     path, cause);
}

std::string SummaryText(const Summary& s, const LoopStats& loop) {
  std::string out;
  out += fmt::format("requests        {} completed, {} failed, of {}\n", s.completed, s.failed,
                     s.requests);
  out += fmt::format("duration        {:.2f} s\n", s.duration_s);
  out += fmt::format("tokens          {} in, {} out (input counts: {}; output counts: {})\n",
                     s.input_tokens, s.output_tokens, s.input_token_source, s.output_token_source);
  out += fmt::format("throughput      {:.2f} req/s, {:.1f} output tok/s, {:.1f} total tok/s\n",
                     s.request_throughput, s.output_throughput, s.total_token_throughput);
  if (!s.slo.empty()) {
    out += fmt::format("goodput         {:.2f} req/s meet {} ({} of {}, {:.1f}%)\n", s.goodput,
                       s.slo.ToString(), s.good, s.requests, 100 * s.attainment);
  }
  out += fmt::format("{:<6}{:>10}{:>10}{:>10}{:>10}{:>10}   (ms)\n", "", "mean", "p50", "p90",
                     "p99", "max");
  out += StatsLine("TTFT", s.ttft);
  out += StatsLine("TPOT", s.tpot);
  out += StatsLine("ITL", s.itl);
  out += StatsLine("E2E", s.e2e);
  out += StatsLine("wait", s.send_delay);
  if (!s.errors.empty()) {
    out += "errors         ";
    for (const auto& [kind, n] : s.errors) out += fmt::format(" {} {}", kind, n);
    out += "\n";
  }
  out += fmt::format(
      "load tester     {:.2f} CPU-s in {:.2f} s ({:.1f}% of a core), peak {} open streams, {} "
      "connections\n",
      loop.cpu_s, loop.wall_s, loop.wall_s > 0 ? 100 * loop.cpu_s / loop.wall_s : 0.0,
      loop.peak_open, loop.connections);
  if (std::string w = OverheadWarning(loop); !w.empty()) out += w + "\n";
  return out;
}

json SummaryJson(const Summary& s, const LoopStats& loop) {
  json j = {
      {"requests", s.requests},
      {"completed", s.completed},
      {"failed", s.failed},
      {"duration_s", s.duration_s},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"input_token_source", s.input_token_source},
      {"output_token_source", s.output_token_source},
      {"request_throughput", s.request_throughput},
      {"output_token_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"ttft_ms", StatsJson(s.ttft, 1e3)},
      {"tpot_ms", StatsJson(s.tpot, 1e3)},
      {"itl_ms", StatsJson(s.itl, 1e3)},
      {"e2e_ms", StatsJson(s.e2e, 1e3)},
      {"wait_ms", StatsJson(s.send_delay, 1e3)},
      {"errors", s.errors},
      {"load_tester",
       {{"cpu_s", loop.cpu_s},
        {"wall_s", loop.wall_s},
        {"core_share", loop.wall_s > 0 ? loop.cpu_s / loop.wall_s : 0.0},
        {"peak_open_streams", loop.peak_open},
        {"connections", loop.connections},
        {"retries", loop.retries},
        {"wakeups", loop.wakeups}}},
  };
  if (!s.slo.empty()) {
    j["slo"] = {{"spec", s.slo.ToString()},
                {"good", s.good},
                {"goodput", s.goodput},
                {"attainment", s.attainment}};
  }
  return j;
}

std::string RecordsCsv(const std::vector<RequestRecord>& records) {
  std::string out =
      "index,due_ms,sent_ms,ttft_ms,e2e_ms,tpot_ms,chunks,input_tokens,output_tokens,"
      "requested_tokens,token_source,http_status,error,error_detail\n";
  auto ms = [](double s) { return fmt::format("{:.3f}", s * 1e3); };
  for (const RequestRecord& r : records) {
    bool ok = r.ok();
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.index, ms(r.due_ns * 1e-9),
        r.sent_ns >= 0 ? ms(r.sent_ns * 1e-9) : "",
        ok && r.first_token_ns >= 0 ? ms(r.ttft_s()) : "", r.end_ns >= 0 ? ms(r.e2e_s()) : "",
        ok && r.tpot_s() >= 0 ? ms(r.tpot_s()) : "", r.chunk_ns.size(),
        ok ? std::to_string(r.input_tokens) : "", ok ? std::to_string(r.output_tokens) : "",
        r.requested_tokens, ok ? std::string(TokenSourceName(r.output_source)) : "", r.http_status,
        r.error, CsvField(r.error_detail));
  }
  return out;
}

Result<SweepSpec> ParseSweep(std::string_view text) {
  SweepSpec spec;
  size_t eq = text.find('=');
  std::string_view kind = text.substr(0, eq);
  if (eq == std::string_view::npos || (kind != "concurrency" && kind != "rate")) {
    return InvalidArgument(fmt::format(
        "'{}' is not a sweep: use concurrency=1,2,4,8 or rate=1,2,4 (requests per second)", text));
  }
  spec.kind = kind == "concurrency" ? SweepSpec::kConcurrency : SweepSpec::kRate;
  std::string_view list = text.substr(eq + 1);
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const double v = ParseDouble(item).value_or(0);
    bool whole = spec.kind == SweepSpec::kRate || v == std::floor(v);
    if (!(v > 0) || !std::isfinite(v) || !whole) {
      return InvalidArgument(
          fmt::format("sweep value '{}' is not a positive {}", item,
                      spec.kind == SweepSpec::kRate ? "number" : "whole number"));
    }
    spec.values.push_back(v);
  }
  if (spec.values.empty()) return InvalidArgument(fmt::format("sweep '{}' has no values", text));
  return spec;
}

int BestPoint(const std::vector<SweepPoint>& points, const Slo& slo) {
  int best = -1;
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    if (!slo.empty() && !p.meets) continue;
    double score = slo.empty() ? p.summary.output_throughput : p.summary.goodput;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const Summary& b = points[static_cast<size_t>(best)].summary;
    double best_score = slo.empty() ? b.output_throughput : b.goodput;
    if (score > best_score) best = static_cast<int>(i);
  }
  return best;
}

std::string SweepText(const std::vector<SweepPoint>& points, const SweepSpec& spec, const Slo& slo,
                      double attainment_target) {
  std::string out = fmt::format("{:>12}{:>8}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>9}{:>8}\n",
                                spec.name(), "ok", "failed", "req/s", "out tok/s", "TTFT p50",
                                "TTFT p99", "TPOT p50", "TPOT p99", "goodput", "SLO");
  for (const SweepPoint& p : points) {
    const Summary& s = p.summary;
    out += fmt::format(
        "{:>12}{:>8}{:>9}{:>10.2f}{:>10.1f}{:>10.1f}{:>10.1f}{:>10.2f}{:>10.2f}"
        "{:>9}{:>8}\n",
        Value(p.value), s.completed, s.failed, s.request_throughput, s.output_throughput,
        s.ttft.p50 * 1e3, s.ttft.p99 * 1e3, s.tpot.p50 * 1e3, s.tpot.p99 * 1e3,
        slo.empty() ? std::string("-") : fmt::format("{:.2f}", s.goodput),
        slo.empty() ? std::string("-")
                    : fmt::format("{:.0f}%{}", 100 * s.attainment, p.meets ? "" : "!"));
  }
  out += "(latencies in ms; goodput in req/s meeting the SLOs; ! below the attainment target)\n";
  int best = BestPoint(points, slo);
  if (slo.empty()) {
    if (best >= 0) {
      out += fmt::format("best {}: {} ({:.1f} output tok/s; no --slo given, so by throughput)\n",
                         spec.name(), Value(points[static_cast<size_t>(best)].value),
                         points[static_cast<size_t>(best)].summary.output_throughput);
    }
  } else if (best < 0) {
    out += fmt::format("no {} meets {} for {:.0f}% of requests\n", spec.name(), slo.ToString(),
                       100 * attainment_target);
  } else {
    const SweepPoint& p = points[static_cast<size_t>(best)];
    out += fmt::format(
        "best {}: {} ({:.2f} req/s goodput, {:.0f}% of requests meet {}; target {:.0f}%)\n",
        spec.name(), Value(p.value), p.summary.goodput, 100 * p.summary.attainment, slo.ToString(),
        100 * attainment_target);
  }
  return out;
}

json SweepJson(const std::vector<SweepPoint>& points, const SweepSpec& spec, const Slo& slo,
               double attainment_target) {
  json j;
  j["sweep"] = spec.name();
  j["attainment_target"] = attainment_target;
  if (!slo.empty()) j["slo"] = slo.ToString();
  json arr = json::array();
  for (const SweepPoint& p : points) {
    json e = SummaryJson(p.summary, p.loop);
    e[std::string(spec.name())] = p.value;
    e["meets_slo"] = p.meets;
    arr.push_back(std::move(e));
  }
  j["points"] = std::move(arr);
  int best = BestPoint(points, slo);
  j["best"] = best < 0 ? json(nullptr) : json(points[static_cast<size_t>(best)].value);
  return j;
}

std::string LatencySvg(const std::vector<SweepPoint>& points, const SweepSpec& spec, const Slo& slo,
                       const std::string& title) {
  constexpr double kPanelW = 300, kPanelH = 220, kLeft = 60, kTop = 50, kGap = 70;
  const double width = kLeft + 3 * kPanelW + 2 * kGap + 30;
  const double height = kTop + kPanelH + 70;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"22\" font-size=\"15\">{}</text>\n",
      width, height, kLeft, XmlEscape(title));
  if (points.empty()) return svg + "</svg>\n";
  double xmin = points.front().value, xmax = xmin;
  for (const SweepPoint& p : points) {
    xmin = std::min(xmin, p.value);
    xmax = std::max(xmax, p.value);
  }
  bool logx = xmax / xmin >= 8;
  auto xpos = [&](double v, double x0) {
    if (xmax == xmin) return x0 + kPanelW / 2;
    double f = logx ? std::log(v / xmin) / std::log(xmax / xmin) : (v - xmin) / (xmax - xmin);
    return x0 + 10 + f * (kPanelW - 20);
  };
  struct Panel {
    const char* name;
    Stats Summary::*field;
    std::optional<double> limit;
  };
  const Panel panels[] = {{"TTFT", &Summary::ttft, slo.ttft},
                          {"TPOT", &Summary::tpot, slo.tpot},
                          {"E2E", &Summary::e2e, slo.e2e}};
  int best = BestPoint(points, slo);
  for (int k = 0; k < 3; ++k) {
    const Panel& panel = panels[k];
    double x0 = kLeft + k * (kPanelW + kGap);
    double ymax = panel.limit ? *panel.limit * 1e3 : 0;
    for (const SweepPoint& p : points) ymax = std::max(ymax, (p.summary.*panel.field).p99 * 1e3);
    if (ymax <= 0) ymax = 1;
    ymax *= 1.1;
    auto ypos = [&](double ms) { return kTop + kPanelH - ms / ymax * kPanelH; };
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
        "stroke=\"#888\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\" font-weight=\"bold\">{} (ms)</text>\n",
        x0, kTop, kPanelW, kPanelH, x0, kTop - 8, panel.name);
    for (int t = 0; t <= 4; ++t) {
      double ms = ymax / 1.1 * t / 4;
      svg += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#555\">{:.3g}</text>\n",
          x0, x0 + kPanelW, ypos(ms), ypos(ms), x0 - 4, ypos(ms) + 4, ms);
    }
    for (const SweepPoint& p : points) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
          xpos(p.value, x0), kTop + kPanelH + 16, Value(p.value));
    }
    svg +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}{}</text>\n",
                    x0 + kPanelW / 2, kTop + kPanelH + 34,
                    spec.kind == SweepSpec::kConcurrency ? "concurrency" : "request rate (req/s)",
                    logx ? " (log scale)" : "");
    if (panel.limit) {
      svg += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d62728\" "
          "stroke-dasharray=\"6,4\"/><text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\" "
          "text-anchor=\"end\">SLO</text>\n",
          x0, x0 + kPanelW, ypos(*panel.limit * 1e3), ypos(*panel.limit * 1e3), x0 + kPanelW - 4,
          ypos(*panel.limit * 1e3) - 4);
    }
    struct Line {
      double Stats::*q;
      const char* color;
      const char* label;
    };
    for (const Line& line :
         {Line{&Stats::p50, "#1f77b4", "p50"}, Line{&Stats::p99, "#ff7f0e", "p99"}}) {
      std::string pts;
      for (const SweepPoint& p : points) {
        pts += fmt::format("{:.1f},{:.1f} ", xpos(p.value, x0),
                           ypos((p.summary.*panel.field).*line.q * 1e3));
      }
      svg +=
          fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                      pts, line.color);
      for (const SweepPoint& p : points) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                           xpos(p.value, x0), ypos((p.summary.*panel.field).*line.q * 1e3),
                           line.color);
      }
    }
    if (best >= 0) {
      double bx = xpos(points[static_cast<size_t>(best)].value, x0);
      svg += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#2ca02c\" "
          "stroke-dasharray=\"2,3\"/>\n",
          bx, bx, kTop, kTop + kPanelH);
    }
  }
  double ly = height - 12;
  svg += fmt::format(
      "<text x=\"{:.0f}\" y=\"{:.0f}\"><tspan fill=\"#1f77b4\">&#9632; p50</tspan>  "
      "<tspan fill=\"#ff7f0e\">&#9632; p99</tspan>  <tspan fill=\"#d62728\">- - SLO</tspan>  "
      "<tspan fill=\"#2ca02c\">: best {}{}</tspan></text>\n",
      kLeft, ly, spec.name(),
      best >= 0 ? " = " + Value(points[static_cast<size_t>(best)].value) : std::string(" (none)"));
  return svg + "</svg>\n";
}

}  // namespace anxin::loadgen
