#include "anxin/loadgen/bench_command.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::loadgen {
namespace {

Result<double> Seconds(const std::string& text, const char* flag) {
  auto s = ParseSeconds(text);
  if (!s) return std::unexpected(std::move(s.error()).With(flag));
  return *s;
}

// --url, --endpoint, --api, --model, the body's options and the headers.
Status SetRequest(const BenchFlags& f, BenchSetup& setup) {
  LoadOptions& load = setup.plan.load;
  auto target = ParseUrl(f.url);
  if (!target) return std::unexpected(target.error().With("--url"));
  load.target = *target;
  if (!f.endpoint.empty()) {
    load.target.path = f.endpoint.front() == '/' ? f.endpoint : "/" + f.endpoint;
  }
  auto api = ParseApi(f.api);
  if (!api) return std::unexpected(api.error().With("--api"));
  setup.api = *api;
  load.request.api = *api;
  load.request.model = f.model;
  load.request.stream = !f.no_stream;
  load.request.ignore_eos = f.ignore_eos;
  if (!f.extra_body.empty()) {
    auto extra = nlohmann::json::parse(f.extra_body, nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) {
      return InvalidArgument("--extra-body: not a JSON object (e.g. '{\"temperature\":0}')");
    }
    load.request.extra_body = std::move(extra);
  }
  for (const std::string& h : f.headers) {
    size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("--header '" + h + "': use 'Name: value'");
    }
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    load.headers.emplace_back(h.substr(0, colon), value);
  }
  if (!f.api_key.empty() && *api != Api::kTriton) {
    bool has_auth = false;
    for (const auto& [k, v] : load.headers) has_auth |= EqualsIgnoreCase(k, "authorization");
    if (!has_auth) load.headers.emplace_back("Authorization", "Bearer " + f.api_key);
  }
  return Ok();
}

// --timeout, --duration, --no-keep-alive, --seed.
Status SetTiming(const BenchFlags& f, LoadOptions& load) {
  ANXIN_ASSIGN_OR_RETURN(load.timeout_s, Seconds(f.timeout, "--timeout"));
  if (!f.duration.empty()) {
    ANXIN_ASSIGN_OR_RETURN(load.duration_s, Seconds(f.duration, "--duration"));
  }
  load.keep_alive = !f.no_keep_alive;
  load.seed = f.seed;
  return Ok();
}

// A rate makes an open loop (with --concurrency as its cap); otherwise a
// closed loop at --concurrency (default 1).
Status SetArrivals(const BenchFlags& f, ArrivalSpec& arrivals) {
  if (f.open_loop_flags && f.rate.empty()) {
    return InvalidArgument("--arrival and --burstiness shape an open loop: give --rate too");
  }
  if (f.rate.empty()) {
    arrivals.kind = ArrivalSpec::kConcurrency;
    arrivals.concurrency = f.concurrency > 0 ? f.concurrency : 1;
    return Ok();
  }
  auto kind = ParseArrivalKind(f.arrival);
  if (!kind) return std::unexpected(kind.error().With("--arrival"));
  arrivals.kind = *kind;
  std::optional<double> rate = f.rate == "inf" ? INFINITY : ParseDouble(f.rate);
  if (!rate || !(*rate > 0)) {
    return InvalidArgument("--rate '" + f.rate + "': use requests per second, e.g. 20, or inf");
  }
  arrivals.rate = *rate;
  if (!(f.burstiness > 0)) return InvalidArgument("--burstiness must be above 0");
  arrivals.burstiness = f.burstiness;
  arrivals.concurrency = std::max<int64_t>(0, f.concurrency);
  return Ok();
}

// --slo, --slo-attainment, --sweep.
Status SetObjectives(const BenchFlags& f, BenchPlan& plan) {
  if (!f.slo.empty()) {
    auto slo = ParseSlo(f.slo);
    if (!slo) return std::unexpected(slo.error().With("--slo"));
    plan.slo = *slo;
  }
  if (!(f.attainment > 0 && f.attainment <= 1)) {
    return InvalidArgument("--slo-attainment must be in (0, 1], e.g. 0.9");
  }
  plan.attainment_target = f.attainment;
  if (!f.sweep.empty()) {
    auto sweep = ParseSweep(f.sweep);
    if (!sweep) return std::unexpected(sweep.error().With("--sweep"));
    plan.sweep = *sweep;
  }
  return Ok();
}

