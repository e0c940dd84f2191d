#include "anxin/loadgen/latency_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "anxin/base/config.h"

namespace anxin::loadgen {

std::string_view TokenSourceName(TokenSource s) {
  switch (s) {
    case TokenSource::kUsage:
      return "usage";
    case TokenSource::kTokenizer:
      return "tokenizer";
    case TokenSource::kEstimate:
      return "estimated";
  }
  return "?";
}

double RequestRecord::tpot_s() const {
  if (output_tokens < 2 || first_token_ns < 0) return -1;
  return (end_ns - first_token_ns) * 1e-9 / static_cast<double>(output_tokens - 1);
}

Stats ComputeStats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.count = static_cast<int64_t>(v.size());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.min = v.front();
  s.max = v.back();
  auto pct = [&](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(0.50);
  s.p90 = pct(0.90);
  s.p99 = pct(0.99);
  return s;
}

bool Slo::Met(const RequestRecord& r) const {
  if (!r.ok()) return false;
  if (ttft && r.ttft_s() > *ttft) return false;
  if (tpot && r.tpot_s() > *tpot) return false;
  if (e2e && r.e2e_s() > *e2e) return false;
  return true;
}

std::string Slo::ToString() const {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    if (!out.empty()) out += ',';
    out += fmt::format("{}={:g}ms", name, *v * 1e3);
  };
  add("ttft", ttft);
  add("tpot", tpot);
  add("e2e", e2e);
  return out;
}

Result<Slo> ParseSlo(std::string_view text) {
  Slo slo;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format(
          "SLO item '{}' is not NAME=DURATION (e.g. ttft=500ms,tpot=50ms,e2e=10s)", item));
    }
    std::string_view name = item.substr(0, eq);
    auto seconds = ParseSeconds(item.substr(eq + 1));
    if (!seconds) return std::unexpected(std::move(seconds.error()).With(std::string(name)));
    if (*seconds <= 0) {
      return InvalidArgument(fmt::format("SLO {} must be above zero", name));
    }
    if (name == "ttft") {
      slo.ttft = *seconds;
    } else if (name == "tpot") {
      slo.tpot = *seconds;
    } else if (name == "e2e") {
      slo.e2e = *seconds;
    } else {
      return InvalidArgument(fmt::format("unknown SLO '{}': use ttft, tpot or e2e", name));
    }
  }
  if (slo.empty()) return InvalidArgument("empty SLO (use e.g. ttft=500ms,tpot=50ms)");
  return slo;
}

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo) {
  Summary s;
  s.slo = slo;
  s.duration_s = duration_s;
  s.requests = static_cast<int64_t>(records.size());
  std::vector<double> ttft, tpot, itl, e2e, delay;
  std::set<std::string_view> out_sources, in_sources;
  for (const RequestRecord& r : records) {
    if (r.sent_ns >= 0) delay.push_back((r.sent_ns - r.due_ns) * 1e-9);
    if (!r.ok()) {
      ++s.failed;
      ++s.errors[r.error];
      continue;
    }
    ++s.completed;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    out_sources.insert(TokenSourceName(r.output_source));
    in_sources.insert(TokenSourceName(r.input_source));
    if (r.first_token_ns >= 0) ttft.push_back(r.ttft_s());
    e2e.push_back(r.e2e_s());
    if (double t = r.tpot_s(); t >= 0) tpot.push_back(t);
    for (size_t i = 1; i < r.chunk_ns.size(); ++i) {
      itl.push_back((r.chunk_ns[i] - r.chunk_ns[i - 1]) * 1e-9);
    }
    if (!slo.empty() && slo.Met(r)) ++s.good;
  }
  s.ttft = ComputeStats(std::move(ttft));
  s.tpot = ComputeStats(std::move(tpot));
  s.itl = ComputeStats(std::move(itl));
  s.e2e = ComputeStats(std::move(e2e));
  s.send_delay = ComputeStats(std::move(delay));
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / duration_s;
    s.goodput = static_cast<double>(s.good) / duration_s;
  }
  if (s.requests > 0) s.attainment = static_cast<double>(s.good) / static_cast<double>(s.requests);
  auto join = [](const std::set<std::string_view>& set) {
    std::string out;
    for (std::string_view x : set) {
      if (!out.empty()) out += '+';
      out += x;
    }
    return out.empty() ? std::string("none") : out;
  };
  s.output_token_source = join(out_sources);
  s.input_token_source = join(in_sources);
  return s;
}

}  // namespace anxin::loadgen
