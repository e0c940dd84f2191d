// The metric model: a registry of counter, gauge and histogram families with
// label sets, bounded in cardinality, written out in the Prometheus text
// exposition format 0.0.4. No transport here: the agent's HTTP server (or
// anything else) serves what WriteText produces.
//
//   Registry registry;
//   ANXIN_ASSIGN_OR_RETURN(auto* steps, registry.AddHistogram(
//       "anxin_job_step_duration_seconds", "Training step time.", {"job", "rank"},
//       {0.1, 0.5, 1, 5, 10}));
//   Histogram& h = steps->WithLabels({"llama-7b", "0"});   // keep the reference
//   h.Observe(0.42);                                        // lock-free
//   std::string body = registry.TextExposition();           // for GET /metrics
//
// Cardinality: each family holds at most FamilyOptions::max_series series.
// Asking for a new one beyond that returns a shared overflow series that is
// never written out, and counts the refusal in the self-metric
// anxin_metrics_series_dropped_total{family="..."}; memory never grows
// because of what is in label values.
//
// Exposition: one "# HELP" and one "# TYPE" line per family (families and
// series in a stable, sorted order), escaped as the format says, no
// timestamps, ending in "\n". Label values that are not valid UTF-8 have the
// offending bytes replaced by '?'. Families without series are left out.
//
// Thread safety: everything may be called from any thread. Updating a series
// (Inc, Set, Observe) is a few atomic operations and never takes a lock.
// WithLabels and Remove take the family's lock, which WriteText holds only
// while it formats that one family. A series reference stays valid until the
// series is removed (Remove, RemoveIf) or the registry is destroyed.
#ifndef ANXIN_MONITOR_METRIC_REGISTRY_H_
#define ANXIN_MONITOR_METRIC_REGISTRY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::monitor {

inline constexpr std::string_view kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// Only ever goes up. Counter names end in "_total".
class Counter {
 public:
  // REQUIRES: v >= 0 (negative values are ignored).
  void Inc(double v = 1) {
    if (v > 0) value_.fetch_add(v, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into the family's buckets (upper bounds, each
// inclusive, plus +Inf) and keeps their sum.
class Histogram {
 public:
  // REQUIRES: bounds outlives the histogram.
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double v);
  // Adds other's observations to this one, for a histogram that a component
  // keeps itself and exports through a registry. Ignored when other's
  // bounds differ.
  void Merge(const Histogram& other);

  // Cumulative counts, one per bound and a last one for +Inf (= count).
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_->size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

struct FamilyOptions {
  size_t max_series = 10000;
};

namespace internal {
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names, FamilyOptions options);
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Appends this family's lines to out.
  virtual void WriteText(std::string& out) const = 0;

 protected:
  // Checks a label set; counts a refusal. false when it is refused.
  bool Admit(size_t values, size_t existing);
  // `{a="x",b="y"}` (without the braces when brace is false), escaped.
  std::string RenderLabels(std::span<const std::string> values) const;

  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
  FamilyOptions options_;
  mutable std::mutex mu_;
  std::atomic<uint64_t> dropped_{0};
};
}  // namespace internal

template <typename T>
class Family : public internal::FamilyBase {
 public:
  using FamilyBase::FamilyBase;

  // The series with these label values (in the order of label_names()),
  // created on first use. Over the cap, or with the wrong number of values:
  // the overflow series, which is never written out.
  T& WithLabels(std::span<const std::string> values);
  T& WithLabels(std::initializer_list<std::string_view> values);

  // Removes a series (no-op when absent). REQUIRES: nobody uses its
  // reference any more.
  void Remove(std::span<const std::string> values);
  void Remove(std::initializer_list<std::string_view> values);
  // Removes every series whose label values satisfy pred.
  void RemoveIf(const std::function<bool(const std::vector<std::string>&)>& pred);
  size_t size() const {
    std::lock_guard lock(mu_);
    return series_.size();
  }

  void WriteText(std::string& out) const override;

 private:
  struct Entry {
    template <typename... Args>
    explicit Entry(std::string l, Args&&... args)
        : labels(std::move(l)), metric(std::forward<Args>(args)...) {}
    std::string labels;  // rendered once
    T metric;
  };
  // Ordered by label values; looked up by a span without copying it.
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    }
  };
  std::map<std::vector<std::string>, std::unique_ptr<Entry>, KeyLess> series_;
  std::unique_ptr<T> overflow_;

  friend class Registry;
  std::vector<double> bounds_;  // histograms only
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds a family, or returns the one already registered under this name
  // when type, label names (and buckets) are the same. kInvalidArgument for
  // a bad metric or label name (names match [a-zA-Z_:][a-zA-Z0-9_:]*, labels
  // [a-zA-Z_][a-zA-Z0-9_]* and do not start with "__"), a counter name that
  // does not end in "_total", a histogram label named "le", buckets that are
  // not strictly increasing and finite, or a name taken by a different
  // family. The family lives as long as the registry.
  Result<Family<Counter>*> AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names,
                                      FamilyOptions options = {});
  Result<Family<Gauge>*> AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names, FamilyOptions options = {});
  Result<Family<Histogram>*> AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds, FamilyOptions options = {});

  // Runs hook at the start of every WriteText (to refresh values computed at
  // read time, such as ages). Hooks run in the order added, on the thread
  // that writes; they must not call WriteText.
  void AddCollectHook(std::function<void()> hook);

  // Appends the exposition to out.
  void WriteText(std::string& out) const;
  std::string TextExposition() const;

  // Series refused over the caps, summed over families.
  uint64_t series_dropped() const;

 private:
  template <typename F, typename... Extra>
  Result<F*> Add(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names, FamilyOptions options, Extra&&... extra);

  mutable std::mutex mu_;  // families_ and hooks_
  std::map<std::string, std::unique_ptr<internal::FamilyBase>> families_;
  std::vector<std::function<void()>> hooks_;
  mutable std::mutex write_mu_;  // one writer at a time runs the hooks
};

// Formats a sample value the way the text format reads it: shortest
// round-trip decimal, "NaN", "+Inf", "-Inf".
std::string FormatMetricValue(double v);

}  // namespace anxin::monitor

#endif  // ANXIN_MONITOR_METRIC_REGISTRY_H_
