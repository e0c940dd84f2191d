// Prometheus text exposition for the serving simulator and the gate: a small
// writer of counters, gauges and histograms. The metric values come from each
// component's own snapshot struct, so moving them to the agent's metric model
// changes only the function that fills this writer.
//
//   PromText p;
//   p.Counter("anxin_gate_requests_total", "Requests", {{"route", "/v1/completions"}}, 12);
//   p.Gauge("anxin_gate_in_flight", "Requests upstream now", {}, 3);
//   Histogram h({0.1, 0.5, 1});  h.Observe(0.2);
//   p.Histogram("anxin_gate_seconds", "Latency", {}, h);
//   std::string body = p.str();
//
// Thread safety: values; a Histogram is not synchronised.
#ifndef ANXIN_SERVE_PROM_TEXT_H_
#define ANXIN_SERVE_PROM_TEXT_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace anxin::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket (not cumulative); the last is +Inf.
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Latency buckets in seconds, 5 ms to 5 minutes.
std::vector<double> LatencyBuckets();

class PromText {
 public:
  void Counter(const std::string& name, const std::string& help, const Labels& labels, double v);
  void Gauge(const std::string& name, const std::string& help, const Labels& labels, double v);
  void Histogram(const std::string& name, const std::string& help, const Labels& labels,
                 const class Histogram& h);
  const std::string& str() const { return out_; }

 private:
  void Head(const std::string& name, const std::string& help, const char* type);
  std::string out_;
  std::set<std::string> seen_;
};

}  // namespace anxin::serve

#endif  // ANXIN_SERVE_PROM_TEXT_H_
