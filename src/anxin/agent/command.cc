#include "anxin/agent/command.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/file.h"
#include "anxin/base/stop_token.h"
#include "anxin/device/registry.h"

namespace anxin::agent {
namespace {

// A duration flag; the caller checks its range.
Result<double> Seconds(const std::string& text, const char* flag, const char* expected) {
  auto s = ParseSeconds(text);
  if (!s) return InvalidArgument(fmt::format("{}: expected {}, got '{}'", flag, expected, text));
  return *s;
}

// The agent: section, then the flags over it.
Status ApplyFlags(const AgentFlags& f, AgentConfig& c) {
  if (f.listen) ANXIN_TRY(ParseListen(*f.listen, "--listen", c));
  if (f.port) c.port = *f.port;
  if (c.port < 0 || c.port > 65535) {
    return InvalidArgument("--port: expected 0 to 65535 (0: any free port), got " +
                           std::to_string(c.port));
  }
  if (f.interval) {
    const char* expected = "a duration above 0 like 1s or 500ms";
    ANXIN_ASSIGN_OR_RETURN(c.interval_seconds, Seconds(*f.interval, "--interval", expected));
    if (c.interval_seconds <= 0) {
      return InvalidArgument(
          fmt::format("--interval: expected {}, got '{}'", expected, *f.interval));
    }
  }
  if (f.compat) {
    auto m = ParseCompat(*f.compat);
    if (!m) return std::unexpected(m.error().With("--compat"));
    c.compat = *m;
  }
  if (f.node) c.node = *f.node;
  if (f.doctor_interval) {
    const char* expected = "0 (off) or a duration of at least 1s like 10m";
    ANXIN_ASSIGN_OR_RETURN(c.doctor_interval_seconds,
                           Seconds(*f.doctor_interval, "--doctor-interval", expected));
    if (c.doctor_interval_seconds != 0 && c.doctor_interval_seconds < 1) {
      return InvalidArgument(
          fmt::format("--doctor-interval: expected {}, got '{}'", expected, *f.doctor_interval));
    }
  }
  if (const char* env = std::getenv("ANXIN_DOCTOR_ROOT"); env != nullptr && *env != '\0') {
    c.doctor_root = env;  // as `anxin doctor` reads it; the DaemonSet sets /host
  }
  if (f.doctor_root) c.doctor_root = *f.doctor_root;
  if (f.web_config) c.web_config = *f.web_config;
  return Ok();
}

// --socket, else ANXIN_AGENT_SOCKET, else agent.socket, else the default.
std::string Socket(const AgentFlags& f, const AgentConfig& c) {
  if (f.socket) return *f.socket;
  if (const char* env = std::getenv("ANXIN_AGENT_SOCKET"); env && *env) return env;
  return c.socket.empty() ? std::string(kDefaultSocket) : c.socket;
}

AgentOptions MakeOptions(const AgentSetup& s, bool once, Clock* clock, std::string_view version) {
  const AgentConfig& c = s.config;
  AgentOptions options;
  if (!c.node.empty()) options.node = c.node;
  options.host = c.host;
  options.port = c.port;
  options.socket_path = once ? "" : s.socket;
  options.interval = FromSeconds(c.interval_seconds);
  options.compat = c.compat;
  options.clock = clock;
  options.job_expiry = FromSeconds(c.job_expiry_seconds);
  options.version = std::string(version);
  options.doctor_interval = FromSeconds(c.doctor_interval_seconds);
  options.doctor_root = c.doctor_root;
  options.web = s.web;
  return options;
}

// --once: one sample and one round of checks, printed as the exposition.
Result<int> SampleOnce(device::DeviceBackend& backend, const AgentOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<Agent> a, Agent::Create(backend, options));
  a->devices().SampleOnce();
  if (a->doctor()) a->doctor()->RunOnce();
  std::fputs(a->Exposition().c_str(), stdout);
  return 0;
}

void PrintServing(Agent& a, device::DeviceBackend& backend, const AgentSetup& s) {
  const AgentConfig& c = s.config;
  const std::string doctor = c.doctor_interval_seconds > 0
                                 ? fmt::format("every {:g}s", c.doctor_interval_seconds)
                                 : std::string("off");
  const std::string compat =
      c.compat == Compat::kNone ? "" : ", compat " + std::string(CompatName(c.compat));
  std::fprintf(stderr,
               "anxin agent: serving %s/metrics and the page %s/ (%zu devices from %s, every "
               "%gs%s), SDK socket %s, doctor checks %s%s\n",
               a.url().c_str(), a.url().c_str(), a.devices().devices().size(),
               backend.Describe().c_str(), c.interval_seconds, compat.c_str(),
               s.socket.empty() ? "off" : s.socket.c_str(), doctor.c_str(),
               s.web.users.empty() ? "" : ", basic auth on");
}

// Serves until SIGINT/SIGTERM or the duration.
Result<int> Serve(device::DeviceBackend& backend, const AgentOptions& options,
                  const AgentSetup& setup, const std::string& port_file) {
  StopOnSignals stop;  // before any thread starts
  ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<Agent> a, Agent::Create(backend, options));
  ANXIN_TRY(a->Start());
  PrintServing(*a, backend, setup);
  if (!port_file.empty()) {
    Status st = WriteFileAtomic(port_file, std::to_string(a->port()) + "\n");
    if (!st) return std::unexpected(st.error().With("--port-file"));
  }
  stop.WaitFor(setup.duration_seconds);
  a->Stop();
  return 0;
}

}  // namespace

