#include "anxin/net/prom_text.h"

#include <spdlog/spdlog.h>

namespace anxin::net {
namespace {

std::vector<std::string> Names(const Labels& labels) {
  std::vector<std::string> out;
  for (const auto& [k, v] : labels) out.push_back(k);
  return out;
}

std::vector<std::string> Values(const Labels& labels) {
  std::vector<std::string> out;
  for (const auto& [k, v] : labels) out.push_back(v);
  return out;
}

// The names here are fixed in the code; a refusal is a bug worth a log line,
// never a failed scrape.
template <typename F>
F* Checked(Result<F*> family) {
  if (!family) {
    spdlog::error("metrics: {}", family.error().ToString());
    return nullptr;
  }
  return *family;
}

}  // namespace

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                               2.5,   5,    10,    30,   60,  120,  300};
  return kBuckets;
}

void PromText::Counter(const std::string& name, const std::string& help, const Labels& labels,
                       double v) {
  if (auto* f = Checked(registry_.AddCounter(name, help, Names(labels)))) {
    f->WithLabels(Values(labels)).Inc(v);
  }
}

void PromText::Gauge(const std::string& name, const std::string& help, const Labels& labels,
                     double v) {
  if (auto* f = Checked(registry_.AddGauge(name, help, Names(labels)))) {
    f->WithLabels(Values(labels)).Set(v);
  }
}

void PromText::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                         const monitor::Histogram& h) {
  if (auto* f = Checked(registry_.AddHistogram(name, help, Names(labels), LatencyBuckets()))) {
    f->WithLabels(Values(labels)).Merge(h);
  }
}

}  // namespace anxin::net
