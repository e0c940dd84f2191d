// The Prometheus exposition of the serving simulator and the gate, written
// through the metric model (monitor/metrics.h): each scrape fills a fresh
// registry from the component's own snapshot and histograms, so the text
// format is written in one place for all of anxin.
//
//   PromText p;
//   p.Counter("anxin_gate_requests_total", "Requests", {{"route", "/v1/completions"}}, 12);
//   p.Gauge("anxin_gate_in_flight", "Requests upstream now", {}, 3);
//   Histogram h(&LatencyBuckets());
//   h.Observe(0.2);
//   p.Histogram("anxin_gate_seconds", "Latency", {}, h);
//   std::string body = p.str();
//
// A metric written twice with the same labels adds up (counters, histograms)
// or keeps the last value (gauges).
//
// Thread safety: a PromText is used by one thread; Histogram updates are
// atomic (monitor::Histogram).
#ifndef ANXIN_NET_PROM_TEXT_H_
#define ANXIN_NET_PROM_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "anxin/monitor/metric_registry.h"

namespace anxin::net {

using Labels = std::vector<std::pair<std::string, std::string>>;
using Histogram = monitor::Histogram;

// Latency buckets in seconds, 5 ms to 5 minutes (one vector for the process).
const std::vector<double>& LatencyBuckets();

class PromText {
 public:
  void Counter(const std::string& name, const std::string& help, const Labels& labels, double v);
  void Gauge(const std::string& name, const std::string& help, const Labels& labels, double v);
  // REQUIRES: h counts into LatencyBuckets().
  void Histogram(const std::string& name, const std::string& help, const Labels& labels,
                 const monitor::Histogram& h);
  std::string str() const { return registry_.TextExposition(); }

 private:
  monitor::Registry registry_;
};

}  // namespace anxin::net

#endif  // ANXIN_NET_PROM_TEXT_H_
