#include "anxin/monitor/metric_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "anxin/base/strings.h"

namespace anxin::monitor {
namespace {

constexpr std::string_view kDroppedFamily = "anxin_metrics_series_dropped_total";

bool ValidMetricName(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view n) {
  if (n.empty() || n.starts_with("__")) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void AppendLabelValue(std::string& out, std::string_view v) {
  for (size_t i = 0; i < v.size();) {
    size_t len = Utf8SequenceLength(v, i);
    if (len == 0) {
      out += '?';
      ++i;
      continue;
    }
    if (len == 1) {
      char c = v[i];
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    } else {
      out.append(v.data() + i, len);
    }
    i += len;
  }
}

void AppendHelp(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

std::string_view TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);
  }
}

std::vector<std::string> ToStrings(std::initializer_list<std::string_view> values) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (std::string_view v : values) out.emplace_back(v);
  return out;
}

}  // namespace

std::string FormatMetricValue(double v) {
  std::string out;
  AppendValue(out, v);
  return out;
}

// ---- Histogram ---------------------------------------------------------

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;  // it would poison the sum for good
  // Upper bounds are inclusive: v lands in the first bucket with bound >= v.
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

void Histogram::Merge(const Histogram& other) {
  if (other.bounds_ != bounds_ && *other.bounds_ != *bounds_) return;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    buckets_[i].fetch_add(other.buckets_[i].load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
  }
  sum_.fetch_add(other.sum(), std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_->size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

uint64_t Histogram::count() const { return CumulativeCounts().back(); }

// ---- families ----------------------------------------------------------

namespace internal {

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names, FamilyOptions options)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      options_(options) {}

bool FamilyBase::Admit(size_t values, size_t existing) {
  if (values != label_names_.size() || existing >= options_.max_series) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

std::string FamilyBase::RenderLabels(std::span<const std::string> values) const {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += label_names_[i];
    out += "=\"";
    AppendLabelValue(out, values[i]);
    out += '"';
  }
  return out;
}

}  // namespace internal

template <typename T>
T& Family<T>::WithLabels(std::span<const std::string> values) {
  std::lock_guard lock(mu_);
  auto it = series_.find(values);
  if (it != series_.end()) return it->second->metric;
  if (!Admit(values.size(), series_.size())) {
    if (!overflow_) {
      if constexpr (std::is_same_v<T, Histogram>)
        overflow_ = std::make_unique<T>(&bounds_);
      else
        overflow_ = std::make_unique<T>();
    }
    return *overflow_;
  }
  std::vector<std::string> key(values.begin(), values.end());
  std::string rendered = RenderLabels(key);
  std::unique_ptr<Entry> e;
  if constexpr (std::is_same_v<T, Histogram>)
    e = std::make_unique<Entry>(std::move(rendered), &bounds_);
  else
    e = std::make_unique<Entry>(std::move(rendered));
  T& metric = e->metric;
  series_.emplace(std::move(key), std::move(e));
  return metric;
}

template <typename T>
T& Family<T>::WithLabels(std::initializer_list<std::string_view> values) {
  std::vector<std::string> v = ToStrings(values);
  return WithLabels(std::span<const std::string>(v));
}

template <typename T>
void Family<T>::Remove(std::span<const std::string> values) {
  std::lock_guard lock(mu_);
  auto it = series_.find(values);
  if (it != series_.end()) series_.erase(it);
}

template <typename T>
void Family<T>::Remove(std::initializer_list<std::string_view> values) {
  std::vector<std::string> v = ToStrings(values);
  Remove(std::span<const std::string>(v));
}

template <typename T>
void Family<T>::RemoveIf(const std::function<bool(const std::vector<std::string>&)>& pred) {
  std::lock_guard lock(mu_);
  std::erase_if(series_, [&](const auto& kv) { return pred(kv.first); });
}

template <typename T>
void Family<T>::WriteText(std::string& out) const {
  std::lock_guard lock(mu_);
  if (series_.empty()) return;
  out += "# HELP ";
  out += name_;
  out += ' ';
  AppendHelp(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += TypeName(type_);
  out += '\n';
  for (const auto& [key, e] : series_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      std::vector<uint64_t> counts = e->metric.CumulativeCounts();
      std::string_view sep = e->labels.empty() ? "" : ",";
      for (size_t i = 0; i < counts.size(); ++i) {
        out += name_;
        out += "_bucket{";
        out += e->labels;
        out += sep;
        out += "le=\"";
        if (i < bounds_.size())
          AppendValue(out, bounds_[i]);
        else
          out += "+Inf";
        out += "\"} ";
        fmt::format_to(std::back_inserter(out), "{}\n", counts[i]);
      }
      for (std::string_view suffix : {"_sum", "_count"}) {
        out += name_;
        out += suffix;
        if (!e->labels.empty()) {
          out += '{';
          out += e->labels;
          out += '}';
        }
        out += ' ';
        if (suffix == "_sum")
          AppendValue(out, e->metric.sum());
        else
          fmt::format_to(std::back_inserter(out), "{}", counts.back());
        out += '\n';
      }
    } else {
      out += name_;
      if (!e->labels.empty()) {
        out += '{';
        out += e->labels;
        out += '}';
      }
      out += ' ';
      AppendValue(out, e->metric.value());
      out += '\n';
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry ----------------------------------------------------------

template <typename F, typename... Extra>
Result<F*> Registry::Add(std::string name, std::string help, MetricType type,
                         std::vector<std::string> label_names, FamilyOptions options,
                         Extra&&... extra) {
  if (!ValidMetricName(name))
    return InvalidArgument(fmt::format(
        "metric name \"{}\" is not valid: use letters, digits, '_' and ':', not starting with "
        "a digit",
        name));
  if (name == kDroppedFamily)
    return InvalidArgument(fmt::format("metric name \"{}\" is the registry's own", name));
  if (type == MetricType::kCounter && !name.ends_with("_total"))
    return InvalidArgument(fmt::format("counter \"{}\": counter names end in \"_total\"", name));
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!ValidLabelName(l))
      return InvalidArgument(fmt::format(
          "metric \"{}\": label name \"{}\" is not valid: use letters, digits and '_', not "
          "starting with a digit or \"__\"",
          name, l));
    if (type == MetricType::kHistogram && l == "le")
      return InvalidArgument(fmt::format("histogram \"{}\": \"le\" is the bucket label", name));
    for (size_t k = 0; k < i; ++k)
      if (label_names[k] == l)
        return InvalidArgument(fmt::format("metric \"{}\": label \"{}\" twice", name, l));
  }
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    auto* existing = dynamic_cast<F*>(it->second.get());
    if (!existing || existing->label_names() != label_names)
      return InvalidArgument(fmt::format(
          "metric \"{}\" is already registered with another type or other labels", name));
    if constexpr (sizeof...(Extra) == 1) {
      if (((existing->bounds_ != extra) || ...))
        return InvalidArgument(
            fmt::format("histogram \"{}\" is already registered with other buckets", name));
    }
    return existing;
  }
  auto family = std::make_unique<F>(name, std::move(help), type, std::move(label_names), options);
  if constexpr (sizeof...(Extra) == 1) ((family->bounds_ = std::forward<Extra>(extra)), ...);
  F* raw = family.get();
  families_.emplace(std::move(name), std::move(family));
  return raw;
}

Result<Family<Counter>*> Registry::AddCounter(std::string name, std::string help,
                                              std::vector<std::string> label_names,
                                              FamilyOptions options) {
  return Add<Family<Counter>>(std::move(name), std::move(help), MetricType::kCounter,
                              std::move(label_names), options);
}

Result<Family<Gauge>*> Registry::AddGauge(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          FamilyOptions options) {
  return Add<Family<Gauge>>(std::move(name), std::move(help), MetricType::kGauge,
                            std::move(label_names), options);
}

Result<Family<Histogram>*> Registry::AddHistogram(std::string name, std::string help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> bounds,
                                                  FamilyOptions options) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
      return InvalidArgument(fmt::format(
          "histogram \"{}\": bucket bounds must be finite and strictly increasing (bound {} is "
          "{})",
          name, i + 1, bounds[i]));
  }
  return Add<Family<Histogram>>(std::move(name), std::move(help), MetricType::kHistogram,
                                std::move(label_names), options, std::move(bounds));
}

