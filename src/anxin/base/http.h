// A small HTTP server and client for anxin's endpoints (/metrics, the agent's
// page, webhooks), over cpp-httplib, which never appears in anxin headers.
//
//   HttpServer server;                           // 127.0.0.1, a free port
//   server.Get("/metrics", [&](const HttpRequest&) {
//     return HttpResponse::Text(200, "anxin_up 1\n");
//   });
//   server.Post(R"(/api/devices/(\d+)/reset)", [&](const HttpRequest& req) {
//     int index = std::stoi(req.path_groups[0]);
//     return HttpResponse::Json(202, "{\"device\": " + std::to_string(index) + "}");
//   });
//   ANXIN_TRY(server.Start());
//   spdlog::info("listening on {}", server.address());   // "127.0.0.1:41234"
//
//   HttpClient client("127.0.0.1", server.port(), {.timeout = 2s});
//   ANXIN_ASSIGN_OR_RETURN(HttpResponse r, client.Get("/metrics"));
//   if (!r.ok()) return Unavailable("HTTP " + std::to_string(r.status));  // not an Error
//   server.Stop();                               // finishes requests in flight
//
// Route patterns are regular expressions matched against the whole path;
// capture groups land in HttpRequest::path_groups.
//
// Thread safety: routes are added before Start. Handlers run on the server's
// worker threads, possibly several at once. Start, Stop and port() may be
// called from any thread. An HttpClient may be shared; its requests are made
// one at a time.
#ifndef ANXIN_BASE_HTTP_H_
#define ANXIN_BASE_HTTP_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "anxin/base/error.h"

namespace anxin {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method{};  // "GET", "POST"
  std::string path{};    // without the query string
  std::string body{};
  HttpHeaders headers{};
  HttpHeaders query{};                     // decoded ?name=value pairs, in order
  std::vector<std::string> path_groups{};  // the route pattern's capture groups
  std::string remote_addr{};

  // Case-insensitive; the first match.
  std::optional<std::string> Header(std::string_view name) const;
  std::optional<std::string> Query(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body{};
  std::string content_type = "text/plain; charset=utf-8";
  HttpHeaders headers{};

  bool ok() const { return status >= 200 && status < 300; }
  std::optional<std::string> Header(std::string_view name) const;

  static HttpResponse Text(int status, std::string body);
  static HttpResponse Json(int status, std::string body);
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Runs before routing; a response it returns is sent instead of the route's
// (a 401 for a request without valid credentials, say).
using HttpGuard = std::function<std::optional<HttpResponse>(const HttpRequest&)>;

// HTTPS for a server: PEM files, read at Start.
struct HttpTlsOptions {
  std::string cert_file{};       // certificate chain, leaf first
  std::string key_file{};        // its private key (unencrypted)
  std::string client_ca_file{};  // non-empty: clients must present a certificate it signed
  bool tls13_only = false;       // else TLS 1.2 and 1.3
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";   // "0.0.0.0" to serve other machines
  int port = 0;                     // 0: the kernel picks a free port; see port()
  int threads = 4;                  // worker threads
  size_t max_body_bytes = 8 << 20;  // larger request bodies get 413
  std::chrono::seconds read_timeout{10};
  std::optional<HttpTlsOptions> tls{};  // nullopt: plain HTTP
  HttpGuard guard{};                    // empty: every request is routed
};

// A TCP port on 127.0.0.1 that nothing listens on now, for a child process
// to bind (another process may take it first; the child's bind then fails).
// No port to be had -> kUnavailable.
Result<int> FreeLoopbackPort();

// When the first certificate in a PEM file stops being valid (its
// notAfter), as seconds since the epoch. A file that cannot be read or holds
// no certificate -> kInvalidArgument naming it.
Result<int64_t> CertificateNotAfter(const std::string& pem_file);

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options = {});
  // Stops the server if it runs.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // REQUIRES: before Start.
  void Get(std::string pattern, HttpHandler handler);
  void Post(std::string pattern, HttpHandler handler);

  // Binds and serves on a thread of its own; returns once connections are
  // accepted. A port in use or an address not of this host -> kUnavailable;
  // a TLS certificate or key that cannot be loaded -> kInvalidArgument naming
  // the file and OpenSSL's reason.
  Status Start();
  // Stops accepting, lets requests in flight finish, joins the threads.
  // Idempotent.
  void Stop();

  // The bound port (the chosen one when the options said 0); 0 before Start.
  int port() const;
  // "127.0.0.1:41234"
  std::string address() const;
  // "https" when the options have TLS, else "http".
  std::string scheme() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds timeout{10000};  // for reading the response
  HttpHeaders headers{};                     // sent with every request
  // https:// only: trust this PEM bundle instead of the system's, and present
  // this client certificate when the server asks for one.
  std::string ca_file{};
  std::string client_cert_file{};
  std::string client_key_file{};
  // https:// only: the name the server's certificate must carry (and the
  // SNI sent) when it differs from the host connected to, e.g. an IP address
  // whose certificate names etcd.example.com.
  std::string tls_server_name{};
};

class HttpClient {
 public:
  HttpClient(std::string host, int port, HttpClientOptions options = {});
  // "http://host[:port]" or "https://host[:port]" (no path).
  static Result<HttpClient> ForUrl(std::string_view base_url, HttpClientOptions options = {});
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;
  ~HttpClient();

  // Errors: connection refused or unreachable -> kUnavailable naming
  // host:port; no response in time -> kDeadlineExceeded. Any HTTP status is a
  // response, not an error.
  Result<HttpResponse> Get(std::string_view path, const HttpHeaders& headers = {});
  Result<HttpResponse> Post(std::string_view path, std::string_view body,
                            std::string_view content_type = "application/json",
                            const HttpHeaders& headers = {});
  // POST for a streamed response (an endless chunked body, etcd's watch):
  // each piece of the body goes to on_body as it arrives, and the returned
  // response's body is empty. on_body returning false ends the request
  // (kCancelled). timeout is then the longest silence between two pieces.
  Result<HttpResponse> PostStream(std::string_view path, std::string_view body,
                                  const std::function<bool(std::string_view)>& on_body,
                                  const HttpHeaders& headers = {});
  // From any thread: a request blocked on the network fails at once
  // (kCancelled, or kUnavailable while connecting); later requests connect
  // anew.
  void Stop();

  // "http://127.0.0.1:41234"
  const std::string& base_url() const;

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin

#endif  // ANXIN_BASE_HTTP_H_
