#include "anxin/agent/agent.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "anxin/agent/page.h"
#include "anxin/device/table.h"

namespace anxin::agent {

namespace {

// A scrape of a node: well under a millisecond to a few.
const std::vector<double> kScrapeBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                            0.01,   0.025,   0.05,   0.1,   0.25,   1};

// Resident set size from /proc/self/statm; nullopt where there is none.
std::optional<double> ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return std::nullopt;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return std::nullopt;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace

std::string DefaultNodeName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

Status ParseListen(std::string_view text, std::string_view origin, AgentConfig& config) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        std::string(origin) + ": " + std::string(why) +
        ": expected HOST:PORT like 127.0.0.1:9466, 0.0.0.0:9466 or :9466, got '" +
        std::string(text) + "'");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535)
    return bad("the port is not a number from 0 to 65535");
  config.host = host.empty() ? "0.0.0.0" : std::string(host);
  config.port = p;
  return Ok();
}

Result<AgentConfig> ParseAgentConfig(const std::optional<ConfigNode>& section) {
  AgentConfig c;
  if (!section) return c;
  const ConfigNode& s = *section;
  ANXIN_TRY(s.CheckKeys({"listen", "interval", "socket", "compat", "node", "job_expiry",
                         "doctor_interval", "doctor_root", "web_config"}));
  if (auto listen = s.Find("listen")) {
    ANXIN_ASSIGN_OR_RETURN(std::string text, listen->As<std::string>());
    auto st = ParseListen(text, "listen", c);
    if (!st) return std::unexpected(listen->MakeError(st.error().message()));
  }
  ANXIN_ASSIGN_OR_RETURN(c.interval_seconds, s.GetSeconds("interval", c.interval_seconds));
  if (c.interval_seconds <= 0) {
    return std::unexpected(
        s.Find("interval")->MakeError("the interval must be above 0, like 1s or 500ms"));
  }
  ANXIN_ASSIGN_OR_RETURN(c.socket, s.Get<std::string>("socket", ""));
  if (auto compat = s.Find("compat")) {
    ANXIN_ASSIGN_OR_RETURN(std::string text, compat->As<std::string>());
    auto parsed = ParseCompat(text);
    if (!parsed) return std::unexpected(compat->MakeError(parsed.error().message()));
    c.compat = *parsed;
  }
  ANXIN_ASSIGN_OR_RETURN(c.node, s.Get<std::string>("node", ""));
  ANXIN_ASSIGN_OR_RETURN(c.job_expiry_seconds, s.GetSeconds("job_expiry", c.job_expiry_seconds));
  if (c.job_expiry_seconds <= 0) {
    return std::unexpected(s.Find("job_expiry")->MakeError("job_expiry must be above 0, like 10m"));
  }
  ANXIN_ASSIGN_OR_RETURN(c.doctor_interval_seconds,
                         s.GetSeconds("doctor_interval", c.doctor_interval_seconds));
  if (c.doctor_interval_seconds != 0 && c.doctor_interval_seconds < 1) {
    return std::unexpected(s.Find("doctor_interval")
                               ->MakeError("doctor_interval must be 0 (off) or at least 1s, "
                                           "like 10m"));
  }
  ANXIN_ASSIGN_OR_RETURN(c.doctor_root, s.Get<std::string>("doctor_root", c.doctor_root));
  ANXIN_ASSIGN_OR_RETURN(c.web_config, s.Get<std::string>("web_config", ""));
  if (!c.web_config.empty() && std::filesystem::path(c.web_config).is_relative()) {
    // Relative to the configuration file, as other paths in it are.
    c.web_config = (std::filesystem::path(s.source()).parent_path() / c.web_config).string();
  }
  return c;
}

Agent::Agent(AgentOptions options)
    : options_(std::move(options)), clock_(options_.clock ? *options_.clock : RealClock()) {}

Agent::~Agent() { Stop(); }

Result<std::unique_ptr<Agent>> Agent::Create(device::DeviceBackend& backend, AgentOptions options) {
  std::unique_ptr<Agent> a(new Agent(std::move(options)));
  const AgentOptions& o = a->options_;
  ANXIN_ASSIGN_OR_RETURN(
      auto* build, a->registry_.AddGauge("anxin_agent_build_info", "The agent's version; always 1.",
                                         {"node", "version"}));
  build->WithLabels({o.node, o.version}).Set(1);
  ANXIN_ASSIGN_OR_RETURN(
      auto* scrape, a->registry_.AddHistogram("anxin_agent_scrape_duration_seconds",
                                              "Time to write one /metrics exposition.", {"node"},
                                              kScrapeBuckets));
  a->scrape_seconds_ = &scrape->WithLabels({o.node});
  ANXIN_ASSIGN_OR_RETURN(auto* rss,
                         a->registry_.AddGauge("anxin_agent_resident_memory_bytes",
                                               "The agent's resident memory.", {"node"}));
  monitor::Gauge* rss_gauge = &rss->WithLabels({o.node});
  a->registry_.AddCollectHook([rss_gauge] {
    if (auto bytes = ResidentBytes()) rss_gauge->Set(*bytes);
  });
  ANXIN_ASSIGN_OR_RETURN(a->history_, History::Create(a->registry_, {.node = o.node,
                                                                     .interval = o.interval,
                                                                     .window = o.history_window}));
  // The page's history hears every pass (with the jobs as they are then) and
  // every fault event; jobs_ is set before the sampling loop starts.
  Agent* self = a.get();
  ANXIN_ASSIGN_OR_RETURN(
      a->devices_,
      DeviceExporter::Create(
          backend, a->registry_,
          {.node = o.node,
           .clock = &a->clock_,
           .interval = o.interval,
           .compat = o.compat,
           .on_snapshot =
               [self](const device::Snapshot& s) {
                 self->history_->RecordSnapshot(s);
                 if (self->jobs_) self->history_->RecordJobs(s.time, self->jobs_->TakeRanks());
               },
           .on_fault = [self](const device::FaultEvent& e) { self->history_->RecordFault(e); }}));
  ANXIN_ASSIGN_OR_RETURN(a->jobs_, JobTelemetry::Create(a->registry_, a->clock_,
                                                        {.node = o.node, .expiry = o.job_expiry}));
  if (o.doctor_interval > Clock::Duration::zero()) {
    ANXIN_ASSIGN_OR_RETURN(
        a->doctor_,
        DoctorExporter::Create(a->registry_,
                               {.node = o.node,
                                .root = o.doctor_root,
                                .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    o.doctor_interval)}));
  }
  return a;
}

