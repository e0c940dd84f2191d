#include "anxin/notify/service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>

#include "anxin/base/http.h"
#include "anxin/notify/alert.h"
#include "anxin/notify/delivery.h"
#include "anxin/notify/render.h"
#include "anxin/notify/spool.h"

namespace anxin::notify {

struct Service::Impl {
  NotifyConfig config;
  ServiceOptions options;
  RenderOptions render;
  monitor::Registry registry;
  std::unique_ptr<Spool> spool;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<HttpServer> server;
  std::mutex stop_mu;
  bool stopped = false;

  monitor::Counter* received = nullptr;
  monitor::Counter* deduplicated = nullptr;
  monitor::Counter* stored = nullptr;
  monitor::Family<monitor::Counter>* rejected = nullptr;
  monitor::Gauge* depth = nullptr;
  monitor::Gauge* depth_bytes = nullptr;
  monitor::Counter* dropped = nullptr;
  monitor::Counter* commits = nullptr;
  uint64_t dropped_seen = 0, commits_seen = 0;  // under the registry's writer lock

  Status RegisterMetrics() {
    ANXIN_ASSIGN_OR_RETURN(auto* r,
                           registry.AddCounter("anxin_notify_received_alerts_total",
                                               "Alerts in webhooks that were accepted.", {}));
    received = &r->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(
        auto* d,
        registry.AddCounter("anxin_notify_deduplicated_alerts_total",
                            "Alerts already delivered in the same state (not sent again).", {}));
    deduplicated = &d->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(auto* s, registry.AddCounter("anxin_notify_stored_messages_total",
                                                        "Messages written to the spool.", {}));
    stored = &s->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(rejected,
                           registry.AddCounter("anxin_notify_rejected_requests_total",
                                               "Webhook requests answered with an error, by reason "
                                               "(malformed, too_large, spool).",
                                               {"reason"}));
    for (const char* reason : {"malformed", "too_large", "spool"}) rejected->WithLabels({reason});
    ANXIN_ASSIGN_OR_RETURN(auto* g, registry.AddGauge("anxin_notify_spool_messages",
                                                      "Messages waiting in the spool.", {}));
    depth = &g->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(auto* gb, registry.AddGauge("anxin_notify_spool_bytes",
                                                       "Bytes of the messages in the spool.", {}));
    depth_bytes = &gb->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(
        auto* dr,
        registry.AddCounter("anxin_notify_spool_dropped_messages_total",
                            "Oldest messages dropped to keep the spool under its cap.", {}));
    dropped = &dr->WithLabels(std::span<const std::string>{});
    ANXIN_ASSIGN_OR_RETURN(auto* c,
                           registry.AddCounter("anxin_notify_spool_commits_total",
                                               "Spool transactions committed (fsyncs).", {}));
    commits = &c->WithLabels(std::span<const std::string>{});
    registry.AddCollectHook([this] {
      depth->Set(static_cast<double>(spool->messages()));
      depth_bytes->Set(static_cast<double>(spool->bytes()));
      const uint64_t dn = spool->dropped(), cn = spool->commits();
      dropped->Inc(static_cast<double>(dn - dropped_seen));
      commits->Inc(static_cast<double>(cn - commits_seen));
      dropped_seen = dn;
      commits_seen = cn;
    });
    return Ok();
  }

