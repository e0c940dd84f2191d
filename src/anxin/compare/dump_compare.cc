#include "anxin/compare/dump_compare.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <system_error>
#include <thread>

namespace anxin::compare {
namespace {

// Elements gathered at a time from Fortran-order tensors: 2 x 16 KiB.
constexpr size_t kBlock = 2048;
// Bytes of the wider side per work item: big enough to amortise scheduling,
// small enough to spread one large tensor over all threads.
constexpr uint64_t kChunkBytes = 4ull << 20;

bool Contiguous(const Tensor& t) { return !t.fortran_order || t.shape.size() < 2; }
// Whether the two are stored in the same element order, so that they pair
// element for element as stored: both row-major, or both column-major with
// one shape. Every metric is a sum, a count or an extreme over the pairs, so
// the storage order changes nothing but the order of summation.
bool SameLayout(const Tensor& a, const Tensor& b) {
  return (Contiguous(a) && Contiguous(b)) ||
         (a.fortran_order && b.fortran_order && a.shape == b.shape);
}

struct Job {
  const Tensor* out;
  const Tensor* ref;
  MetricParams params;
  size_t first_item = 0, items = 0;
};

struct Item {
  size_t job;
  uint64_t begin, end;
  size_t slot;  // its partial result, for a job of several items
};

// Reports progress for RunJobs: counts finished items and bytes, and lets
// one worker at a time call the callback once the interval has passed.
class ProgressMeter {
 public:
  ProgressMeter(const CompareOptions& o, uint64_t bytes_total, size_t tensors_total)
      : fn_(o.on_progress), interval_(o.progress_interval), start_(Clock::now()) {
    state_.bytes_total = bytes_total;
    state_.tensors_total = tensors_total;
    next_.store(interval_.count());
  }
  // One item of `bytes` done; `tensor_done` when it was its tensor's last.
  void Done(uint64_t bytes, bool tensor_done) {
    if (!fn_) return;
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    if (tensor_done) tensors_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = Since(Clock::now());
    if (now < next_.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    next_.store(now + interval_.count(), std::memory_order_relaxed);
    Call(now);
  }
  // The final state.
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (fn_) Call(Since(Clock::now()));
  }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t Since(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
  }
  void Call(int64_t now_ns) {
    state_.bytes_done = bytes_.load(std::memory_order_relaxed);
    state_.tensors_done = tensors_.load(std::memory_order_relaxed);
    state_.seconds = static_cast<double>(now_ns) * 1e-9;
    fn_(state_);
  }
  const std::function<void(const CompareProgress&)>& fn_;
  const std::chrono::nanoseconds interval_;
  const Clock::time_point start_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<size_t> tensors_{0};
  std::atomic<int64_t> next_{0};  // ns since start_ when the next call is due
  std::mutex mu_;
  CompareProgress state_;  // guarded by mu_
};

// Runs every job's items on a pool of up to `threads` threads (no more than
// there are items) and returns one merged accumulator per job. *used, when
// given, is set to the number of threads that ran.
std::vector<MetricAccumulator> RunJobs(std::vector<Job>& jobs, unsigned threads,
                                       const CompareOptions& options, unsigned* used = nullptr) {
  std::vector<Item> items;
  size_t slots = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const uint64_t n = jobs[j].out->NumElements();
    const uint64_t width = std::max(DTypeSize(*jobs[j].out->dtype), DTypeSize(*jobs[j].ref->dtype));
    const uint64_t per = std::max<uint64_t>(kBlock, kChunkBytes / width);
    jobs[j].first_item = items.size();
    for (uint64_t b = 0; b < n || (b == 0 && n == 0); b += per) {
      items.push_back({j, b, std::min(n, b + per), 0});
      if (n == 0) break;
    }
    jobs[j].items = items.size() - jobs[j].first_item;
    if (jobs[j].items > 1)
      for (size_t k = jobs[j].first_item; k < items.size(); ++k) items[k].slot = slots++;
  }
  // A job of one item is merged by the thread that ran it; the pieces of a
  // split tensor are kept and merged in order after, so that the sums never
  // depend on which thread finished first.
  std::vector<MetricAccumulator> merged(jobs.size()), partial(slots);
  std::atomic<size_t> next{0};
  auto item_bytes = [&](const Item& it) {
    const Job& job = jobs[it.job];
    const uint64_t n = it.end - it.begin;
    return n * DTypeSize(*job.out->dtype) +
           (job.ref != job.out ? n * DTypeSize(*job.ref->dtype) : 0);
  };
  uint64_t total = 0;
  for (const Item& it : items) total += item_bytes(it);
  // Items left per job: the tensor is done when its last item is.
  std::vector<std::atomic<size_t>> left(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) left[j].store(jobs[j].items);
  ProgressMeter meter(options, total, jobs.size());
  auto worker = [&] {
    std::vector<double> a, b;
    PageReleaser releaser;
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < items.size();) {
      const Item& it = items[i];
      const Job& job = jobs[it.job];
      const Tensor& o = *job.out;
      const Tensor& r = *job.ref;
      MetricAccumulator acc;
      const bool in_order = SameLayout(o, r);
      if (it.end == it.begin) {
        // An empty tensor: nothing to read (its data may be null).
      } else if (in_order) {
        // The kernel decodes the stored dtypes itself: each byte is read once.
        acc.Add(job.params, *o.dtype, o.data + it.begin * DTypeSize(*o.dtype), *r.dtype,
                r.data + it.begin * DTypeSize(*r.dtype), static_cast<size_t>(it.end - it.begin),
                o.swap_bytes, r.swap_bytes);
      } else {
        // One side row-major, the other column-major: gathered into float64
        // blocks in row-major order (same numbers, slower, and the
        // column-major side's pages are not released as it goes).
        a.resize(kBlock);
        b.resize(kBlock);
        for (uint64_t p = it.begin; p < it.end; p += kBlock) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, it.end - p));
          o.ReadDoubles(p, n, a.data());
          r.ReadDoubles(p, n, b.data());
          acc.Add(job.params, a.data(), b.data(), n);
        }
      }
      if (job.items > 1) {
        partial[it.slot] = acc;
      } else {
        merged[it.job].Merge(acc);
      }
      // What was read in storage order is done with; a gathered side was
      // read all over its file.
      if (in_order || Contiguous(o)) releaser.Add(o, it.begin, it.end - it.begin);
      if (job.ref != job.out && (in_order || Contiguous(r)))
        releaser.Add(r, it.begin, it.end - it.begin);
      meter.Done(item_bytes(it), left[it.job].fetch_sub(1, std::memory_order_relaxed) == 1);
    }
  };
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(items.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // out of threads (ulimit -u): the ones started do the work
    }
  }
  if (used) *used = static_cast<unsigned>(pool.size()) + 1;
  worker();
  for (auto& t : pool) t.join();
  meter.Finish();
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].items < 2) continue;
    for (size_t k = 0; k < jobs[j].items; ++k)
      merged[j].Merge(partial[items[jobs[j].first_item + k].slot]);
  }
  return merged;
}

