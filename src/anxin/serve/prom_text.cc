#include "anxin/serve/prom_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace anxin::serve {
namespace {

std::string Escape(const std::string& v) {
  std::string s;
  for (char c : v) {
    if (c == '\\' || c == '"') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s;
}

std::string LabelText(const Labels& labels, const std::string& extra = "") {
  std::string s;
  for (const auto& [k, v] : labels)
    s += fmt::format("{}{}=\"{}\"", s.empty() ? "" : ",", k, Escape(v));
  if (!extra.empty()) s += (s.empty() ? "" : ",") + extra;
  return s.empty() ? "" : "{" + s + "}";
}

std::string Num(double v) { return fmt::format("{}", v); }

}  // namespace

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];
  ++count_;
  sum_ += v;
}

std::vector<double> LatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

void PromText::Head(const std::string& name, const std::string& help, const char* type) {
  if (!seen_.insert(name).second) return;
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PromText::Counter(const std::string& name, const std::string& help, const Labels& labels,
                       double v) {
  Head(name, help, "counter");
  out_ += name + LabelText(labels) + " " + Num(v) + "\n";
}

void PromText::Gauge(const std::string& name, const std::string& help, const Labels& labels,
                     double v) {
  Head(name, help, "gauge");
  out_ += name + LabelText(labels) + " " + Num(v) + "\n";
}

void PromText::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                         const class Histogram& h) {
  Head(name, help, "histogram");
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cum += h.counts()[i];
    out_ += name + "_bucket" + LabelText(labels, fmt::format("le=\"{}\"", h.bounds()[i])) + " " +
            std::to_string(cum) + "\n";
  }
  out_ +=
      name + "_bucket" + LabelText(labels, "le=\"+Inf\"") + " " + std::to_string(h.count()) + "\n";
  out_ += name + "_sum" + LabelText(labels) + " " + Num(h.sum()) + "\n";
  out_ += name + "_count" + LabelText(labels) + " " + std::to_string(h.count()) + "\n";
}

}  // namespace anxin::serve
