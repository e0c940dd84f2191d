// `anxin devices`: the node's accelerators as a table like `npu-smi info`, as
// JSON, or refreshed in place (--watch). Docs: docs/devices.md.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/stop_token.h"
#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"
#include "anxin/device/live_view.h"
#include "anxin/device/registry.h"
#include "anxin/device/table.h"
#include "anxin/device/watch.h"

namespace anxin::cli::devices_cmd {
namespace {

struct Options {
  std::string backend;   // "" = device.backend from the configuration
  std::string scenario;  // "" = device.scenario from the configuration
  bool json = false;
  bool watch = false;
  std::string interval = "1s";
  int count = 0;
  std::string at;
  bool no_color = false;
};

int Run(const Options& o, const GlobalOptions& g) {
  auto interval = ParseSeconds(o.interval);
  if (!interval || *interval <= 0) {
    return ReportError(Error(
        ErrorCode::kInvalidArgument,
        "--interval: expected a duration above 0 like 1s or 500ms, got '" + o.interval + "'"));
  }
  // --at runs the scenario on a virtual clock from that time on, so a watch
  // steps through it without waiting.
  std::optional<VirtualClock> virtual_clock;
  Clock* clock = &RealClock();
  double at_seconds = 0;
  if (!o.at.empty()) {
    auto at = ParseSeconds(o.at);
    if (!at) {
      return ReportError(Error(ErrorCode::kInvalidArgument, "--at: " + at.error().message()));
    }
    at_seconds = *at;
    virtual_clock.emplace(RealClock().Now());  // timestamps stay plausible
    virtual_clock->set_auto_advance(true);
    clock = &*virtual_clock;
  }
  // Flags win over the configuration file and ANXIN_DEVICE_BACKEND / ANXIN_SCENARIO.
  auto backend = device::CreateConfiguredBackend(o.backend, o.scenario, g.config, clock);
  if (!backend) return ReportError(backend.error());
  if (virtual_clock) virtual_clock->Advance(FromSeconds(at_seconds));

  const bool tty = isatty(STDOUT_FILENO) == 1;
  const bool json = o.json || g.json;
  const bool color = tty && !o.no_color && std::getenv("NO_COLOR") == nullptr;
  device::LiveViewOptions view_options;
  view_options.tty = tty && o.watch && !json;
  view_options.color = color;
  view_options.json = json;
  device::LiveView view(stdout, view_options);
  std::optional<StopOnSignals> signals;  // Ctrl-C ends a live watch
  if (o.watch && !virtual_clock) signals.emplace();
  std::stop_token stop = signals ? signals->token() : std::stop_token();
  if (!o.watch) {
    auto snap = device::TakeSnapshot(**backend, *clock);
    if (!snap) return ReportError(snap.error());
    if (json) {
      std::printf("%s\n", device::SnapshotToJson(*snap).dump(2).c_str());
    } else {
      std::fputs(device::RenderTable(*snap, {.color = color, .notes = true}).c_str(), stdout);
    }
    return kExitOk;
  }
  int count = o.count;
  if (virtual_clock && count == 0) count = 10;  // a virtual watch would never end
  auto frames =
      device::Watch(**backend, *clock, {.interval_seconds = *interval, .count = count}, stop,
                    [&](const device::Snapshot& s, int frame) { view.Show(s, frame); });
  if (!frames) return ReportError(frames.error());
  view.Finish();
  return kExitOk;
}

CommandMain Setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("--backend", o->backend,
                 "device backend: sim (default), nvml (NVIDIA GPUs), ascend (Huawei NPUs) "
                 "(config device.backend, env ANXIN_DEVICE_BACKEND)");
  app.add_option("--scenario", o->scenario,
                 "sim: scenario YAML file, or a built-in one: default (8 x Ascend910C), demo, "
                 "faults, h100-node (default: config device.scenario, env ANXIN_SCENARIO)");
  app.add_flag("--json", o->json, "print JSON (one document; JSON lines with --watch)");
  CLI::Option* watch =
      app.add_flag("--watch", o->watch, "refresh until Ctrl-C (or --count frames)");
  app.add_option("--interval", o->interval, "refresh interval for --watch, e.g. 1s, 500ms")
      ->capture_default_str()
      ->needs(watch);
  app.add_option("--count", o->count, "with --watch: stop after N frames (0 = until Ctrl-C)")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            int n = -1;
            auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (ec != std::errc() || end != text.data() + text.size() || n < 0) {
              return "expected a whole number of frames, 0 or more, got '" + text + "'";
            }
            return "";
          },
          "FRAMES"))
      ->needs(watch)
      ->check(AtLeast(0));
  app.add_option("--at", o->at,
                 "sim: show the scenario as it is this far in (e.g. 65s), on a virtual clock; "
                 "--watch then steps through it without waiting");
  app.add_flag("--no-color", o->no_color, "no ANSI colours (also: NO_COLOR set)");
  return [o](const GlobalOptions& g) { return Run(*o, g); };
}

ANXIN_REGISTER_COMMAND(devices, "show the node's accelerators (like npu-smi info)", Setup);

}  // namespace
}  // namespace anxin::cli::devices_cmd