unsigned ResolveThreads(unsigned threads) {
  if (threads) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

TensorStats StatsOf(const Metrics& m, bool out_side) {
  return out_side ? TensorStats{m.out_max, m.out_min, m.out_mean, m.out_norm}
                  : TensorStats{m.ref_max, m.ref_min, m.ref_mean, m.ref_norm};
}

// The pairs of a dump comparison before their metrics: one PairResult per
// matched pair, and the metric jobs that fill them in.
struct PairPlan {
  std::vector<Job> jobs;
  // Per pair: tensor files dump.json names that were not found.
  std::vector<std::string> missing;
  std::vector<size_t> job_pair;  // pair index per job
  std::vector<int> job_side;     // 2: both sides; 0: out only; 1: ref only (stats)
};

// Adds a PairResult per matched pair to report, with its mode (tensor,
// statistics, shape mismatch or no data), and plans the metric jobs: the
// pair itself, or the statistics of a side that has data but none recorded.
PairPlan PlanPairs(const Dump& out, const Dump& ref, const MatchResult& match,
                   CompareReport& report) {
  PairPlan plan;
  std::vector<Job>& jobs = plan.jobs;
  std::vector<std::string>& missing = plan.missing;
  std::vector<size_t>& job_pair = plan.job_pair;
  std::vector<int>& job_side = plan.job_side;
  for (auto [i, j] : match.pairs) {
    const Tensor& o = out.tensors[i];
    const Tensor& r = ref.tensors[j];
    PairResult p;
    p.name = o.name;
    p.ref_name = r.name;
    p.op = o.op;
    p.out_dtype = o.dtype ? std::string(DTypeName(*o.dtype)) : o.dtype_label;
    p.ref_dtype = r.dtype ? std::string(DTypeName(*r.dtype)) : r.dtype_label;
    p.out_shape = o.shape;
    p.ref_shape = r.shape;
    p.out_stats = o.stats;
    p.ref_stats = r.stats;
    const bool od = o.HasData(), rd = r.HasData();
    if (o.shape != r.shape) {
      p.mode = PairMode::kShapeMismatch;
    } else if (od && rd) {
      p.mode = PairMode::kTensor;
      jobs.push_back({&o, &r, MetricParams::For(*o.dtype, *r.dtype)});
      job_pair.push_back(report.pairs.size());
      job_side.push_back(2);
    } else if ((od || o.stats) && (rd || r.stats)) {
      p.mode = PairMode::kStatistics;
      // A side with data but no recorded statistics gets them computed.
      if (od && !o.stats) {
        jobs.push_back({&o, &o, MetricParams::For(*o.dtype, *o.dtype)});
        job_pair.push_back(report.pairs.size());
        job_side.push_back(0);
      }
      if (rd && !r.stats) {
        jobs.push_back({&r, &r, MetricParams::For(*r.dtype, *r.dtype)});
        job_pair.push_back(report.pairs.size());
        job_side.push_back(1);
      }
    } else {
      p.mode = PairMode::kNoData;
    }
    std::string gone;
    for (const Tensor* t : {&o, &r})
      if (!t->missing_file.empty())
        gone += (gone.empty() ? "" : "; ") + std::string(t == &o ? "output" : "reference") +
                " tensor file missing: " + t->missing_file;
    missing.push_back(std::move(gone));
    report.pairs.push_back(std::move(p));
  }

  return plan;
}

// Puts each job's metrics (or statistics) into its pair, and counts the
// bytes compared and how the kernel ran.
void StoreMetrics(const PairPlan& plan, const std::vector<MetricAccumulator>& merged,
                  CompareReport& report) {
  const std::vector<Job>& jobs = plan.jobs;
  const std::vector<size_t>& job_pair = plan.job_pair;
  const std::vector<int>& job_side = plan.job_side;
  for (size_t k = 0; k < jobs.size(); ++k) {
    PairResult& p = report.pairs[job_pair[k]];
    Metrics m = merged[k].Finish(jobs[k].params);
    report.kernel += merged[k].Stats();
    if (job_side[k] == 2) {
      report.bytes_compared += jobs[k].out->NumBytes() + jobs[k].ref->NumBytes();
      p.out_stats = StatsOf(m, true);
      p.ref_stats = StatsOf(m, false);
      p.metrics = m;
    } else {
      report.bytes_compared += jobs[k].out->NumBytes();
      (job_side[k] == 0 ? p.out_stats : p.ref_stats) = StatsOf(m, true);
    }
  }
}

// The verdict and reasons of every pair under the thresholds, and the counts.
void DecideVerdicts(const CompareOptions& options, const std::vector<std::string>& missing,
                    CompareReport& report) {
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    PairResult& p = report.pairs[i];
    Thresholds t = options.thresholds.For(p.name, ParseDTypeName(p.out_dtype));
    VerdictResult v;
    switch (p.mode) {
      case PairMode::kTensor:
        v = Decide(*p.metrics, t);
        p.stat_diffs = DiffStats(*p.out_stats, *p.ref_stats);
        break;
      case PairMode::kStatistics:
        p.stat_diffs = DiffStats(*p.out_stats, *p.ref_stats);
        v = DecideStats(*p.stat_diffs, t);
        break;
      case PairMode::kShapeMismatch:
        v.verdict = Verdict::kFail;
        v.reasons.push_back("shape " + ShapeString(p.out_shape) + " vs reference " +
                            ShapeString(p.ref_shape));
        break;
      case PairMode::kNoData:
        v.verdict = Verdict::kFail;
        v.reasons.push_back("no data or statistics on one side");
        break;
    }
    if (!missing[i].empty()) {
      // Never a pass on statistics alone when the data was meant to be there.
      if (v.verdict == Verdict::kPass) v.verdict = Verdict::kWarn;
      v.reasons.push_back(missing[i] + (p.mode == PairMode::kStatistics
                                            ? " (compared on the dump.json statistics)"
                                            : ""));
    }
    p.verdict = v.verdict;
    p.reasons = std::move(v.reasons);
    if (p.verdict == Verdict::kPass) ++report.pass;
    if (p.verdict == Verdict::kWarn) ++report.warn;
    if (p.verdict == Verdict::kFail) ++report.fail;
  }
}

