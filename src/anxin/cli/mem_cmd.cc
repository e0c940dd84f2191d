// `anxin mem`: replay allocation traces against allocation policies, and plan
// allocator settings for a model (docs/mem.md).
//
//   anxin mem replay snapshot.pickle [--svg plot.svg] [--conf KNOBS] [--capacity 80GiB]
//   anxin mem plan --layers 32 --hidden 2560 --device-memory 64GiB
#include <charconv>
#include <cstdio>
#include <memory>
#include <sstream>

#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/mem/alloc_config.h"
#include "anxin/mem/plan.h"
#include "anxin/mem/plot.h"
#include "anxin/mem/replay.h"
#include "anxin/mem/replay_report.h"
#include "anxin/mem/trace.h"

namespace anxin::cli::mem_cmd {
namespace {

namespace mem = anxin::mem;

struct ReplayOpts {
  std::string trace, conf, capacity, svg, export_jsonl, provider = "sim";
  int device = -1;
  int provider_device = 0;
  bool no_model = false;
};

struct PlanOpts {
  mem::ModelShape shape;
  std::string seq = "512,1024", precision, device_memory = "64GiB", emit_trace;
};

int RunReplay(const ReplayOpts& o, const GlobalOptions& g) {
  auto conf = mem::ParseAllocConf(o.conf);
  if (!conf) return ReportError(conf.error().With("--conf"));
  mem::ReplayOptions options;
  options.anxin = conf->options;
  options.run_model = !o.no_model;
  options.provider = o.provider;
  options.device = o.provider_device;
  if (!o.capacity.empty()) {
    auto cap = ParseBytes(o.capacity);
    if (!cap) return ReportError(cap.error().With("--capacity"));
    options.capacity = *cap;
  }
  auto trace = mem::ReadTrace(o.trace, o.device);
  if (!trace) return ReportError(trace.error());
  if (!o.export_jsonl.empty()) {
    if (auto s = mem::WriteJsonlTrace(*trace, o.export_jsonl); !s) return ReportError(s.error());
  }
  auto result = mem::Replay(*trace, options);
  if (!result) return ReportError(result.error().With("replaying " + o.trace));
  if (!o.svg.empty()) {
    std::string title = "anxin mem replay: " + o.trace.substr(o.trace.rfind('/') + 1);
    if (auto s = mem::WriteTextFile(o.svg, mem::ReplaySvg(*result, title)); !s) {
      return ReportError(s.error());
    }
  }
  if (g.json) {
    std::printf("%s\n", mem::ReplayJson(*result).dump(2).c_str());
  } else {
    std::fputs(mem::ReplayText(*result).c_str(), stdout);
  }
  // A CI gate asks whether the trace runs under anxin on this device.
  const mem::PolicyResult* anxin = result->Find("anxin");
  return anxin && anxin->ooms > 0 ? kExitCheckFailed : kExitOk;
}

int RunPlan(PlanOpts o, const GlobalOptions& g) {
  o.shape.seq_buckets.clear();
  std::stringstream ss(o.seq);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v <= 0) {
      return ReportError(
          Error(ErrorCode::kInvalidArgument, "--seq: '" + item +
                                                 "' is not a positive whole number of tokens "
                                                 "(use e.g. 512,1024)"));
    }
    o.shape.seq_buckets.push_back(v);
  }
  if (!o.precision.empty()) {
    if (auto s = mem::ApplyPrecision(o.precision, o.shape); !s) {
      return ReportError(s.error().With("--precision"));
    }
  }
  auto device = ParseBytes(o.device_memory);
  if (!device) return ReportError(device.error().With("--device-memory"));
  if (!o.emit_trace.empty()) {
    auto t = mem::GenerateStepTrace(o.shape);
    if (!t) return ReportError(t.error());
    if (auto s = mem::WriteJsonlTrace(*t, o.emit_trace); !s) return ReportError(s.error());
  }
  auto plan = mem::MakePlan(o.shape, *device);
  if (!plan) return ReportError(plan.error());
  if (g.json) {
    std::printf("%s\n", mem::PlanJson(*plan).dump(2).c_str());
  } else {
    std::fputs(mem::PlanText(*plan).c_str(), stdout);
  }
  return plan->fits ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  app.require_subcommand(1);
  auto r = std::make_shared<ReplayOpts>();
  CLI::App* replay = app.add_subcommand(
      "replay",
      "replay a PyTorch memory snapshot or JSONL trace through PyTorch's allocator "
      "(model and recorded) and anxin's");
  replay->add_option("trace", r->trace, "snapshot .pickle or .jsonl trace")->required();
  replay->add_option("--conf", r->conf,
                     "anxin's knobs as in ANXIN_ALLOC_CONF, e.g. "
                     "pool_size:0.85,block_size:2MiB,fragment_threshold:0.02");
  replay
      ->add_option("--capacity", r->capacity,
                   "device memory for OOM counting, e.g. 80GiB (default: unlimited); "
                   "exit status 1 when anxin's replay hits an OOM")
      ->check(Bytes(1));
  replay->add_option("--svg", r->svg, "write a plot of allocated vs reserved over time");
  replay->add_option("--device", r->device, "device trace to use (default: the longest)")
      ->check(AtLeast(0));
  replay->add_option("--export-jsonl", r->export_jsonl, "also write the trace as anxin JSONL");
  replay->add_flag("--no-model", r->no_model, "skip the PyTorch allocator model");
  replay
      ->add_option("--provider", r->provider,
                   "memory for anxin's replay: sim (default), or cuda / acl to replay on a "
                   "real device")
      ->check(CLI::IsMember({"sim", "cuda", "acl"}))
      ->capture_default_str();
  replay->add_option("--provider-device", r->provider_device, "device index for cuda / acl")
      ->check(AtLeast(0));