// --tokenizer, then the prompts: --dataset, or synthetic --input-tokens;
// --output-tokens for either.
Status LoadPrompts(const BenchFlags& f, BenchSetup& setup) {
  LoadOptions& load = setup.plan.load;
  if (!f.tokenizer.empty()) {
    auto t = Tokenizer::Load(f.tokenizer);
    if (!t) return std::unexpected(t.error().With("--tokenizer"));
    setup.tokenizer = std::move(*t);
    load.tokenizer = &*setup.tokenizer;
  }
  std::optional<LengthDist> output;
  if (!f.output_tokens.empty()) {
    auto d = ParseLengthDist(f.output_tokens);
    if (!d) return std::unexpected(d.error().With("--output-tokens"));
    output = *d;
  }
  if (!f.dataset.empty()) {
    DatasetOptions dopts;
    dopts.count = f.requests;
    dopts.output = output;
    dopts.seed = f.seed;
    dopts.tokenizer = load.tokenizer;
    auto p = LoadDataset(f.dataset, dopts);
    if (!p) return std::unexpected(p.error().With("--dataset"));
    setup.prompts = std::move(*p);
  } else {
    auto in = ParseLengthDist(f.input_tokens);
    if (!in) return std::unexpected(in.error().With("--input-tokens"));
    setup.prompts = SyntheticPrompts(f.requests, *in, output.value_or(LengthDist{.a = 128}), f.seed,
                                     load.tokenizer);
  }
  return Ok();
}

// --csv and --svg.
Status WriteFiles(const BenchSetup& setup, const BenchResult& result) {
  const BenchFlags& f = setup.flags;
  const BenchPlan& plan = setup.plan;
  if (!f.csv.empty()) {
    if (auto s = WriteFileAtomic(f.csv, BenchCsv(result, plan.sweep)); !s) {
      return std::unexpected(s.error().With("--csv"));
    }
  }
  if (!f.svg.empty()) {
    SweepSpec chart_spec = plan.sweep.value_or(SweepSpec{
        .kind = plan.load.arrivals.open_loop() ? SweepSpec::kRate : SweepSpec::kConcurrency,
        .values = {result.points.front().value}});
    std::string title = "anxin bench serve: " + f.url + " (" + std::string(ApiName(setup.api)) +
                        (f.model.empty() ? "" : ", " + f.model) + ")";
    if (auto s = WriteFileAtomic(f.svg, LatencySvg(result.points, chart_spec, plan.slo, title));
        !s) {
      return std::unexpected(s.error().With("--svg"));
    }
  }
  return Ok();
}

std::string Report(const BenchSetup& setup, const BenchResult& result, bool json) {
  const BenchPlan& plan = setup.plan;
  const SweepPoint& first = result.points.front();
  if (json) {
    nlohmann::json j = plan.sweep
                           ? SweepJson(result.points, *plan.sweep, plan.slo, plan.attainment_target)
                           : SummaryJson(first.summary, first.loop);
    j["url"] = setup.flags.url;
    j["api"] = ApiName(setup.api);
    if (!plan.sweep) j["arrivals"] = plan.load.arrivals.ToString();
    return j.dump(2) + "\n";
  }
  if (plan.sweep) {
    return SweepText(result.points, *plan.sweep, plan.slo, plan.attainment_target);
  }
  return setup.flags.url + " (" + std::string(ApiName(setup.api)) + ") at " +
         plan.load.arrivals.ToString() + "\n" + SummaryText(first.summary, first.loop);
}

}  // namespace

Result<std::unique_ptr<BenchSetup>> BuildBenchPlan(const BenchFlags& flags) {
  auto setup = std::make_unique<BenchSetup>();
  setup->flags = flags;
  ANXIN_TRY(SetRequest(flags, *setup));
  ANXIN_TRY(SetTiming(flags, setup->plan.load));
  ANXIN_ASSIGN_OR_RETURN(double connect_timeout,
                         Seconds(flags.connect_timeout, "--connect-timeout"));
  ANXIN_TRY(SetArrivals(flags, setup->plan.load.arrivals));
  ANXIN_TRY(SetObjectives(flags, setup->plan));
  ANXIN_TRY(LoadPrompts(flags, *setup));
  ANXIN_TRY(ProbeServer(setup->plan.load.target, connect_timeout));
  return setup;
}

Result<BenchOutcome> RunBenchCommand(const BenchSetup& setup, bool json) {
  ANXIN_ASSIGN_OR_RETURN(BenchResult result, RunBench(setup.prompts, setup.plan));
  ANXIN_TRY(WriteFiles(setup, result));
  BenchOutcome out;
  out.report = Report(setup, result, json);
  // Nothing succeeded, or the SLOs are missed: the check failed.
  if (setup.plan.sweep) {
    out.passed = BestPoint(result.points, setup.plan.slo) >= 0;
  } else {
    out.passed = result.points.front().summary.completed > 0 && result.points.front().meets;
  }
  return out;
}

}  // namespace anxin::loadgen