// The first failing pair (else the first warning one), with the stack and
// the modules of its operator from either dump.
void FindFirstDivergence(const Dump& out, const Dump& ref, CompareReport& report) {
  for (Verdict want : {Verdict::kFail, Verdict::kWarn}) {
    for (size_t i = 0; i < report.pairs.size() && !report.first_divergence; ++i)
      if (report.pairs[i].verdict == want) report.first_divergence = i;
    if (report.first_divergence) break;
  }
  if (report.first_divergence) {
    const std::string& op = report.pairs[*report.first_divergence].op;
    if (auto it = out.stacks.find(op); it != out.stacks.end()) {
      report.first_divergence_stack = it->second;
    } else if (auto it2 = ref.stacks.find(op); it2 != ref.stacks.end()) {
      report.first_divergence_stack = it2->second;
    }
    report.first_divergence_modules = EnclosingModules(out, op);
    if (report.first_divergence_modules.empty())
      report.first_divergence_modules = EnclosingModules(ref, op);
  }
}

}  // namespace

std::string_view PairModeName(PairMode m) {
  switch (m) {
    case PairMode::kTensor:
      return "tensor";
    case PairMode::kStatistics:
      return "statistics";
    case PairMode::kShapeMismatch:
      return "shape mismatch";
    case PairMode::kNoData:
      return "no data";
  }
  return "?";
}