  auto p = std::make_shared<PlanOpts>();
  CLI::App* plan = app.add_subcommand(
      "plan", "recommend pool size, block size, threshold and embedding shards for a model");
  mem::ModelShape& s = p->shape;
  plan->add_option("--layers", s.layers, "transformer layers")
      ->capture_default_str()
      ->check(AtLeast(1));
  plan->add_option("--hidden", s.hidden, "hidden size")->capture_default_str()->check(AtLeast(1));
  plan->add_option("--heads", s.heads, "attention heads")->capture_default_str()->check(AtLeast(1));
  plan->add_option("--vocab", s.vocab, "vocabulary size")->capture_default_str()->check(AtLeast(1));
  plan->add_option("--seq", p->seq, "sequence-length buckets, comma-separated")
      ->capture_default_str();
  plan->add_option("--micro-batch", s.micro_batch, "sequences per micro-batch")
      ->capture_default_str()
      ->check(AtLeast(1));
  plan->add_option("--micro-batches", s.micro_batches, "micro-batches per step")
      ->capture_default_str()
      ->check(AtLeast(1));
  plan->add_flag("--recompute", s.recompute, "activation recomputation");
  plan->add_option("--zero", s.zero_stage, "ZeRO stage 0-3")
      ->capture_default_str()
      ->check(InRange(0, 3));
  plan->add_option("--dp", s.dp, "data-parallel ranks sharing ZeRO state")
      ->capture_default_str()
      ->check(AtLeast(1));
  plan->add_option("--precision", p->precision,
                   "e.g. fp32-master,bf16-params,bf16-grads,fp16-acts (no-master: none)");
  plan->add_option("--device-memory", p->device_memory, "device memory, e.g. 64GiB")
      ->capture_default_str()
      ->check(Bytes(1));
  plan->add_flag("--empty-cache-per-micro-batch", s.empty_cache_per_micro_batch,
                 "empty the cache after each micro-batch");
  plan->add_option("--emit-trace", p->emit_trace, "write the synthetic trace as JSONL");

  return [r, p, replay, plan](const GlobalOptions& g) -> int {
    if (replay->parsed()) return RunReplay(*r, g);
    if (plan->parsed()) return RunPlan(*p, g);
    return kExitUsage;
  };
}

ANXIN_REGISTER_COMMAND(mem, "device-memory allocator tools: replay traces, plan settings", Setup);

}  // namespace
}  // namespace anxin::cli::mem_cmd
