// `anxin bench serve`: load-test an OpenAI-compatible or Triton inference
// server and report TTFT, TPOT, ITL, E2E, throughput and goodput under SLOs
// (docs/serve.md).
//
//   anxin bench serve --url http://127.0.0.1:8000 --model m --concurrency 8
//   anxin bench serve --rate 20 --dataset sharegpt.json --slo ttft=500ms,tpot=50ms
//   anxin bench serve --sweep concurrency=1,2,4,8,16 --slo ttft=500ms,tpot=50ms --svg load.svg
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/strings.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/serve/loadgen/bench.h"
#include "anxin/serve/loadgen/dataset.h"
#include "anxin/serve/loadgen/report.h"

namespace anxin::cli {
namespace {

namespace lg = anxin::loadgen;

// Set by SIGINT/SIGTERM: the run stops and reports what it measured so far.
std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop.store(true); }

struct Opts {
  std::string url = "http://127.0.0.1:8000", api = "completions", endpoint, model;
  std::string dataset, input_tokens = "256", output_tokens, tokenizer;
  int64_t requests = 200;
  int64_t concurrency = -1;
  std::string rate, arrival = "poisson";
  double burstiness = 1;
  std::string duration, timeout = "10m", connect_timeout = "5s";
  std::string slo, sweep, csv, svg, extra_body;
  double attainment = 0.9;
  uint64_t seed = 0;
  std::vector<std::string> headers;
  bool no_stream = false, ignore_eos = false, no_progress = false, no_keep_alive = false;
  // Set when --arrival or --burstiness was given (they need --rate).
  bool open_loop_flags = false;
};

Result<double> Seconds(const std::string& text, const char* flag) {
  auto s = ParseSeconds(text);
  if (!s) return std::unexpected(std::move(s.error()).With(flag));
  return *s;
}

int Run(const Opts& o, const GlobalOptions& g) {
  lg::BenchPlan plan;
  lg::LoadOptions& load = plan.load;
  auto target = lg::ParseUrl(o.url);
  if (!target) return ReportError(target.error().With("--url"));
  load.target = *target;
  if (!o.endpoint.empty()) {
    load.target.path = o.endpoint.front() == '/' ? o.endpoint : "/" + o.endpoint;
  }
  auto api = lg::ParseApi(o.api);
  if (!api) return ReportError(api.error().With("--api"));
  load.request.api = *api;
  load.request.model = o.model;
  load.request.stream = !o.no_stream;
  load.request.ignore_eos = o.ignore_eos;
  if (!o.extra_body.empty()) {
    auto extra = nlohmann::json::parse(o.extra_body, nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) {
      return ReportError(Error(ErrorCode::kInvalidArgument,
                               "--extra-body: not a JSON object (e.g. '{\"temperature\":0}')"));
    }
    load.request.extra_body = std::move(extra);
  }
  for (const std::string& h : o.headers) {
    size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0) {
      return ReportError(
          Error(ErrorCode::kInvalidArgument, "--header '" + h + "': use 'Name: value'"));
    }
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    load.headers.emplace_back(h.substr(0, colon), value);
  }
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key && *api != lg::Api::kTriton) {
    bool has_auth = false;
    for (const auto& [k, v] : load.headers) has_auth |= EqualsIgnoreCase(k, "authorization");
    if (!has_auth) load.headers.emplace_back("Authorization", std::string("Bearer ") + key);
  }
  auto timeout = Seconds(o.timeout, "--timeout");
  if (!timeout) return ReportError(timeout.error());
  load.timeout_s = *timeout;
  if (!o.duration.empty()) {
    auto d = Seconds(o.duration, "--duration");
    if (!d) return ReportError(d.error());
    load.duration_s = *d;
  }
  auto connect_timeout = Seconds(o.connect_timeout, "--connect-timeout");
  if (!connect_timeout) return ReportError(connect_timeout.error());
  load.keep_alive = !o.no_keep_alive;
  load.seed = o.seed;

  // Arrivals: a rate makes an open loop (with --concurrency as its cap);
  // otherwise a closed loop at --concurrency (default 1).
  if (o.open_loop_flags && o.rate.empty()) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--arrival and --burstiness shape an open loop: give --rate too"));
  }
  if (!o.rate.empty()) {
    auto kind = lg::ParseArrivalKind(o.arrival);
    if (!kind) return ReportError(kind.error().With("--arrival"));
    load.arrivals.kind = *kind;
    if (o.rate == "inf") {
      load.arrivals.rate = INFINITY;
    } else {
      char* end = nullptr;
      load.arrivals.rate = std::strtod(o.rate.c_str(), &end);
      if (end == o.rate.c_str() || *end != '\0' || !(load.arrivals.rate > 0)) {
        return ReportError(
            Error(ErrorCode::kInvalidArgument,
                  "--rate '" + o.rate + "': use requests per second, e.g. 20, or inf"));
      }
    }
    if (!(o.burstiness > 0)) {
      return ReportError(Error(ErrorCode::kInvalidArgument, "--burstiness must be above 0"));
    }
    load.arrivals.burstiness = o.burstiness;
    load.arrivals.concurrency = std::max<int64_t>(0, o.concurrency);
  } else {
    load.arrivals.kind = lg::ArrivalSpec::kConcurrency;
    load.arrivals.concurrency = o.concurrency > 0 ? o.concurrency : 1;
  }
  if (!o.slo.empty()) {
    auto slo = lg::ParseSlo(o.slo);
    if (!slo) return ReportError(slo.error().With("--slo"));
    plan.slo = *slo;
  }
  if (!(o.attainment > 0 && o.attainment <= 1)) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument, "--slo-attainment must be in (0, 1], e.g. 0.9"));
  }
  plan.attainment_target = o.attainment;
  if (!o.sweep.empty()) {
    auto sweep = lg::ParseSweep(o.sweep);
    if (!sweep) return ReportError(sweep.error().With("--sweep"));
    plan.sweep = *sweep;
  }

  // Prompts.
  std::optional<lg::Tokenizer> tokenizer;
  if (!o.tokenizer.empty()) {
    auto t = lg::Tokenizer::Load(o.tokenizer);
    if (!t) return ReportError(t.error().With("--tokenizer"));
    tokenizer = std::move(*t);
    load.tokenizer = &*tokenizer;
  }
  std::optional<lg::LengthDist> output;
  if (!o.output_tokens.empty()) {
    auto d = lg::ParseLengthDist(o.output_tokens);
    if (!d) return ReportError(d.error().With("--output-tokens"));
    output = *d;
  }
  std::vector<lg::Prompt> prompts;
  if (!o.dataset.empty()) {
    lg::DatasetOptions dopts;
    dopts.count = o.requests;
    dopts.output = output;
    dopts.seed = o.seed;
    dopts.tokenizer = load.tokenizer;
    auto p = lg::LoadDataset(o.dataset, dopts);
    if (!p) return ReportError(p.error().With("--dataset"));
    prompts = std::move(*p);
  } else {
    auto in = lg::ParseLengthDist(o.input_tokens);
    if (!in) return ReportError(in.error().With("--input-tokens"));
    prompts = lg::SyntheticPrompts(o.requests, *in, output.value_or(lg::LengthDist{.a = 128}),
                                   o.seed, load.tokenizer);
  }

  if (auto s = lg::ProbeServer(load.target, *connect_timeout); !s) return ReportError(s.error());

  bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string label;
  if (!o.no_progress) {
    load.progress_interval_s = tty ? 0.5 : 5;
    load.progress = [&label, tty](const lg::Progress& p) {
      std::fprintf(stderr, "%s[%s] %6.1fs  %lld/%lld done, %lld failed, %lld open%s",
                   tty ? "\r" : "", label.c_str(), p.elapsed_s, static_cast<long long>(p.done),
                   static_cast<long long>(p.total), static_cast<long long>(p.failed),
                   static_cast<long long>(p.open), tty ? "   " : "\n");
      std::fflush(stderr);
    };
  }
  plan.on_point = [&label, &o, tty](const lg::ArrivalSpec& a) {
    if (tty && !label.empty() && !o.no_progress) std::fputs("\n", stderr);
    label = a.ToString();
  };
  load.stop = &g_stop;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;  // no SA_RESTART: the event loop's wait returns at once
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto result = lg::RunBench(prompts, plan);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (tty && !o.no_progress) std::fputs("\n", stderr);
  if (!result) return ReportError(result.error());
  if (g_stop.load()) {
    std::fputs(
        "interrupted: reporting the requests measured so far (open ones count as "
        "cancelled)\n",
        stderr);
  }

  if (!o.csv.empty()) {
    if (auto s = WriteFileAtomic(o.csv, lg::BenchCsv(*result, plan.sweep)); !s) {
      return ReportError(s.error().With("--csv"));
    }
  }
  lg::SweepSpec chart_spec = plan.sweep.value_or(lg::SweepSpec{
      .kind = load.arrivals.open_loop() ? lg::SweepSpec::kRate : lg::SweepSpec::kConcurrency,
      .values = {result->points.front().value}});
  if (!o.svg.empty()) {
    std::string title = "anxin bench serve: " + o.url + " (" + std::string(lg::ApiName(*api)) +
                        (o.model.empty() ? "" : ", " + o.model) + ")";
    if (auto s =
            WriteFileAtomic(o.svg, lg::LatencySvg(result->points, chart_spec, plan.slo, title));
        !s) {
      return ReportError(s.error().With("--svg"));
    }
  }

  const lg::Summary& first = result->points.front().summary;
  if (g.json) {
    nlohmann::json j =
        plan.sweep ? lg::SweepJson(result->points, *plan.sweep, plan.slo, plan.attainment_target)
                   : lg::SummaryJson(first, result->points.front().loop);
    j["url"] = o.url;
    j["api"] = lg::ApiName(*api);
    if (!plan.sweep) j["arrivals"] = load.arrivals.ToString();
    std::printf("%s\n", j.dump(2).c_str());
  } else if (plan.sweep) {
    std::fputs(lg::SweepText(result->points, *plan.sweep, plan.slo, plan.attainment_target).c_str(),
               stdout);
  } else {
    const std::string api_path = lg::DefaultPath(load.request);
    const std::string headline = lg::AllFailedHeadline(
        first, load.target.path.empty() ? api_path : load.target.path, api_path);
    if (!headline.empty()) std::printf("%s\n", headline.c_str());
    std::printf("%s (%s) at %s\n", o.url.c_str(), std::string(lg::ApiName(*api)).c_str(),
                load.arrivals.ToString().c_str());
    std::fputs(lg::SummaryText(first, result->points.front().loop).c_str(), stdout);
  }
  // Nothing succeeded, or the SLOs are missed: the check failed.
  if (plan.sweep) {
    return lg::BestPoint(result->points, plan.slo) < 0 ? kExitCheckFailed : kExitOk;
  }
  if (first.completed == 0) return kExitCheckFailed;
  return result->points.front().meets ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--url", o->url, "server base URL, http://HOST:PORT")->capture_default_str();
  app.add_option("--api", o->api,
                 "completions (/v1/completions), chat (/v1/chat/completions) or triton "
                 "(/v2/models/MODEL/generate_stream)")
      ->capture_default_str();
  app.add_option("--endpoint", o->endpoint, "URL path instead of the API's default");
  app.add_option("--model", o->model, "model name sent in each request (Triton: in the path)");
  app.add_option("--dataset", o->dataset,
                 "JSONL or JSON-array prompts: ShareGPT conversations, {\"prompt\":...} or "
                 "{\"messages\":[...]} (default: synthetic prompts)");
  app.add_option("--input-tokens", o->input_tokens,
                 "synthetic prompt lengths: N, uniform:LOW:HIGH, normal:MEAN:STD, "
                 "lognormal:MEDIAN:SIGMA")
      ->capture_default_str();
  app.add_option("--output-tokens", o->output_tokens,
                 "max_tokens per request, same forms (default: 128, or the dataset's reply "
                 "lengths)");
  app.add_option("--tokenizer", o->tokenizer,
                 "Hugging Face tokenizer.json to count tokens when the server sends no usage");
  app.add_option("-n,--num-requests", o->requests, "requests per run (per sweep point)")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("-c,--concurrency", o->concurrency,
                 "requests in flight (closed loop; default 1); with --rate, the cap")
      ->check(AtLeast(1));
  app.add_option("--rate", o->rate, "open loop: requests per second (or inf)");
  CLI::Option* arrival =
      app.add_option("--arrival", o->arrival, "open-loop process: poisson, gamma or constant")
          ->capture_default_str();
  CLI::Option* burstiness = app.add_option("--burstiness", o->burstiness,
                                           "gamma shape: < 1 burstier than Poisson, > 1 more even")
                                ->capture_default_str()
                                ->check(Above(0));
  app.add_option("--duration", o->duration, "stop sending new requests after this long, e.g. 60s");
  app.add_option("--timeout", o->timeout, "per-request deadline from sending")
      ->capture_default_str();
  app.add_option("--connect-timeout", o->connect_timeout, "for the first connection check")
      ->capture_default_str();
  app.add_option("--slo", o->slo, "per-request objectives, e.g. ttft=500ms,tpot=50ms,e2e=10s");
  app.add_option("--slo-attainment", o->attainment,
                 "share of requests that must meet the SLOs for a load to pass")
      ->capture_default_str()
      ->check(Share());
  app.add_option("--sweep", o->sweep,
                 "run at several loads and name the best: concurrency=1,2,4,8 or rate=1,2,4");
  app.add_option("--csv", o->csv, "write one row per request");
  app.add_option("--svg", o->svg, "write a chart of latency against load");
  app.add_option("--seed", o->seed, "seed for prompts and arrivals")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("-H,--header", o->headers, "extra request header 'Name: value' (repeatable)");
  app.add_option("--extra-body", o->extra_body,
                 "JSON object merged into each request body, e.g. '{\"temperature\":0}'");
  app.add_flag("--no-stream", o->no_stream, "ask for whole responses instead of streams");
  app.add_flag("--ignore-eos", o->ignore_eos,
               "ask the server (vLLM) to generate exactly max_tokens");
  app.add_flag("--no-keep-alive", o->no_keep_alive, "a new connection per request");
  app.add_flag("--no-progress", o->no_progress, "no progress line on stderr");
  return [o, arrival, burstiness](const GlobalOptions& g) -> int {
    o->open_loop_flags = arrival->count() > 0 || burstiness->count() > 0;
    return Run(*o, g);
  };
}

ANXIN_REGISTER_SUBCOMMAND(bench, serve,
                          "load-test an inference server (OpenAI API or Triton): TTFT, TPOT, "
                          "goodput under SLOs, sweeps",
                          Setup);

}  // namespace
}  // namespace anxin::cli
