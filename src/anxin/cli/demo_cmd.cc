// `anxin demo`: the first thing a user runs (`make demo`). It plays a short
// story on a simulated node in stages; each stage is one entry of kStages, so
// later parts of anxin (agent, supervisor, fault recovery) add a stage here
// and the work itself in their own module. Docs: docs/demo.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/device/live_view.h"
#include "anxin/device/registry.h"
#include "anxin/device/watch.h"

namespace anxin::cli {
namespace {

struct Options {
  std::string seconds = "6s";
  std::string interval = "0.5s";
  std::string scenario = "demo";
  bool no_color = false;
};

// What every stage gets, and where it leaves lines for the final summary.
struct DemoContext {
  Clock& clock;
  std::stop_token stop;
  std::string scenario;
  double seconds = 6;
  double interval_seconds = 0.5;
  bool tty = false;
  bool color = false;
  std::vector<std::string> summary;
};

struct DemoStage {
  const char* name;
  const char* title;
  std::function<Status(DemoContext&)> run;
};

// Stage "devices": the node's NPUs, watched live while the scenario heats one
// of them and leaks memory on another.
Status DevicesStage(DemoContext& ctx) {
  ANXIN_ASSIGN_OR_RETURN(
      auto backend, device::CreateBackend("sim", {.scenario = ctx.scenario, .clock = &ctx.clock}));
  device::LiveViewOptions view_options;
  view_options.tty = ctx.tty;
  view_options.color = ctx.color;
  view_options.compact = !ctx.tty;
  view_options.heading = "anxin demo: " + backend->Describe();
  view_options.total_seconds = ctx.seconds;
  device::LiveView view(stdout, view_options);
  int frames = static_cast<int>(ctx.seconds / ctx.interval_seconds + 1e-9) + 1;
  ANXIN_TRY(device::Watch(*backend, ctx.clock,
                          {.interval_seconds = ctx.interval_seconds, .count = frames}, ctx.stop,
                          [&](const device::Snapshot& s, int frame) { view.Show(s, frame); }));
  view.Finish();
  for (const std::string& c : view.Changes()) ctx.summary.push_back(c);
  return Ok();
}

const std::vector<DemoStage>& Stages() {
  static const std::vector<DemoStage> kStages = {
      {"devices", "a simulated node of 8 Ascend 910C NPUs, watched live", DevicesStage},
  };
  return kStages;
}

int Run(const Options& o) {
  auto seconds = ParseSeconds(o.seconds);
  if (!seconds || *seconds <= 0 || *seconds > 3600) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument,
              "--seconds: expected a duration from 1s to 1h, got '" + o.seconds + "'"));
  }
  auto interval = ParseSeconds(o.interval);
  if (!interval || *interval < 0.05) {
    return ReportError(
        Error(ErrorCode::kInvalidArgument,
              "--interval: expected a duration of at least 50ms, got '" + o.interval + "'"));
  }
  const bool tty = isatty(STDOUT_FILENO) == 1;
  DemoContext ctx{.clock = RealClock(),
                  .stop = device::StopOnInterrupt(),
                  .scenario = o.scenario,
                  .seconds = *seconds,
                  .interval_seconds = *interval,
                  .tty = tty,
                  .color = tty && !o.no_color && std::getenv("NO_COLOR") == nullptr,
                  .summary = {}};
  const auto& stages = Stages();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (ctx.stop.stop_requested()) break;
    if (!tty) std::printf("== stage %zu/%zu: %s\n\n", i + 1, stages.size(), stages[i].title);
    std::fflush(stdout);
    if (auto st = stages[i].run(ctx); !st) {
      return ReportError(std::move(st).error().With(std::string("demo stage ") + stages[i].name));
    }
  }
  if (ctx.stop.stop_requested()) {
    std::printf("\nDemo interrupted.\n");
    return kExitOk;
  }
  std::printf(
      "\nDemo done. Next: `anxin devices --watch` shows a node live, "
      "`anxin devices --scenario faults --at 75s` a node with one fault of every kind "
      "(docs/devices.md).\n");
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("--seconds", o->seconds, "how long to watch the node")->capture_default_str();
  app.add_option("--interval", o->interval, "refresh interval")->capture_default_str();
  app.add_option("--scenario", o->scenario, "the sim scenario to play (file or built-in name)")
      ->capture_default_str();
  app.add_flag("--no-color", o->no_color, "no ANSI colours (also: NO_COLOR set)");
  return [o](const GlobalOptions&) { return Run(*o); };
}

ANXIN_REGISTER_COMMAND(demo, "a short tour of anxin on a simulated 8-NPU node", Setup);

}  // namespace
}  // namespace anxin::cli
