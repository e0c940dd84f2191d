#include "anxin/mem/replay_report.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <fstream>

#include "anxin/base/strings.h"

namespace anxin::mem {

std::string ReplayText(const ReplayResult& r) {
  // OOMs first: a policy that failed allocations did not run the trace, and
  // the memory it did not get is no saving.
  std::string out;
  for (const auto& p : r.policies) {
    if (p.ooms == 0) continue;
    if (p.name == "pytorch-actual") {
      out += fmt::format("OOM: the recorded PyTorch run hit {} OOM{}\n", p.ooms,
                         p.ooms == 1 ? "" : "s");
      continue;
    }
    out += fmt::format(
        "OOM: {} failed {} allocation{} {}: it did not run this trace, and its figures below are "
        "for what it held, not a saving\n",
        p.name, p.ooms, p.ooms == 1 ? "" : "s",
        r.capacity ? "within --capacity " + FormatBytes(r.capacity) : "on the device");
  }
  if (!out.empty()) out += "\n";
  out += fmt::format(
      "trace {}: {} events ({} allocs, {} frees); at start {} live in {} blocks, {} reserved\n"
      "peak allocated {}\n\n",
      r.source, r.events, r.allocs, r.frees, FormatBytes(r.initial_live), r.initial_blocks,
      FormatBytes(r.initial_reserved), FormatBytes(r.peak_live));
  out += fmt::format("{:<15} {:>12} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>8}\n", "policy",
                     "peak reserv.", "frag", "inact.spl", "free-gap", "rounding", "dev.alloc",
                     "ooms", "remaps");
  for (const auto& p : r.policies) {
    out +=
        fmt::format("{:<15} {:>12} {:>7.2f}% {:>8.2f}% {:>8.2f}% {:>8.2f}% {:>9} {:>6} {:>8}\n",
                    p.name, FormatBytes(p.peak_reserved), 100 * p.fragmentation,
                    100 * p.inactive_split, 100 * p.largest_free_gap, 100 * p.rounding_waste,
                    p.device_allocs, p.ooms, p.name == "anxin" ? fmt::format("{}", p.unmaps) : "-");
  }
  const PolicyResult* actual = r.Find("pytorch-actual");
  const PolicyResult* model = r.Find("pytorch-model");
  const PolicyResult* anxin = r.Find("anxin");
  if (actual && model && model->ooms) {
    out += fmt::format("\nmodel vs recorded PyTorch: not compared, the model hit {} OOMs\n",
                       model->ooms);
  } else if (actual && model) {
    out += fmt::format("\nmodel vs recorded PyTorch: segments {} vs {}, peak reserved {:+.2f}%\n",
                       model->device_allocs, r.trace_segment_allocs,
                       100.0 * (static_cast<double>(model->peak_reserved) /
                                    static_cast<double>(actual->peak_reserved) -
                                1));
  }
  if (actual && anxin && anxin->ooms) {
    out += fmt::format(
        "anxin vs recorded PyTorch: not compared, anxin hit {} OOMs; give it more memory "
        "(--capacity) to compare\n",
        anxin->ooms);
  } else if (actual && anxin) {
    out += fmt::format("anxin vs recorded PyTorch: peak reserved {:+.2f}% ({} less)\n",
                       100.0 * (static_cast<double>(anxin->peak_reserved) /
                                    static_cast<double>(actual->peak_reserved) -
                                1),
                       FormatBytes(actual->peak_reserved > anxin->peak_reserved
                                       ? actual->peak_reserved - anxin->peak_reserved
                                       : 0));
  }
  return out;
}

nlohmann::json ReplayJson(const ReplayResult& r) {
  nlohmann::json j{{"source", r.source},
                   {"events", r.events},
                   {"allocs", r.allocs},
                   {"frees", r.frees},
                   {"trace_segment_allocs", r.trace_segment_allocs},
                   {"trace_segment_frees", r.trace_segment_frees},
                   {"initial_live_bytes", r.initial_live},
                   {"initial_live_blocks", r.initial_blocks},
                   {"initial_reserved_bytes", r.initial_reserved},
                   {"peak_allocated_bytes", r.peak_live},
                   {"capacity_bytes", r.capacity}};
  j["policies"] = nlohmann::json::array();
  for (const auto& p : r.policies) {
    j["policies"].push_back({{"name", p.name},
                             {"peak_reserved_bytes", p.peak_reserved},
                             {"peak_block_bytes", p.peak_allocated},
                             {"fragmentation", p.fragmentation},
                             {"inactive_split", p.inactive_split},
                             {"largest_free_gap", p.largest_free_gap},
                             {"rounding_waste", p.rounding_waste},
                             {"device_allocs", p.device_allocs},
                             {"device_frees", p.device_frees},
                             {"ooms", p.ooms},
                             {"maps", p.maps},
                             {"unmaps", p.unmaps},
                             {"retries", p.retries},
                             {"final_reserved_bytes", p.final_reserved}});
  }
  return j;
}

std::string PlanText(const Plan& p) {
  std::string out = fmt::format(
      "model: {:.2f}B parameters ({:.1f}% embedding); synthetic trace of {} events\n"
      "peak allocated {}; PyTorch model reserves {}, anxin {}\n\n",
      static_cast<double>(p.parameters) / 1e9,
      100.0 * static_cast<double>(p.embedding_parameters) / static_cast<double>(p.parameters),
      p.events, FormatBytes(p.peak_live), FormatBytes(p.pytorch_peak_reserved),
      FormatBytes(p.anxin_peak_reserved));
  out += "block_size  threshold  peak reserved  remaps\n";
  for (const auto& c : p.candidates) {
    out += fmt::format("{:>10}  {:>9.2f}  {:>13}  {:>6}{}\n", FormatBytes(c.block_size),
                       c.threshold, FormatBytes(c.peak_reserved), c.remaps,
                       c.block_size == p.block_size && c.threshold == p.threshold ? "  <-" : "");
  }
  out += "\nembedding shard  PyTorch reserved  anxin reserved\n";
  for (const auto& t : p.shard_trials) {
    out += fmt::format("{:>15}  {:>16}  {:>14}{}\n", t.shard ? FormatBytes(t.shard) : "unsharded",
                       FormatBytes(t.pytorch_peak_reserved), FormatBytes(t.anxin_peak_reserved),
                       t.shard == p.embedding_shard ? "  <-" : "");
  }
  std::string knobs = fmt::format("block_size:{}MiB,expand:true,fragment_threshold:{}",
                                  p.block_size >> 20, p.threshold);
  if (!p.fits) {
    // No pool_size: any that holds the peak is above what a pool may take.
    out += fmt::format(
        "\nrecommended: ANXIN_ALLOC_CONF={} (without a pool size: the model does not fit, see "
        "below)\n",
        knobs);
  } else {
    // Without a device size, the pool in whole MiB as ANXIN_ALLOC_CONF reads
    // it (it is a whole number of blocks, themselves whole MiB). With one, the
    // fraction rounded up, so that it never gives less than the pool needs.
    std::string pool = p.device_memory
                           ? fmt::format("{:.2f}", std::ceil(p.pool_fraction * 100 - 1e-9) / 100)
                           : fmt::format("{}MiB", (p.pool_bytes + kMiB - 1) / kMiB);
    out += fmt::format("\nrecommended: ANXIN_ALLOC_CONF=pool_size:{},{}\n", pool, knobs);
  }
  out += fmt::format("embedding shards: {}\n",
                     p.embedding_shard ? FormatBytes(p.embedding_shard) : "keep one tensor");
  if (!p.fits) {
    uint64_t device_needed =
        static_cast<uint64_t>(std::ceil(static_cast<double>(p.pool_bytes) / kMaxPoolFraction));
    out += fmt::format(
        "DOES NOT FIT: the pool needs {} (peak reserved {} + 5%), but a pool may take at most "
        "{:.0f}% of the {} device ({}); enable recompute, raise the ZeRO stage, lower the "
        "micro-batch, or use a device of at least {}\n",
        FormatBytes(p.pool_bytes), FormatBytes(p.anxin_peak_reserved), 100 * kMaxPoolFraction,
        FormatBytes(p.device_memory),
        FormatBytes(static_cast<uint64_t>(static_cast<double>(p.device_memory) * kMaxPoolFraction)),
        FormatBytes(device_needed));
  }
  return out;
}

nlohmann::json PlanJson(const Plan& p) {
  nlohmann::json j{{"parameters", p.parameters},
                   {"embedding_parameters", p.embedding_parameters},
                   {"events", p.events},
                   {"peak_allocated_bytes", p.peak_live},
                   {"pytorch_peak_reserved_bytes", p.pytorch_peak_reserved},
                   {"anxin_peak_reserved_bytes", p.anxin_peak_reserved},
                   {"device_memory_bytes", p.device_memory},
                   {"fits", p.fits},
                   {"pool_bytes_needed", p.pool_bytes},
                   {"max_pool_fraction", kMaxPoolFraction},
                   {"recommended",
                    {{"block_size", p.block_size},
                     {"fragment_threshold", p.threshold},
                     {"embedding_shard_bytes", p.embedding_shard}}}};
  // A pool size only where it fits.
  if (p.fits) {
    j["recommended"]["pool_bytes"] = p.pool_bytes;
    j["recommended"]["pool_fraction"] = p.pool_fraction;
  }
  for (const auto& c : p.candidates) {
    j["candidates"].push_back({{"block_size", c.block_size},
                               {"fragment_threshold", c.threshold},
                               {"peak_reserved_bytes", c.peak_reserved},
                               {"remaps", c.remaps}});
  }
  for (const auto& t : p.shard_trials) {
    j["embedding_shard_trials"].push_back({{"shard_bytes", t.shard},
                                           {"pytorch_peak_reserved_bytes", t.pytorch_peak_reserved},
                                           {"anxin_peak_reserved_bytes", t.anxin_peak_reserved}});
  }
  return j;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return std::unexpected(ErrnoError(errno, "create " + path));
  out << text;
  out.close();
  if (!out) return std::unexpected(ErrnoError(errno, "write " + path));
  return Ok();
}

}  // namespace anxin::mem