void Registry::AddCollectHook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hooks_.push_back(std::move(hook));
}

void Registry::WriteText(std::string& out) const {
  std::lock_guard write_lock(write_mu_);
  std::vector<std::function<void()>> hooks;
  std::vector<const internal::FamilyBase*> families;
  {
    std::lock_guard lock(mu_);
    hooks = hooks_;
    families.reserve(families_.size());
    for (const auto& [name, f] : families_) families.push_back(f.get());
  }
  for (const auto& hook : hooks) hook();
  std::vector<const internal::FamilyBase*> dropping;
  for (const auto* f : families) {
    f->WriteText(out);
    if (f->dropped() > 0) dropping.push_back(f);
  }
  if (!dropping.empty()) {
    fmt::format_to(std::back_inserter(out),
                   "# HELP {0} Series refused because their family was at its cap.\n"
                   "# TYPE {0} counter\n",
                   kDroppedFamily);
    for (const auto* f : dropping)
      fmt::format_to(std::back_inserter(out), "{}{{family=\"{}\"}} {}\n", kDroppedFamily, f->name(),
                     f->dropped());
  }
}

std::string Registry::TextExposition() const {
  std::string out;
  WriteText(out);
  return out;
}

uint64_t Registry::series_dropped() const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& [name, f] : families_) total += f->dropped();
  return total;
}

}  // namespace anxin::monitor