Result<AgentSetup> LoadAgentSetup(const AgentFlags& flags, const GlobalConfig& config) {
  AgentSetup s;
  ANXIN_ASSIGN_OR_RETURN(s.config, ParseAgentConfig(FindSection(config, "agent")));
  ANXIN_TRY(ApplyFlags(flags, s.config));
  if (!s.config.web_config.empty()) {
    auto loaded = LoadWebConfig(s.config.web_config);
    if (!loaded) return std::unexpected(loaded.error().With("--web.config.file"));
    s.web = std::move(*loaded);
  }
  s.socket = Socket(flags, s.config);
  if (!flags.duration.empty()) {
    auto d = ParseSeconds(flags.duration);
    if (!d || *d <= 0) {
      return InvalidArgument("--duration: expected a duration above 0 like 30s, got '" +
                             flags.duration + "'");
    }
    s.duration_seconds = *d;
  }
  if (!flags.at.empty()) {
    // A running agent samples in real time; only --once reads the virtual clock.
    if (!flags.once) return InvalidArgument("--at needs --once: add --once, or drop --at");
    auto at = ParseSeconds(flags.at);
    if (!at) return InvalidArgument("--at: " + at.error().message());
    s.at_seconds = *at;
  }
  return s;
}

Result<int> RunAgentCommand(const AgentFlags& flags, const GlobalConfig& config,
                            std::string_view version) {
  ANXIN_ASSIGN_OR_RETURN(AgentSetup setup, LoadAgentSetup(flags, config));
  // --at: the sim scenario as it is that far in, on a virtual clock that
  // stands still there. Like an agent started at that moment, the sample
  // shows the devices' state then, and the fault-event counters start from
  // nothing (events before a subscription are not replayed); the clock does
  // not move on, so no later event can slip into the sample.
  std::optional<VirtualClock> virtual_clock;
  if (setup.at_seconds) virtual_clock.emplace(RealClock().Now());
  Clock* clock = virtual_clock ? static_cast<Clock*>(&*virtual_clock) : &RealClock();
  ANXIN_ASSIGN_OR_RETURN(
      std::unique_ptr<device::DeviceBackend> backend,
      device::CreateConfiguredBackend(flags.backend, flags.scenario, config, clock));
  if (virtual_clock) virtual_clock->Advance(FromSeconds(*setup.at_seconds));
  const AgentOptions options = MakeOptions(setup, flags.once, clock, version);
  if (flags.once) return SampleOnce(*backend, options);
  return Serve(*backend, options, setup, flags.port_file);
}

}  // namespace anxin::agent
