#include "anxin/demo/demo.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "anxin/agent/agent.h"
#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/http.h"
#include "anxin/base/stop_token.h"
#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/device/live_view.h"
#include "anxin/device/registry.h"
#include "anxin/device/summary.h"
#include "anxin/device/watch.h"
#include "anxin/lab/lab.h"
#include "anxin/notify/alert.h"
#include "anxin/notify/config.h"
#include "anxin/notify/service.h"

namespace anxin::demo {
namespace {

// A private directory for the demo's sockets, spools and checkpoints,
// removed with everything in it at the end.
class ScratchDir {
 public:
  static Result<std::unique_ptr<ScratchDir>> Make() {
    std::string templ = (std::filesystem::temp_directory_path() / "anxin-demo-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      return std::unexpected(ErrnoError(errno, "cannot create a scratch directory " + templ +
                                                   " (set TMPDIR to a writable directory)"));
    }
    return std::unique_ptr<ScratchDir>(new ScratchDir(std::move(templ)));
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// What every stage gets, and where it leaves lines for the final summary.
struct DemoContext {
  Clock& clock;
  std::stop_token stop;
  // The simulated node, made before anything is printed so that a bad
  // scenario is reported alone. Owned by RunDemo, declared there before the
  // agent whose sampling thread reads it, so that it outlives that thread.
  device::DeviceBackend* backend = nullptr;
  double seconds = 6;
  double interval_seconds = 0.5;
  bool tty = false;
  bool color = false;
  bool json = false;  // print nothing while running; the summary is one JSON document
  // The node's agent, serving /metrics and the page while every stage runs;
  // jobs report to it through `agent_socket`.
  agent::Agent* agent = nullptr;
  std::string agent_socket;
  std::string work_dir;  // scratch space of the stages, removed at the end
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
    ANXIN_TRY(
        device::Watch(backend, ctx.clock, watch, ctx.stop, [&](const device::Snapshot& s, int) {
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

// The value of the first series of `name` whose labels contain `match`.
std::optional<double> SeriesValue(std::string_view text, std::string_view name,
                                  std::string_view match) {
  for (std::string_view line : SplitLines(text)) {
    if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != '{') {
      continue;
    }
    const size_t close = line.rfind('}');
    if (close == std::string_view::npos || line.substr(0, close).find(match) == line.npos) continue;
    double v = 0;
    const std::string_view number = Trim(line.substr(close + 1));
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec == std::errc()) return v;
  }
  return std::nullopt;
}

// Stage "agent": what Prometheus would scrape from the node's agent now, for
// the two devices the scenario pushes past the alert lines.
Status AgentStage(DemoContext& ctx) {
  HttpClient client("127.0.0.1", ctx.agent->port(), {.timeout = std::chrono::seconds(5)});
  ANXIN_ASSIGN_OR_RETURN(HttpResponse r, client.Get("/metrics"));
  if (r.status != 200) return Internal("the agent answered HTTP " + std::to_string(r.status));
  size_t series = 0;
  for (std::string_view line : SplitLines(r.body)) {
    if (!line.empty() && line[0] != '#') ++series;
  }
  const std::string hot = "device=\"3\"";
  const std::string leak = "device=\"5\"";
  auto temp = SeriesValue(r.body, "anxin_device_temperature_celsius", hot);
  auto hbm = SeriesValue(r.body, "anxin_device_memory_used_ratio", leak);
  std::vector<std::string> lines;
  lines.push_back(
      fmt::format("GET {}/metrics: {} series, {} bytes", ctx.agent->url(), series, r.body.size()));
  if (temp) {
    lines.push_back(
        fmt::format("NPU 3 anxin_device_temperature_celsius {:.1f} (warning at 85, "
                    "critical at 95: deploy/prometheus/rules)",
                    *temp));
  }
  if (hbm) {
    lines.push_back(
        fmt::format("NPU 5 anxin_device_memory_used_ratio {:.3f} (alert above 0.90)", *hbm));
  }
  if (!ctx.json) {
    for (const std::string& l : lines) std::printf("  %s\n", l.c_str());
  }
  for (std::string& l : lines) ctx.summary.push_back(std::move(l));
  return Ok();
}

// Stage "notify": the alerts the node's state calls for now, posted to an
// in-process `anxin notify` as Alertmanager posts them, stored in its spool
// and delivered to a local sink (a JSON-lines file), read back here.
Status NotifyStage(DemoContext& ctx) {
  auto say = [&](const std::string& line) {
    if (!ctx.json) std::printf("  %s\n", line.c_str());
    ctx.summary.push_back(line);
  };
  HttpClient agent("127.0.0.1", ctx.agent->port(), {.timeout = std::chrono::seconds(5)});
  ANXIN_ASSIGN_OR_RETURN(HttpResponse metrics, agent.Get("/metrics"));
  const int64_t now = std::time(nullptr);
  std::vector<notify::Alert> alerts;
  auto add = [&](std::string name, std::string device, std::string severity, std::string summary,
                 std::string description) {
    notify::Alert a;
    a.status = "firing";
    a.labels = {{"alertname", std::move(name)},
                {"node", "demo-node"},
                {"device", device},
                {"severity", std::move(severity)}};
    a.annotations = {{"summary", std::move(summary)}, {"description", std::move(description)}};
    a.starts_at = now;
    a.fingerprint =
        fmt::format("{:016x}", std::hash<std::string>{}(a.labels["alertname"] + device));
    alerts.push_back(std::move(a));
  };
  for (int d = 0; d < 8; ++d) {
    const std::string match = fmt::format("device=\"{}\"", d);
    if (auto t = SeriesValue(metrics.body, "anxin_device_temperature_celsius", match);
        t && *t >= 85) {
      add("AnxinDeviceTemperatureHigh", std::to_string(d), "warning",
          fmt::format("demo-node NPU {} at {:.0f} C", d, *t),
          "At or above 85 C (the 910C throttles at 95 C).");
    }
    if (auto r = SeriesValue(metrics.body, "anxin_device_memory_used_ratio", match);
        r && *r > 0.9) {
      add("AnxinHbmUsageHigh", std::to_string(d), "warning",
          fmt::format("HBM {:.1f}% used on demo-node NPU {}", *r * 100, d),
          "More than 90% of HBM in use: the next allocation spike may fail.");
    }
  }
  if (alerts.empty()) {
    say("no device is over an alert line yet (a longer --seconds lets NPU 3 and NPU 5 get there);"
        " nothing to send");
    return Ok();
  }
  const std::string sink = ctx.work_dir + "/alerts.jsonl";
  ANXIN_ASSIGN_OR_RETURN(notify::NotifyConfig config, notify::LocalSinkConfig({.file = sink}));
  ANXIN_ASSIGN_OR_RETURN(
      auto service,
      notify::Service::Start(std::move(config), {.port = 0, .spool_dir = ctx.work_dir + "/spool"}));
  const size_t count = alerts.size();
  const std::string body = notify::EncodeWebhook(
      {.receiver = "demo", .status = "firing", .alerts = std::move(alerts), .group_key = "demo"});
  HttpClient client("127.0.0.1", service->port(), {.timeout = std::chrono::seconds(10)});
  ANXIN_ASSIGN_OR_RETURN(HttpResponse r, client.Post("/webhook", body));
  if (r.status != 200) {
    return Internal(fmt::format("anxin notify answered HTTP {}: {}", r.status, r.body));
  }
  say(fmt::format("POST http://127.0.0.1:{}/webhook ({} alert(s), as Alertmanager sends them): {}",
                  service->port(), count, std::string(Trim(r.body))));
  // Delivery is asynchronous: the spool hands the message to the sink.
  std::vector<std::string> lines;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline && !ctx.stop.stop_requested()) {
    auto text = ReadFile(sink);
    if (text && !text->empty()) {
      lines.clear();
      for (std::string_view l : SplitLines(*text)) {
        if (!l.empty()) lines.emplace_back(l);
      }
      if (!lines.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  service->Stop();
  if (lines.empty()) return Internal("the notification did not reach " + sink + " within 15 s");
  for (const std::string& line : lines) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("alerts")) continue;
    for (const auto& a : j["alerts"]) {
      say(fmt::format("delivered to the sink: [{}] {} ({}): {}", j.value("status", std::string()),
                      a["labels"].value("alertname", std::string()),
                      a.value("starts_at_local", std::string()),
                      a["annotations"].value("summary", std::string())));
    }
  }
  return Ok();
}

// Where examples/run/ is: ANXIN_EXAMPLES_DIR, else beside the build tree the
// binary runs from (build/release/anxin -> examples/), else the install
// prefix (bin/anxin -> share/anxin/examples). "" when none has train.py.
std::string RunExamplesDir() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("ANXIN_EXAMPLES_DIR"); env != nullptr && *env != '\0') {
    candidates.emplace_back(fs::path(env) / "run");
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "../../examples/run");
    candidates.push_back(exe.parent_path() / "../share/anxin/examples/run");
  }
  for (const fs::path& dir : candidates) {
    if (fs::is_regular_file(dir / "train.py", ec)) return fs::weakly_canonical(dir, ec).string();
  }
  return "";
}

// Why the run stage cannot run here ("" when it can): the sample trainer
// or PyTorch is missing.
std::string RunStageMissing(const std::string& examples, const char* python) {
  if (examples.empty()) return "skipped: examples/run/train.py not found (set ANXIN_EXAMPLES_DIR)";
  auto torch =
      RunCommand({python, "-c", "import torch.distributed"}, {.timeout = std::chrono::seconds(60)});
  if (!torch || !torch->ok()) {
    return "skipped: the sample job needs PyTorch (Debian python3-torch; scripts/install-deps)";
  }
  return "";
}

// `anxin run` of the sample trainer with the demo's faults, reporting to the
// demo's agent.
std::vector<std::string> RunStageCommand(const DemoContext& ctx, const std::string& self,
                                         const std::string& examples, const char* python) {
  const std::string ckpt = ctx.work_dir + "/ckpt";
  // --no-in-process: each fault goes through its device playbook (reset,
  // links), as the tour shows; docs/recovery.md has the in-process path.
  return {self,
          "run",
          "--nproc-per-node",
          "2",
          "--scenario",
          examples + "/demo-faults.yaml",
          "--playbook",
          examples + "/playbooks.yaml",
          "--checkpoint-dir",
          ckpt,
          "--state-dir",
          ctx.work_dir + "/state",
          "--log-dir",
          ctx.work_dir + "/logs",
          "--hang-timeout",
          "3s",
          "--stop-grace",
          "1s",
          "--max-restarts",
          "6",
          "--no-in-process",
          "--",
          python,
          "-u",
          examples + "/train.py",
          "--ckpt-dir",
          ckpt,
          "--resume",
          "{checkpoint}",
          "--steps",
          "800",
          "--hccl-error-at",
          "10",
          "--hang-at",
          "60:1"};
}

// Waits for the child; a stop request stops it (with a grace period).
Result<ExitStatus> WaitUnlessStopped(Subprocess& child, std::stop_token stop) {
  for (;;) {
    auto status = child.Wait(std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    if (status) return status;
    if (stop.stop_requested()) return child.Stop(std::chrono::seconds(5));
  }
}

// The incident table as `anxin incidents` prints it, and one summary line
// per incident.
Status ShowIncidents(DemoContext& ctx, const std::string& self, const std::string& state) {
  auto table =
      RunCommand({self, "incidents", "--state-dir", state}, {.timeout = std::chrono::seconds(30)});
  if (!table || !table->ok()) {
    return Internal("anxin incidents failed: " +
                    (table ? table->stderr_text : table.error().ToString()));
  }
  if (!ctx.json) std::printf("\n$ anxin incidents\n%s", table->stdout_text.c_str());
  auto incidents = RunCommand({self, "--json", "incidents", "--state-dir", state},
                              {.timeout = std::chrono::seconds(30)});
  if (!incidents || !incidents->ok()) return Ok();
  auto j = nlohmann::json::parse(incidents->stdout_text, nullptr, false);
  if (!j.is_array()) return Ok();
  for (const auto& i : j) {
    if (!i.is_object() || !i.contains("fault") || !i["fault"].is_object()) continue;
    std::string line =
        i["fault"].value("class", std::string("?")) + ": " + i.value("outcome", std::string("?"));
    if (i.contains("time_to_recovery_seconds") && i["time_to_recovery_seconds"].is_number()) {
      line += fmt::format(" in {:.2f} s", i["time_to_recovery_seconds"].get<double>());
    }
    ctx.summary.push_back(std::move(line));
  }
  return Ok();
}

// Stage "run": the sample trainer (2 ranks, gloo, real checkpoints, SDK
// telemetry to the demo's agent) under `anxin run`, with four faults: an
// HCCL error line, a hang, a lost NPU and a link flap; each is detected and
// recovered, then the incident table.
Status RunStage(DemoContext& ctx) {
  const std::string examples = RunExamplesDir();
  const char* python = "/usr/bin/python3";
  auto say = [&](const std::string& line) {
    if (!ctx.json) std::printf("  %s\n", line.c_str());
    std::fflush(stdout);
  };
  if (std::string missing = RunStageMissing(examples, python); !missing.empty()) {
    ctx.summary.push_back(std::move(missing));
    say(ctx.summary.back());
    return Ok();
  }
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Internal("cannot find this program (/proc/self/exe): " + ec.message());
  say("anxin run -- python3 examples/run/train.py: 2 ranks, 800 steps, a checkpoint every 5;");
  say("faults: an HCCL error line at step 10, a hang at step 60 after the first restart,");
  say("NPU 1 lost 25 s in, NPU 0's link down for 4 s at 45 s (examples/run/demo-faults.yaml)");
  SubprocessOptions o;
  o.argv = RunStageCommand(ctx, self, examples, python);
  o.env = {"ANXIN_AGENT_SOCKET=" + ctx.agent_socket, "ANXIN_JOB_ID=demo-train",
           "ANXIN_LOG_FORMAT=text"};
  std::mutex mu;
  std::string last_step;
  // The supervisor's own lines: each fault and each recovery, as they happen.
  o.on_stderr = [&](const OutputLine& l) {
    const size_t at = l.text.find("anxin run: ");
    if (at == std::string::npos) return;
    std::string_view what = std::string_view(l.text).substr(at + 11);
    if (what.starts_with("fault: ") || what.starts_with("recovered in ") ||
        what.starts_with("all ") || what.starts_with("gave up") || what.starts_with("stopped")) {
      std::lock_guard lock(mu);
      say(std::string(what));
    }
  };
  o.on_stdout = [&](const OutputLine& l) {
    if (l.text.starts_with("[rank 0] step ")) {
      std::lock_guard lock(mu);
      last_step = l.text;
    }
  };
  o.timeout = std::chrono::minutes(5);
  ANXIN_ASSIGN_OR_RETURN(auto child, Subprocess::Start(std::move(o)));
  ANXIN_ASSIGN_OR_RETURN(const ExitStatus status, WaitUnlessStopped(*child, ctx.stop));
  if (ctx.stop.stop_requested()) return Ok();
  if (!status.ok()) {
    return Internal("anxin run exited " + status.Describe() + "; its logs are in " + ctx.work_dir +
                    "/logs (kept only while the demo runs)");
  }
  {
    std::lock_guard lock(mu);
    if (!last_step.empty()) say("the job's last line: " + last_step);
  }
  return ShowIncidents(ctx, self, ctx.work_dir + "/state");
}

const std::vector<DemoStage>& Stages() {
  static const std::vector<DemoStage> kStages = {
      {"devices",
       [](const DemoContext& ctx) {
         return "a simulated node (" + ctx.backend->Describe() + "), watched live";
       },
       DevicesStage},
      {"agent",
       [](const DemoContext& ctx) {
         return "the node's exporter: " + ctx.agent->url() + "/metrics, as Prometheus scrapes it";
       },
       AgentStage},
      {"notify",
       [](const DemoContext&) {
         return std::string("an alert on its way to the on-call chat: anxin notify, spool, sink");
       },
       NotifyStage},
      {"run",
       [](const DemoContext&) {
         return std::string(
             "a training job under anxin run: four faults, each detected and recovered");
       },
       RunStage},
  };
  return kStages;
}

// The demo's agent on `port`; when that port is taken (an agent runs here
// already), on any free one.
Result<std::unique_ptr<agent::Agent>> StartAgent(device::DeviceBackend& backend,
                                                 agent::AgentOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(auto agent, agent::Agent::Create(backend, options));
  Status st = agent->Start();
  if (st) return agent;
  if (options.port == 0 || st.error().code() != ErrorCode::kUnavailable) {
    return std::unexpected(st.error());
  }
  options.port = 0;
  ANXIN_ASSIGN_OR_RETURN(agent, agent::Agent::Create(backend, options));
  ANXIN_TRY(agent->Start());
  return agent;
}

// Plays the chosen stages; returns what each showed.
Result<nlohmann::json> PlayStages(DemoContext& ctx, const std::vector<std::string>& names) {
  std::vector<const DemoStage*> stages;
  for (const DemoStage& st : Stages()) {
    if (std::find(names.begin(), names.end(), st.name) != names.end()) stages.push_back(&st);
  }
  nlohmann::json played = nlohmann::json::array();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (ctx.stop.stop_requested()) break;
    const DemoStage& stage = *stages[i];
    const std::string title = stage.title(ctx);
    if (!ctx.tty && !ctx.json)
      std::printf("== stage %zu/%zu: %s\n\n", i + 1, stages.size(), title.c_str());
    std::fflush(stdout);
    ctx.summary.clear();
    if (auto st = stage.run(ctx); !st) {
      return std::unexpected(std::move(st).error().With(std::string("demo stage ") + stage.name));
    }
    played.push_back({{"name", stage.name}, {"title", title}, {"changes", ctx.summary}});
  }
  return played;
}

// The last words: the JSON document, or what to try next.
void Finish(const DemoContext& ctx, const nlohmann::json& played, const DemoFlags& flags,
            const DemoPlan& plan, StopOnSignals& signals) {
  const bool interrupted = ctx.stop.stop_requested();
  if (ctx.json) {
    nlohmann::json j = {{"node", ctx.backend->Describe()},
                        {"seconds", ctx.seconds},
                        {"interval_seconds", ctx.interval_seconds},
                        {"interrupted", interrupted},
                        {"stages", played}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (interrupted) {
    std::printf("\nDemo interrupted.\n");
    return;
  }
  if (plan.stay_seconds) {
    std::printf("\nThe agent keeps serving %s/ for %s (Ctrl-C ends it).\n",
                ctx.agent->url().c_str(), flags.stay.c_str());
    std::fflush(stdout);
    signals.WaitFor(*plan.stay_seconds);
  }
  std::printf(
      "\nDemo done. Next: `anxin demo --stay 10m` keeps the agent's live page up after the "
      "stages; `anxin devices --watch` shows a node live; docs/demo.md says where each stage "
      "comes from.\n");
}

}  // namespace

std::vector<std::string_view> DemoStageNames() {
  std::vector<std::string_view> names;
  for (const DemoStage& st : Stages()) names.emplace_back(st.name);
  return names;
}

Result<DemoPlan> PlanDemo(const DemoFlags& flags) {
  DemoPlan plan;
  auto seconds = ParseSeconds(flags.seconds);
  if (!seconds || *seconds <= 0 || *seconds > 3600) {
    return InvalidArgument("--seconds: expected a duration from 1s to 1h, got '" + flags.seconds +
                           "'");
  }
  plan.seconds = *seconds;
  auto interval = ParseSeconds(flags.interval);
  if (!interval || *interval < 0.05) {
    return InvalidArgument("--interval: expected a duration of at least 50ms, got '" +
                           flags.interval + "'");
  }
  plan.interval_seconds = *interval;
  if (plan.interval_seconds > plan.seconds) {
    return InvalidArgument("--interval " + flags.interval + " is longer than --seconds " +
                           flags.seconds + ": nothing would change between the frames");
  }
  if (!flags.stay.empty()) {
    auto stay = ParseSeconds(flags.stay);
    if (!stay || *stay <= 0) {
      return InvalidArgument("--stay: expected a duration above 0 like 10m, got '" + flags.stay +
                             "'");
    }
    plan.stay_seconds = *stay;
  }
  if (flags.port < 0 || flags.port > 65535) {
    return InvalidArgument("--port: expected 0 to 65535, got " + std::to_string(flags.port));
  }
  const std::vector<std::string_view> known = DemoStageNames();
  for (const std::string& name : flags.stages) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument("--stages: unknown stage '" + name + "' (known: " + list + ")");
    }
  }
  for (std::string_view k : known) {
    if (flags.stages.empty() ||
        std::find(flags.stages.begin(), flags.stages.end(), k) != flags.stages.end()) {
      plan.stages.emplace_back(k);
    }
  }
  return plan;
}

