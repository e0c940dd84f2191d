// Compares two dumps: matches their tensors, computes the metrics of every
// pair on a pool of threads, and decides verdicts.
//
//   ANXIN_ASSIGN_OR_RETURN(Dump npu, LoadDump("npu/step0/rank0", {}));
//   ANXIN_ASSIGN_OR_RETURN(Dump gpu, LoadDump("gpu/step0/rank0", {}));
//   CompareReport report = CompareDumps(npu, gpu, CompareOptions{});
//   if (report.fail > 0 && report.first_divergence) {
//     const PairResult& first = report.pairs[*report.first_divergence];
//     std::printf("first divergence: %s (%s)\n", first.name.c_str(), first.op.c_str());
//   }
//
// Work is split into chunks of a few MiB across and within tensors; the
// metric kernel decodes each chunk's stored dtype itself, in L1-sized blocks
// (never a whole tensor as float64), and the chunk's mapped pages are
// released once read, so memory stays bounded. Chunk results are merged in a
// fixed order: the numbers depend neither on the number of threads nor on
// the instruction set the kernel runs on.
#ifndef ANXIN_COMPARE_DUMP_COMPARE_H_
#define ANXIN_COMPARE_DUMP_COMPARE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anxin/compare/dump.h"
#include "anxin/compare/matcher.h"
#include "anxin/compare/tensor_metrics.h"
#include "anxin/compare/verdict.h"

namespace anxin::compare {

// How far the element-wise work of CompareDumps has got.
struct CompareProgress {
  uint64_t bytes_done = 0, bytes_total = 0;  // tensor bytes of both sides
  size_t tensors_done = 0, tensors_total = 0;
  double seconds = 0;  // since the work started
};

struct CompareOptions {
  MatchOptions match;
  ThresholdRules thresholds;
  unsigned threads = 0;  // 0: one per hardware thread
  // Called from a worker thread at most every progress_interval while tensors
  // are compared (one call at a time), and once with the final state at the
  // end. Unset: no calls.
  std::function<void(const CompareProgress&)> on_progress;
  std::chrono::milliseconds progress_interval{500};
};

enum class PairMode {
  kTensor,         // element-wise metrics
  kStatistics,     // Max/Min/Mean/Norm only (msprobe statistics dumps)
  kShapeMismatch,  // cannot be compared element-wise
  kNoData,         // one side has neither data nor statistics
};
std::string_view PairModeName(PairMode m);

// A value kept on the heap when there is one, used like std::optional<T>
// (bool, *, ->, reset): an empty one costs a pointer, not sizeof(T). For
// large members that many rows lack (the metrics of statistics pairs).
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(std::nullopt_t) {}                               // implicit, as std::optional's
  Boxed(T v) : p_(std::make_unique<T>(std::move(v))) {}  // implicit too
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

struct PairResult {
  std::string name;      // output-side name
  std::string ref_name;  // differs under fuzzy matching or renames
  std::string op;
  std::string out_dtype, ref_dtype;
  std::vector<int64_t> out_shape, ref_shape;
  PairMode mode = PairMode::kTensor;
  Boxed<Metrics> metrics;  // kTensor
  std::optional<TensorStats> out_stats, ref_stats;
  std::optional<StatDiffs> stat_diffs;
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;
};

struct CompareReport {
  std::string out_path, ref_path;
  std::vector<PairResult> pairs;  // execution order of the output dump
  std::vector<std::string> unmatched_out, unmatched_ref;
  size_t pass = 0, warn = 0, fail = 0;
  // Index into pairs of the first failing pair in execution order (or, when
  // none fails, the first warning), with its call stack from stack.json and
  // the module calls it ran in from construct.json (innermost first).
  std::optional<size_t> first_divergence;
  std::vector<std::string> first_divergence_stack;
  std::vector<std::string> first_divergence_modules;
  uint64_t bytes_compared = 0;  // tensor bytes read from both sides
  double seconds = 0;
  unsigned threads = 1;  // that ran: at most CompareOptions::threads, one per piece of work
  KernelStats kernel;    // how the metric kernel ran, over every pair

  // Indices of pairs, worst first (fail, warn, pass; then lowest cosine,
  // then largest MaxAbsErr or statistics difference).
  std::vector<size_t> WorstFirst() const;
};

CompareReport CompareDumps(const Dump& out, const Dump& ref, const CompareOptions& options);

// Metrics of one pair of equally long tensors, on `threads` threads.
// REQUIRES: both HasData() and NumElements() equal.
Metrics ComputePairMetrics(const Tensor& out, const Tensor& ref, unsigned threads);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_DUMP_COMPARE_H_
