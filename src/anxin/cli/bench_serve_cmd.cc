// `anxin bench serve`: load-test an OpenAI-compatible or Triton inference
// server and report TTFT, TPOT, ITL, E2E, throughput and goodput under SLOs
// (docs/serve.md).
//
//   anxin bench serve --url http://127.0.0.1:8000 --model m --concurrency 8
//   anxin bench serve --rate 20 --dataset sharegpt.json --slo ttft=500ms,tpot=50ms
//   anxin bench serve --sweep concurrency=1,2,4,8,16 --slo ttft=500ms,tpot=50ms --svg load.svg
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "anxin/base/stop_token.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/loadgen/bench_command.h"

namespace anxin::cli::bench_serve_cmd {
namespace {

namespace lg = anxin::loadgen;

struct Opts {
  lg::BenchFlags flags;
  bool no_progress = false;
};

// A progress line on stderr, redrawn in place on a terminal.
void ShowProgress(lg::BenchPlan& plan, bool tty) {
  auto label = std::make_shared<std::string>();
  plan.load.progress_interval_s = tty ? 0.5 : 5;
  plan.load.progress = [label, tty](const lg::Progress& p) {
    std::fprintf(stderr, "%s[%s] %6.1fs  %lld/%lld done, %lld failed, %lld open%s", tty ? "\r" : "",
                 label->c_str(), p.elapsed_s, static_cast<long long>(p.done),
                 static_cast<long long>(p.total), static_cast<long long>(p.failed),
                 static_cast<long long>(p.open), tty ? "   " : "\n");
    std::fflush(stderr);
  };
  plan.on_point = [label, tty](const lg::ArrivalSpec& a) {
    if (tty && !label->empty()) std::fputs("\n", stderr);
    *label = a.ToString();
  };
}

int Run(Opts o, const GlobalOptions& g) {
  if (const char* key = std::getenv("OPENAI_API_KEY"); key) o.flags.api_key = key;
  auto setup = lg::BuildBenchPlan(o.flags);
  if (!setup) return ReportError(setup.error());
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (!o.no_progress) ShowProgress((*setup)->plan, tty);
  // SIGINT/SIGTERM: the run stops and reports what it measured so far.
  StopOnSignals stop;
  (*setup)->plan.load.stop = stop.token();
  auto outcome = lg::RunBenchCommand(**setup, g.json);
  if (tty && !o.no_progress) std::fputs("\n", stderr);
  if (!outcome) return ReportError(outcome.error());
  if (stop.stop_requested()) {
    std::fputs(
        "interrupted: reporting the requests measured so far (open ones count as "
        "cancelled)\n",
        stderr);
  }
  std::fputs(outcome->report.c_str(), stdout);
  return outcome->passed ? kExitOk : kExitCheckFailed;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--url", o->flags.url, "server base URL, http://HOST:PORT")->capture_default_str();
  app.add_option("--api", o->flags.api,
                 "completions (/v1/completions), chat (/v1/chat/completions) or triton "
                 "(/v2/models/MODEL/generate_stream)")
      ->capture_default_str();
  app.add_option("--endpoint", o->flags.endpoint, "URL path instead of the API's default");
  app.add_option("--model", o->flags.model,
                 "model name sent in each request (Triton: in the path)");
  app.add_option("--dataset", o->flags.dataset,
                 "JSONL or JSON-array prompts: ShareGPT conversations, {\"prompt\":...} or "
                 "{\"messages\":[...]} (default: synthetic prompts)");
  app.add_option("--input-tokens", o->flags.input_tokens,
                 "synthetic prompt lengths: N, uniform:LOW:HIGH, normal:MEAN:STD, "
                 "lognormal:MEDIAN:SIGMA")
      ->capture_default_str();
  app.add_option("--output-tokens", o->flags.output_tokens,
                 "max_tokens per request, same forms (default: 128, or the dataset's reply "
                 "lengths)");
  app.add_option("--tokenizer", o->flags.tokenizer,
                 "Hugging Face tokenizer.json to count tokens when the server sends no usage");
  app.add_option("-n,--num-requests", o->flags.requests, "requests per run (per sweep point)")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("-c,--concurrency", o->flags.concurrency,
                 "requests in flight (closed loop; default 1); with --rate, the cap")
      ->check(AtLeast(1));
  app.add_option("--rate", o->flags.rate, "open loop: requests per second (or inf)");
  CLI::Option* arrival =
      app.add_option("--arrival", o->flags.arrival, "open-loop process: poisson, gamma or constant")
          ->capture_default_str();
  CLI::Option* burstiness = app.add_option("--burstiness", o->flags.burstiness,
                                           "gamma shape: < 1 burstier than Poisson, > 1 more even")
                                ->capture_default_str()
                                ->check(Above(0));
  app.add_option("--duration", o->flags.duration,
                 "stop sending new requests after this long, e.g. 60s");
  app.add_option("--timeout", o->flags.timeout, "per-request deadline from sending")
      ->capture_default_str();
  app.add_option("--connect-timeout", o->flags.connect_timeout, "for the first connection check")
      ->capture_default_str();
  app.add_option("--slo", o->flags.slo,
                 "per-request objectives, e.g. ttft=500ms,tpot=50ms,e2e=10s");
  app.add_option("--slo-attainment", o->flags.attainment,
                 "share of requests that must meet the SLOs for a load to pass")
      ->capture_default_str()
      ->check(Share());
  app.add_option("--sweep", o->flags.sweep,
                 "run at several loads and name the best: concurrency=1,2,4,8 or rate=1,2,4");
  app.add_option("--csv", o->flags.csv, "write one row per request");
  app.add_option("--svg", o->flags.svg, "write a chart of latency against load");
  app.add_option("--seed", o->flags.seed, "seed for prompts and arrivals")
      ->capture_default_str()
      ->check(AtLeast(0));
  app.add_option("-H,--header", o->flags.headers,
                 "extra request header 'Name: value' (repeatable)");
  app.add_option("--extra-body", o->flags.extra_body,
                 "JSON object merged into each request body, e.g. '{\"temperature\":0}'");
  app.add_flag("--no-stream", o->flags.no_stream, "ask for whole responses instead of streams");
  app.add_flag("--ignore-eos", o->flags.ignore_eos,
               "ask the server (vLLM) to generate exactly max_tokens");
  app.add_flag("--no-keep-alive", o->flags.no_keep_alive, "a new connection per request");
  app.add_flag("--no-progress", o->no_progress, "no progress line on stderr");
  return [o, arrival, burstiness](const GlobalOptions& g) -> int {
    o->flags.open_loop_flags = arrival->count() > 0 || burstiness->count() > 0;
    return Run(*o, g);
  };
}

ANXIN_REGISTER_SUBCOMMAND(bench, serve,
                          "load-test an inference server (OpenAI API or Triton): TTFT, TPOT, "
                          "goodput under SLOs, sweeps",
                          Setup);

}  // namespace
}  // namespace anxin::cli::bench_serve_cmd
