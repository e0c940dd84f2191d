// `anxin demo`: the first thing a user runs (`make demo`). It plays a short
// story on a simulated node in stages; each stage is one entry of kStages, so
// later parts of anxin (agent, supervisor, fault recovery) add a stage here
// and the work itself in their own module. Docs: docs/demo.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/cli/command.h"
#include "anxin/device/live_view.h"
#include "anxin/device/registry.h"
#include "anxin/device/summary.h"
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
  // The simulated node, made before anything is printed so that a bad
  // scenario is reported alone.
  std::unique_ptr<device::DeviceBackend> backend;
  double seconds = 6;
  double interval_seconds = 0.5;
  bool tty = false;
  bool color = false;
  bool json = false;  // print nothing while running; the summary is one JSON document
  std::vector<std::string> summary;
};

struct DemoStage {
  const char* name;
  // The heading of the stage for this node.
  std::function<std::string(const DemoContext&)> title;
  std::function<Status(DemoContext&)> run;
};

// Stage "devices": the node's devices, watched live while the scenario plays
// (in the demo scenario NPU 3 heats up and NPU 5 leaks HBM).
Status DevicesStage(DemoContext& ctx) {
  device::DeviceBackend& backend = *ctx.backend;
  const int frames = static_cast<int>(ctx.seconds / ctx.interval_seconds + 1e-9) + 1;
  const device::WatchOptions watch{.interval_seconds = ctx.interval_seconds, .count = frames};
  if (ctx.json) {
    std::optional<device::Snapshot> first, last;
    ANXIN_TRY(device::Watch(backend, ctx.clock, watch, ctx.stop,
                            [&](const device::Snapshot& s, int) {
                              if (!first) first = s;
                              last = s;
                            }));
    if (first && last) {
      for (std::string& c : device::DescribeChanges(*first, *last)) ctx.summary.push_back(c);
    }
    return Ok();
  }
  device::LiveViewOptions view_options;
  view_options.tty = ctx.tty;
  view_options.color = ctx.color;
  view_options.compact = !ctx.tty;
  view_options.heading = "anxin demo: " + backend.Describe();
  view_options.total_seconds = ctx.seconds;
  device::LiveView view(stdout, view_options);
  ANXIN_TRY(device::Watch(backend, ctx.clock, watch, ctx.stop,
                          [&](const device::Snapshot& s, int frame) { view.Show(s, frame); }));
  view.Finish();
  for (const std::string& c : view.Changes()) ctx.summary.push_back(c);
  return Ok();
}

const std::vector<DemoStage>& Stages() {
  static const std::vector<DemoStage> kStages = {
      {"devices",
       [](const DemoContext& ctx) {
         return "a simulated node (" + ctx.backend->Describe() + "), watched live";
       },
       DevicesStage},
  };
  return kStages;
}

int Run(const Options& o, const GlobalOptions& g) {
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
  if (*interval > *seconds) {
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--interval " + o.interval + " is longer than --seconds " +
                                 o.seconds + ": nothing would change between the frames"));
  }
  auto backend = device::CreateBackend("sim", {.scenario = o.scenario, .clock = &RealClock()});
  if (!backend) return ReportError(backend.error().With("--scenario " + o.scenario));
  const bool tty = isatty(STDOUT_FILENO) == 1 && !g.json;
  DemoContext ctx{.clock = RealClock(),
                  .stop = device::StopOnInterrupt(),
                  .backend = *std::move(backend),
                  .seconds = *seconds,
                  .interval_seconds = *interval,
                  .tty = tty,
                  .color = tty && !o.no_color && std::getenv("NO_COLOR") == nullptr,
                  .json = g.json,
                  .summary = {}};
  const auto& stages = Stages();
  nlohmann::json stages_json = nlohmann::json::array();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (ctx.stop.stop_requested()) break;
    const std::string title = stages[i].title(ctx);
    if (!tty && !ctx.json) std::printf("== stage %zu/%zu: %s\n\n", i + 1, stages.size(), title.c_str());
    std::fflush(stdout);
    ctx.summary.clear();
    if (auto st = stages[i].run(ctx); !st) {
      return ReportError(std::move(st).error().With(std::string("demo stage ") + stages[i].name));
    }
    stages_json.push_back({{"name", stages[i].name}, {"title", title}, {"changes", ctx.summary}});
  }
  const bool interrupted = ctx.stop.stop_requested();
  if (ctx.json) {
    nlohmann::json j = {{"node", ctx.backend->Describe()},
                        {"seconds", ctx.seconds},
                        {"interval_seconds", ctx.interval_seconds},
                        {"interrupted", interrupted},
                        {"stages", stages_json}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  if (interrupted) {
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
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(demo, "a short tour of anxin on a simulated node (8 NPUs by default)",
                       Setup);

}  // namespace
}  // namespace anxin::cli