Result<int> RunDemo(const DemoFlags& flags, bool json, std::string_view version) {
  if (flags.cluster) return lab::RunClusterDemo(flags.nodes, json);
  ANXIN_ASSIGN_OR_RETURN(const DemoPlan plan, PlanDemo(flags));
  auto backend = device::CreateBackend("sim", {.scenario = flags.scenario, .clock = &RealClock()});
  if (!backend) return std::unexpected(backend.error().With("--scenario " + flags.scenario));
  // Destroyed after the agent below (locals go in reverse order): the agent's
  // exporter samples it until the agent stops.
  const std::unique_ptr<device::DeviceBackend> node = *std::move(backend);
  const bool tty = isatty(STDOUT_FILENO) == 1 && !json;
  // Before the agent's threads start, so that they leave the signals to it
  // and Ctrl-C reaches the demo's stop token.
  StopOnSignals signals;
  ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<ScratchDir> work, ScratchDir::Make());
  agent::AgentOptions agent_options;
  agent_options.node = "demo-node";
  agent_options.port = flags.port;
  agent_options.socket_path = work->path() + "/agent.sock";
  agent_options.interval = std::chrono::milliseconds(500);
  agent_options.doctor_interval = Clock::Duration::zero();
  agent_options.version = std::string(version);
  auto agent = StartAgent(*node, agent_options);
  if (!agent) return std::unexpected(agent.error().With("the demo's agent"));
  if (!json) {
    std::printf("The node's agent serves %s/ (live page) and %s/metrics while the demo runs.\n\n",
                (*agent)->url().c_str(), (*agent)->url().c_str());
  }
  DemoContext ctx{.clock = RealClock(),
                  .stop = signals.token(),
                  .backend = node.get(),
                  .seconds = plan.seconds,
                  .interval_seconds = plan.interval_seconds,
                  .tty = tty,
                  .color = tty && !flags.no_color && std::getenv("NO_COLOR") == nullptr,
                  .json = json,
                  .agent = agent->get(),
                  .agent_socket = agent_options.socket_path,
                  .work_dir = work->path(),
                  .summary = {}};
  ANXIN_ASSIGN_OR_RETURN(const nlohmann::json played, PlayStages(ctx, plan.stages));
  Finish(ctx, played, flags, plan, signals);
  return 0;
}

}  // namespace anxin::demo
