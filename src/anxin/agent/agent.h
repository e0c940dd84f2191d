// `anxin agent`: the node's Prometheus exporter. It puts together the device
// sampler (device_exporter.h), the job telemetry fed by the SDK's socket
// (job_telemetry.h, monitor/sdk_receiver.h), its own self-metrics, and an
// HTTP server with /metrics, /healthz, /api/v1/devices and the live page at
// / with its history (page.h, history.h). docs/agent.md, docs/dashboard.md.
//
//   #include "anxin/device/registry.h"
//
//   ANXIN_ASSIGN_OR_RETURN(auto backend, device::CreateBackend("sim", {}));
//   AgentOptions options;
//   options.port = 0;                                   // any free port
//   options.socket_path = "/tmp/anxin-agent.sock";      // "" = no SDK socket
//   ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Agent::Create(*backend, options));
//   ANXIN_TRY(agent->Start());
//   spdlog::info("serving http://{}/metrics", agent->address());
//   std::string body = agent->Exposition();             // what GET /metrics returns
//   agent->Stop();
//
// Self-metrics (label node): anxin_agent_build_info{version} 1,
// anxin_agent_scrape_duration_seconds (histogram, observed after each
// exposition, so it shows in the next), anxin_agent_resident_memory_bytes,
// plus the sampler's and the SDK receiver's (anxin_sdk_*).
//
// Thread safety: Exposition and DevicesJson may be called from any thread
// (the HTTP handlers do); Create, Start and Stop from one.
#ifndef ANXIN_AGENT_AGENT_H_
#define ANXIN_AGENT_AGENT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "anxin/agent/device_exporter.h"
#include "anxin/agent/doctor_exporter.h"
#include "anxin/agent/history.h"
#include "anxin/agent/job_telemetry.h"
#include "anxin/agent/web_config.h"
#include "anxin/base/clock.h"
#include "anxin/base/config.h"
#include "anxin/base/error.h"
#include "anxin/base/http.h"
#include "anxin/device/backend.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/monitor/sdk_receiver.h"

namespace anxin::agent {

// 9466: clear of node-exporter (9100), dcgm-exporter (9400) and Ascend's
// npu-exporter (8082).
inline constexpr int kDefaultPort = 9466;
inline constexpr std::string_view kDefaultHost = "127.0.0.1";
inline constexpr std::string_view kDefaultSocket = "/run/anxin/agent.sock";

// The `agent:` section of the configuration file (docs/agent.md):
//   agent:
//     listen: 0.0.0.0:9466   # host:port of the HTTP server
//     interval: 1s           # device sample interval
//     socket: /run/anxin/agent.sock
//     compat: npu-exporter   # none, npu-exporter or dcgm
//     node: gpu-node-17      # the node label (default: the host name)
//     job_expiry: 10m        # forget a rank silent this long
//     doctor_interval: 10m   # run doctor's host checks this often; 0 = off
//     doctor_root: /         # the host tree they read ("/host" in a container)
//     web_config: /etc/anxin/web.yml  # TLS and basic auth (web_config.h)
struct AgentConfig {
  std::string host = std::string(kDefaultHost);
  int port = kDefaultPort;
  double interval_seconds = 1;
  std::string socket{};  // "" = ANXIN_AGENT_SOCKET, else kDefaultSocket
  Compat compat = Compat::kNone;
  std::string node{};  // "" = the host name
  double job_expiry_seconds = 600;
  double doctor_interval_seconds = 600;  // 0 = off
  std::string doctor_root = "/";
  std::string web_config{};  // "" = plain HTTP without authentication
};
// Reads the section (nullopt: the defaults). Errors name file:line:col.
Result<AgentConfig> ParseAgentConfig(const std::optional<ConfigNode>& section);
// "host:port", "[::1]:port" or ":port" (= 0.0.0.0) into config's host and
// port; kInvalidArgument naming `origin` otherwise.
Status ParseListen(std::string_view text, std::string_view origin, AgentConfig& config);

// The host name, for the node label; "localhost" when it cannot be read.
std::string DefaultNodeName();

struct AgentOptions {
  std::string node = DefaultNodeName();
  std::string host = std::string(kDefaultHost);
  int port = kDefaultPort;    // 0: the kernel picks one (see port())
  std::string socket_path{};  // "" = no SDK receiver
  Clock::Duration interval = std::chrono::seconds(1);
  Compat compat = Compat::kNone;
  Clock* clock = nullptr;  // nullptr: the wall clock
  Clock::Duration job_expiry = std::chrono::minutes(10);
  std::string version = "unknown";  // the build_info label
  // Doctor's host checks every this often; zero = off.
  Clock::Duration doctor_interval = std::chrono::minutes(10);
  std::string doctor_root = "/";
  WebConfig web{};  // TLS and basic auth for every endpoint
  Clock::Duration history_window = std::chrono::minutes(10);  // kept for the page
};

class Agent {
 public:
  // Enumerates the devices and sets up the metrics; starts nothing.
  static Result<std::unique_ptr<Agent>> Create(device::DeviceBackend& backend,
                                               AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Takes the first sample, then starts the sampling loop, the SDK receiver
  // (when a socket path is set: its directory is created if missing) and
  // the HTTP server. Errors: port in use (kUnavailable), a socket directory
  // that cannot be made (kPermissionDenied or the errno's code), a live
  // agent already on the socket (kFailedPrecondition).
  Status Start();
  // Stops the server, the receiver and the loop. Idempotent.
  void Stop();

  // The /metrics body (text format 0.0.4).
  std::string Exposition();
  // The /api/v1/devices body: {"node": ..., "time": ..., "source": ...,
  // "devices": [...]} as `anxin devices --json` prints it; nullopt before the
  // first sample.
  std::optional<std::string> DevicesJson() const;
  // Whether the sampler has published a snapshot within three intervals.
  bool Healthy() const;

  int port() const;
  std::string address() const;
  // "http://127.0.0.1:9466" or "https://..."; "" before Start.
  std::string url() const;
  DeviceExporter& devices() { return *devices_; }
  JobTelemetry& jobs() { return *jobs_; }
  const History& history() const { return *history_; }
  // nullptr without a socket or before Start.
  const monitor::SdkReceiver* receiver() const { return receiver_.get(); }
  monitor::Registry& registry() { return registry_; }
  // nullptr when doctor's checks are off (doctor_interval zero).
  DoctorExporter* doctor() { return doctor_.get(); }

 private:
  explicit Agent(AgentOptions options);

  AgentOptions options_;
  Clock& clock_;
  monitor::Registry registry_;
  std::unique_ptr<History> history_;
  std::unique_ptr<DeviceExporter> devices_;
  std::unique_ptr<JobTelemetry> jobs_;
  std::unique_ptr<DoctorExporter> doctor_;  // nullptr when the checks are off
  std::unique_ptr<monitor::SdkReceiver> receiver_;
  std::unique_ptr<HttpServer> server_;
  monitor::Histogram* scrape_seconds_ = nullptr;
};

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_AGENT_H_