Status Agent::Start() {
  devices_->Start();
  if (doctor_) doctor_->Start();
  if (!options_.socket_path.empty() && !receiver_) {
    const std::filesystem::path dir = std::filesystem::path(options_.socket_path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) {
      Stop();
      // Whatever the reason, the fix is in the environment (exit status 3).
      const bool denied = ec.value() == EACCES || ec.value() == EPERM || ec.value() == EROFS;
      return std::unexpected(Error(
          denied ? ErrorCode::kPermissionDenied : ErrorCode::kFailedPrecondition,
          "cannot create the directory " + dir.string() + " for the SDK socket (" + ec.message() +
              "): choose a writable path with --socket or ANXIN_AGENT_SOCKET, or run as a user "
              "who may create it"));
    }
    monitor::SdkReceiverOptions ro;
    ro.socket_path = options_.socket_path;
    ro.registry = &registry_;
    ro.node = options_.node;
    JobTelemetry* jobs = jobs_.get();
    History* history = history_.get();
    Clock* clock = &clock_;
    auto r = monitor::SdkReceiver::Start(
        ro, [jobs, history, clock](const monitor::SdkDatagram& d, std::span<const uint8_t>) {
          jobs->Consume(d);
          // A supervisor's finished recovery also goes on the page's timeline.
          for (const monitor::SdkEvent& e : d.events) {
            if (const auto* rec = std::get_if<monitor::SdkRecovery>(&e.body)) {
              history->RecordRecovery(clock->Now(), d.sender.job, *rec);
            }
          }
        });
    if (!r) {
      Stop();
      return std::unexpected(std::move(r).error().With("SDK socket " + options_.socket_path));
    }
    receiver_ = std::move(*r);
  }
  if (!server_) {
    server_ = std::make_unique<HttpServer>(
        HttpServerOptions{.host = options_.host,
                          .port = options_.port,
                          .threads = 4,
                          .tls = options_.web.tls,
                          .guard = MakeBasicAuthGuard(options_.web.users)});
    server_->Get("/metrics", [this](const HttpRequest&) {
      HttpResponse r = HttpResponse::Text(200, Exposition());
      r.content_type = std::string(monitor::kPrometheusTextContentType);
      return r;
    });
    server_->Get("/healthz", [this](const HttpRequest&) {
      return Healthy() ? HttpResponse::Text(200, "ok\n")
                       : HttpResponse::Text(503,
                                            "the device sampler has not run for three "
                                            "intervals\n");
    });
    server_->Get("/api/v1/devices", [this](const HttpRequest&) {
      auto json = DevicesJson();
      if (!json) return HttpResponse::Json(503, R"({"error": "no sample yet"})");
      return HttpResponse::Json(200, *json);
    });
    AddPageRoutes(*server_, *history_);
    if (auto st = server_->Start(); !st) {
      Stop();
      server_.reset();
      return std::unexpected(std::move(st).error());  // names host:port and why
    }
  }
  return Ok();
}

void Agent::Stop() {
  if (server_) server_->Stop();
  if (receiver_) receiver_->Stop();
  if (doctor_) doctor_->Stop();
  if (devices_) devices_->Stop();
}

std::string Agent::Exposition() {
  const auto start = std::chrono::steady_clock::now();
  std::string out;
  out.reserve(64 << 10);
  registry_.WriteText(out);
  devices_->WriteText(out);
  scrape_seconds_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return out;
}

std::optional<std::string> Agent::DevicesJson() const {
  auto snap = devices_->snapshot();
  if (!snap) return std::nullopt;
  nlohmann::json j = device::SnapshotToJson(*snap);
  j["node"] = options_.node;
  return j.dump(2) + "\n";
}

bool Agent::Healthy() const {
  auto snap = devices_->snapshot();
  if (!snap) return false;
  return clock_.Now() - snap->time <= 3 * options_.interval + std::chrono::seconds(1);
}

int Agent::port() const { return server_ ? server_->port() : 0; }

std::string Agent::address() const { return server_ ? server_->address() : ""; }

std::string Agent::url() const {
  return server_ ? server_->scheme() + "://" + server_->address() : "";
}

}  // namespace anxin::agent