  HttpResponse Reject(int status, const char* reason, const std::string& message) {
    rejected->WithLabels({reason}).Inc();
    spdlog::warn("notify: webhook answered {}: {}", status, config.Redact(message));
    nlohmann::json j = {{"status", "error"}, {"error", config.Redact(message)}};
    return HttpResponse::Json(status,
                              j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  HttpResponse Webhook(const HttpRequest& req) {
    if (req.body.size() > config.limits.max_bytes) {
      return Reject(413, "too_large",
                    fmt::format("payload of {} bytes is over the limit of {}", req.body.size(),
                                config.limits.max_bytes));
    }
    auto parsed = ParseWebhook(req.body, config.limits);
    if (!parsed) return Reject(400, "malformed", parsed.error().message());
    const Notification& n = *parsed;
    // Each receiver's share of the group, in payload order.
    std::vector<std::vector<const Alert*>> by_receiver(config.receivers.size());
    for (const Alert& a : n.alerts) {
      for (size_t i : config.Route(a.labels)) by_receiver[i].push_back(&a);
    }
    size_t messages = 0, duplicates = 0;
    std::vector<std::string> woken;
    Status st = spool->Write([&](SpoolTx& tx) -> Status {
      messages = duplicates = 0;
      woken.clear();
      for (size_t i = 0; i < by_receiver.size(); ++i) {
        const ReceiverConfig& r = config.receivers[i];
        std::vector<Alert> fresh;
        for (const Alert* a : by_receiver[i]) {
          ANXIN_ASSIGN_OR_RETURN(AlertState last, tx.LastState(r.name, a->fingerprint));
          if (last.status == a->status && last.starts_at == a->starts_at) {
            ++duplicates;
            continue;
          }
          ANXIN_TRY(tx.SetState(r.name, a->fingerprint, {a->status, a->starts_at}));
          fresh.push_back(*a);
        }
        if (fresh.empty()) continue;
        Rendered out = r.type == ReceiverType::kFeishu || r.type == ReceiverType::kLark
                           ? RenderBot(fresh, r.templates, r.card, render)
                           : RenderJson(fresh, r.name, n.group_key, render);
        ANXIN_TRY(tx.Enqueue({.receiver = r.name,
                              .group_key = n.group_key,
                              .body = std::move(out.body),
                              .fallback = std::move(out.fallback)}));
        ++messages;
        woken.push_back(r.name);
      }
      return Ok();
    });
    if (!st) {
      return Reject(503, "spool",
                    st.error().message() + " (not stored: Alertmanager will send it again)");
    }
    received->Inc(static_cast<double>(n.alerts.size()));
    deduplicated->Inc(static_cast<double>(duplicates));
    stored->Inc(static_cast<double>(messages));
    for (const auto& name : woken) dispatcher->Wake(name);
    return HttpResponse::Json(
        200, fmt::format(R"({{"status":"stored","messages":{},"deduplicated":{}}})", messages,
                         duplicates));
  }
};

Service::Service(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Service::~Service() { Stop(); }

Result<std::unique_ptr<Service>> Service::Start(NotifyConfig config, ServiceOptions options) {
  if (options.spool_dir.empty()) return InvalidArgument("the spool directory is not set (--spool)");
  auto impl = std::make_unique<Impl>();
  Impl& i = *impl;
  i.config = std::move(config);
  i.options = options;
  ANXIN_ASSIGN_OR_RETURN(i.render.time_zone, TimeZone::Load(i.config.time_zone));
  i.render.dashboard_url = i.config.dashboard_url;
  i.render.prometheus_url = i.config.prometheus_url;
  ANXIN_ASSIGN_OR_RETURN(i.spool,
                         Spool::Open(options.spool_dir, {.max_bytes = i.config.spool_max_bytes}));
  ANXIN_TRY(i.RegisterMetrics());
  ANXIN_ASSIGN_OR_RETURN(DeliveryMetrics dm, DeliveryMetrics::Register(i.registry));
  for (const auto& r : i.config.receivers) {
    dm.sent->WithLabels({r.name});
    dm.failed->WithLabels({r.name});
  }
  i.dispatcher = std::make_unique<Dispatcher>(i.config, *i.spool, dm);
  ANXIN_TRY(i.dispatcher->Start());
  i.server = std::make_unique<HttpServer>(HttpServerOptions{
      .host = options.host,
      .port = options.port,
      .threads = options.threads,
      // Bodies up to 4x the limit are read and answered 413 here (counted);
      // larger ones are refused by the HTTP layer before they are read.
      .max_body_bytes = i.config.limits.max_bytes * 4,
  });
  Impl* raw = impl.get();
  i.server->Post("/webhook", [raw](const HttpRequest& req) { return raw->Webhook(req); });
  i.server->Get("/metrics", [raw](const HttpRequest&) {
    HttpResponse r = HttpResponse::Text(200, raw->registry.TextExposition());
    r.content_type = std::string(monitor::kPrometheusTextContentType);
    return r;
  });
  i.server->Get("/healthz", [raw](const HttpRequest&) {
    return HttpResponse::Json(
        200, fmt::format(R"({{"status":"ok","spool_messages":{}}})", raw->spool->messages()));
  });
  ANXIN_TRY(i.server->Start());
  spdlog::info("notify: listening on {} (POST /webhook), spool {} with {} messages waiting",
               i.server->address(), options.spool_dir, i.spool->messages());
  return std::unique_ptr<Service>(new Service(std::move(impl)));
}

int Service::port() const { return impl_->server->port(); }
monitor::Registry& Service::registry() { return impl_->registry; }

void Service::Stop() {
  std::lock_guard lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Stop();      // answers what is in flight
  impl_->dispatcher->Stop();  // finishes sends in flight
  spdlog::info("notify: stopped with {} messages in the spool", impl_->spool->messages());
  impl_->spool.reset();
}

}  // namespace anxin::notify
