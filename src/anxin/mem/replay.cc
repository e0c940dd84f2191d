#include "anxin/mem/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "anxin/mem/alloc_config.h"
#include "anxin/mem/context.h"
#include "anxin/mem/torch_model.h"

namespace anxin::mem {
namespace {

using Action = TraceEvent::Action;

uint64_t Round512(uint64_t x) { return x < 512 ? 512 : (x + 511) / 512 * 512; }

// Keeps at most `points` samples, each the maximum over its stretch of events.
class Series {
 public:
  Series(uint64_t total_events, size_t points)
      : per_bucket_(
            std::max<uint64_t>(1, (total_events + points - 1) / std::max<size_t>(points, 1))) {}
  void Add(uint64_t event, uint64_t live, uint64_t reserved) {
    uint64_t bucket = event / per_bucket_;
    if (samples_.empty() || bucket != bucket_) {
      samples_.push_back({event, live, reserved});
      bucket_ = bucket;
      return;
    }
    Sample& s = samples_.back();
    s.live = std::max(s.live, live);
    s.reserved = std::max(s.reserved, reserved);
  }
  std::vector<Sample> Take() { return std::move(samples_); }

 private:
  uint64_t per_bucket_;
  uint64_t bucket_ = 0;
  std::vector<Sample> samples_;
};

void Finish(PolicyResult& p, uint64_t peak_live) {
  p.fragmentation =
      p.peak_reserved ? 1.0 - static_cast<double>(peak_live) / static_cast<double>(p.peak_reserved)
                      : 0.0;
}

PolicyResult ReplayActual(const Trace& t, uint64_t peak_live, size_t points) {
  PolicyResult p;
  p.name = "pytorch-actual";
  Series series(t.events.size(), points);
  uint64_t reserved = t.InitialReserved();
  uint64_t live = 0;
  for (const auto& b : t.initial_live) live += Round512(b.size);
  p.peak_reserved = reserved;
  for (size_t k = 0; k < t.events.size(); ++k) {
    const TraceEvent& e = t.events[k];
    switch (e.action) {
      case Action::kSegmentAlloc:
        reserved += e.size;
        ++p.device_allocs;
        break;
      case Action::kSegmentFree:
        reserved -= std::min(reserved, e.size);
        ++p.device_frees;
        break;
      case Action::kAlloc:
        live += Round512(e.size);
        break;
      case Action::kFree:
        live -= Round512(e.size);
        break;
      case Action::kOom:
        ++p.ooms;
        break;
      case Action::kEmptyCache:
        break;
    }
    p.peak_reserved = std::max(p.peak_reserved, reserved);
    series.Add(k, live, reserved);
  }
  p.final_reserved = reserved;
  p.series = series.Take();
  Finish(p, peak_live);
  return p;
}

Result<PolicyResult> ReplayModel(const Trace& t, const ReplayOptions& o, uint64_t peak_live) {
  PolicyResult p;
  p.name = "pytorch-model";
  TorchCachingModel m(o.capacity);
  for (const auto& s : t.initial_segments)
    ANXIN_TRY(m.AddSegment(s.addr, s.size, s.stream, s.small));
  for (const auto& b : t.initial_live) ANXIN_TRY(m.PlaceLive(b.addr, b.size, b.block_size));
  std::unordered_map<uint64_t, uint64_t> where;  // trace address -> model address
  for (const auto& b : t.initial_live) where[b.addr] = b.addr;
  Series series(t.events.size(), o.plot_points);
  uint64_t live = 0;
  for (const auto& b : t.initial_live) live += Round512(b.size);
  uint64_t served_peak = live;  // what this policy actually held (OOMs excluded)
  auto at_peak = [&] {
    uint64_t free_total = m.reserved() - m.allocated();
    p.inactive_split = m.reserved() ? static_cast<double>(m.InactiveSplitBytes()) /
                                          static_cast<double>(m.reserved())
                                    : 0;
    p.largest_free_gap = free_total ? 1.0 - static_cast<double>(m.LargestFreeBlock()) /
                                                static_cast<double>(free_total)
                                    : 0;
  };
  p.peak_reserved = m.reserved();
  at_peak();
  for (size_t k = 0; k < t.events.size(); ++k) {
    const TraceEvent& e = t.events[k];
    if (e.action == Action::kAlloc) {
      auto a = m.Malloc(e.size, e.stream);
      if (a) {
        where[e.addr] = *a;
        live += Round512(e.size);
        served_peak = std::max(served_peak, live);
      }
    } else if (e.action == Action::kFree) {
      auto it = where.find(e.addr);
      if (it != where.end()) {
        // The context is formatted only on failure (once per free adds up).
        if (Status s = m.Free(it->second); !s)
          return std::unexpected(std::move(s.error()).With(fmt::format("trace event {}", k)));
        where.erase(it);
        live -= Round512(e.size);
      }
    } else if (e.action == Action::kEmptyCache) {
      m.EmptyCache();
    }
    if (m.reserved() > p.peak_reserved) {
      p.peak_reserved = m.reserved();
      at_peak();
    }
    if (m.allocated() > p.peak_allocated) {
      p.peak_allocated = m.allocated();
      p.rounding_waste =
          1.0 - static_cast<double>(m.requested()) / static_cast<double>(m.allocated());
    }
    series.Add(k, live, m.reserved());
  }
  p.device_allocs = m.segment_allocs();
  p.device_frees = m.segment_frees();
  p.ooms = m.ooms();
  p.final_reserved = m.reserved();
  p.series = series.Take();
  Finish(p, p.ooms ? served_peak : peak_live);
  return p;
}

Result<PolicyResult> ReplayAnxin(const Trace& t, const ReplayOptions& o, uint64_t peak_live) {
  PolicyResult p;
  p.name = "anxin";
  SimOptions sim;
  sim.capacity = o.capacity ? o.capacity : uint64_t{1} << 40;
  sim.backed = false;
  sim.granularity = std::min<uint64_t>(2 * kMiB, o.anxin.block_size);
  AllocatorOptions opt = o.anxin;
  if (!o.capacity) {
    // No device size given: the pool is whatever the trace needs.
    opt.pool_bytes = sim.capacity;
  }
  std::unique_ptr<Provider> provider;
  if (o.provider == "sim") {
    provider = MakeSimProvider(sim);
  } else {
    AllocConf conf;
    conf.provider = o.provider;
    ANXIN_ASSIGN_OR_RETURN(provider, MakeProvider(conf, o.device));
    opt.pool_bytes = o.anxin.pool_bytes;  // the real device: its own pool_size
  }
  ANXIN_ASSIGN_OR_RETURN(auto a, Allocator::Create(std::move(provider), opt));
  std::unordered_map<uint64_t, uint64_t> where;
  uint64_t live = 0;
  auto at_peak = [&](const AllocatorStats& s) {
    uint64_t free_total = s.reserved_bytes - s.allocated_bytes;
    p.inactive_split = s.reserved_bytes ? static_cast<double>(s.cached_bytes) /
                                              static_cast<double>(s.reserved_bytes)
                                        : 0;
    p.largest_free_gap = free_total ? 1.0 - static_cast<double>(s.largest_free_block) /
                                                static_cast<double>(free_total)
                                    : 0;
  };
  for (const auto& b : t.initial_live) {
    auto addr = a->Allocate(b.size, b.stream);
    if (!addr) return std::unexpected(std::move(addr.error()).With("placing the live set"));
    where[b.addr] = *addr;
    live += Round512(b.size);
  }
  uint64_t served_peak = live;  // what this policy actually held (OOMs excluded)
  Series series(t.events.size(), o.plot_points);
  AllocatorStats s = a->Stats();
  p.peak_reserved = s.reserved_bytes;
  for (size_t k = 0; k < t.events.size(); ++k) {
    const TraceEvent& e = t.events[k];
    if (e.action == Action::kAlloc) {
      auto addr = a->Allocate(e.size, e.stream);
      if (addr) {
        where[e.addr] = *addr;
        live += Round512(e.size);
        served_peak = std::max(served_peak, live);
      }
    } else if (e.action == Action::kFree) {
      auto it = where.find(e.addr);
      if (it != where.end()) {
        if (Status s = a->Free(it->second); !s)
          return std::unexpected(std::move(s.error()).With(fmt::format("trace event {}", k)));
        where.erase(it);
        live -= Round512(e.size);
      }
    } else if (e.action == Action::kEmptyCache) {
      ANXIN_TRY(a->EmptyCache());
    } else {
      continue;
    }
    s = a->Stats();
    if (s.reserved_bytes > p.peak_reserved) {
      p.peak_reserved = s.reserved_bytes;
      at_peak(s);
    }
    if (s.allocated_bytes > p.peak_allocated) {
      p.peak_allocated = s.allocated_bytes;
      p.rounding_waste =
          1.0 - static_cast<double>(s.requested_bytes) / static_cast<double>(s.allocated_bytes);
    }
    series.Add(k, live, s.reserved_bytes);
  }
  s = a->Stats();
  p.device_allocs = s.device_allocs;
  p.device_frees = s.device_frees;
  p.ooms = s.ooms;
  p.maps = s.maps;
  p.unmaps = s.unmaps;
  p.retries = s.retries;
  p.final_reserved = s.reserved_bytes;
  p.series = series.Take();
  Finish(p, p.ooms ? served_peak : peak_live);
  return p;
}

}  // namespace

const PolicyResult* ReplayResult::Find(const std::string& name) const {
  for (const auto& p : policies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<ReplayResult> Replay(const Trace& t, const ReplayOptions& o) {
  ReplayResult r;
  r.source = t.source;
  r.capacity = o.capacity;
  r.events = t.events.size();
  r.initial_blocks = t.initial_live.size();
  r.initial_reserved = t.InitialReserved();
  uint64_t live = 0;
  for (const auto& b : t.initial_live) live += Round512(b.size);
  r.initial_live = live;
  r.peak_live = live;
  for (const auto& e : t.events) {
    switch (e.action) {
      case Action::kAlloc:
        ++r.allocs;
        live += Round512(e.size);
        break;
      case Action::kFree:
        ++r.frees;
        live -= Round512(e.size);
        break;
      case Action::kSegmentAlloc:
        ++r.trace_segment_allocs;
        break;
      case Action::kSegmentFree:
        ++r.trace_segment_frees;
        break;
      default:
        break;
    }
    r.peak_live = std::max(r.peak_live, live);
  }
  if (!t.initial_segments.empty() || t.has_segment_events) {
    r.policies.push_back(ReplayActual(t, r.peak_live, o.plot_points));
  }
  if (o.run_model) {
    if (t.initial_live.empty() || !t.initial_segments.empty()) {
      ANXIN_ASSIGN_OR_RETURN(auto p, WithContext(ReplayModel(t, o, r.peak_live),
                                                 "replaying through the PyTorch model"));
      r.policies.push_back(std::move(p));
    }
  }
  if (o.run_anxin) {
    ANXIN_ASSIGN_OR_RETURN(
        auto p, WithContext(ReplayAnxin(t, o, r.peak_live), "replaying through anxin's allocator"));
    r.policies.push_back(std::move(p));
  }
  return r;
}

}  // namespace anxin::mem