Metrics ComputePairMetrics(const Tensor& out, const Tensor& ref, unsigned threads) {
  std::vector<Job> jobs{{&out, &ref, MetricParams::For(*out.dtype, *ref.dtype)}};
  auto acc = RunJobs(jobs, ResolveThreads(threads), CompareOptions{});
  return acc[0].Finish(jobs[0].params);
}

std::vector<size_t> CompareReport::WorstFirst() const {
  std::vector<size_t> idx(pairs.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto cosine = [&](size_t i) {
    const auto& m = pairs[i].metrics;
    return m && !std::isnan(m->cosine) ? m->cosine : 2.0;
  };
  auto err = [&](size_t i) {
    const auto& p = pairs[i];
    if (p.metrics) return p.metrics->max_abs_err;
    if (p.stat_diffs) return p.stat_diffs->Worst();
    return HUGE_VAL;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    int ra = VerdictRank(pairs[a].verdict), rb = VerdictRank(pairs[b].verdict);
    if (ra != rb) return ra > rb;
    if (cosine(a) != cosine(b)) return cosine(a) < cosine(b);
    return err(a) > err(b);
  });
  return idx;
}

CompareReport CompareDumps(const Dump& out, const Dump& ref, const CompareOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompareReport report;
  report.out_path = out.path;
  report.ref_path = ref.path;
  report.threads = ResolveThreads(options.threads);
  // Two .npy files are one tensor each: they are the pair, whatever their
  // names (out.npy against golden.npy). Archives and directories match by name.
  const bool two_files =
      out.kind == "npy" && ref.kind == "npy" && out.tensors.size() == 1 && ref.tensors.size() == 1;
  MatchResult match = two_files ? MatchResult{{{0, 0}}, {}, {}}
                                : MatchTensors(out.tensors, ref.tensors, options.match);
  for (size_t i : match.unmatched_out) report.unmatched_out.push_back(out.tensors[i].name);
  for (size_t j : match.unmatched_ref) report.unmatched_ref.push_back(ref.tensors[j].name);

  PairPlan plan = PlanPairs(out, ref, match, report);
  auto merged = RunJobs(plan.jobs, report.threads, options, &report.threads);
  StoreMetrics(plan, merged, report);
  DecideVerdicts(options, plan.missing, report);
  FindFirstDivergence(out, ref, report);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace anxin::compare
