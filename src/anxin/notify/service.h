// The `anxin notify` service: an HTTP endpoint for Alertmanager's webhook
// that routes, deduplicates, renders and spools each alert group, answers 200
// only once it is on disk, and delivers it in the background.
//
//   ANXIN_ASSIGN_OR_RETURN(auto root, ConfigNode::Parse(R"(
//   receivers: [{name: audit, type: file, path: /tmp/alerts.jsonl}]
//   default_receivers: [audit]
//   )", "notify"));
//   ANXIN_ASSIGN_OR_RETURN(notify::NotifyConfig config,
//                          notify::ParseNotifyConfig(root, SystemEnvironment()));
//   ANXIN_ASSIGN_OR_RETURN(auto service, notify::Service::Start(
//       std::move(config), {.host = "127.0.0.1", .port = 0, .spool_dir = "/tmp/spool"}));
//   // Alertmanager: webhook_configs: [{url: "http://127.0.0.1:<port>/webhook"}]
//   service->Stop();   // requests in flight are answered, sends in flight finish
//
// Endpoints: POST /webhook (Alertmanager payload version 4): 200 when stored
// (or when every alert in it was already delivered in that state), 400 for a
// malformed payload, 413 for one over max_payload_bytes, 503 when the spool
// cannot store it (a full disk) so that Alertmanager tries again. GET /metrics
// (Prometheus text) and GET /healthz.
//
// Thread safety: Start and Stop from one thread; the service's own threads
// do the rest.
#ifndef ANXIN_NOTIFY_SERVICE_H_
#define ANXIN_NOTIFY_SERVICE_H_

#include <memory>
#include <string>

#include "anxin/base/error.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/notify/config.h"

namespace anxin::notify {

// The port `anxin notify` listens on unless told otherwise; clear of
// Prometheus (9090), Alertmanager (9093, 9094) and node_exporter (9100).
inline constexpr int kDefaultPort = 9795;

struct ServiceOptions {
  std::string host = "127.0.0.1";
  int port = kDefaultPort;  // 0: any free port (see Service::port)
  std::string spool_dir{};
  int threads = 16;  // HTTP workers: concurrent webhooks share one fsync
};

class Service {
 public:
  static Result<std::unique_ptr<Service>> Start(NotifyConfig config, ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  int port() const;
  monitor::Registry& registry();
  // Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Service(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_{};
};

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_SERVICE_H_
