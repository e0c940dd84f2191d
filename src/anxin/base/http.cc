// The only file that includes httplib.h: it is a large header, and keeping it
// here keeps both compile times and the public API free of it.
#include "anxin/base/http.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "anxin/base/strings.h"

namespace anxin {
namespace {

// Writing to a TLS connection the peer closed raises SIGPIPE (OpenSSL
// writes with write(2), not send(MSG_NOSIGNAL)), which would end the whole
// program. While one lives, this thread holds SIGPIPE blocked; a SIGPIPE
// raised meanwhile is taken off the thread on the way out. The write itself
// fails with EPIPE, which the request reports.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec now{};
        (void)sigtimedwait(&pipe_, nullptr, &now);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

std::optional<std::string> Find(const HttpHeaders& list, std::string_view name, bool ignore_case) {
  for (const auto& [k, v] : list) {
    if (ignore_case ? EqualsIgnoreCase(k, name) : k == name) return v;
  }
  return std::nullopt;
}

HttpRequest FromHttplib(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  r.remote_addr = req.remote_addr;
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
  for (const auto& [k, v] : req.params) r.query.emplace_back(k, v);
  for (size_t i = 1; i < req.matches.size(); ++i) r.path_groups.push_back(req.matches[i].str());
  return r;
}

void ToHttplib(const HttpResponse& in, httplib::Response& out) {
  out.status = in.status;
  for (const auto& [k, v] : in.headers) out.set_header(k, v);
  out.set_content(in.body, in.content_type.c_str());
}

// The newest OpenSSL error as text ("no such file", "key values mismatch").
std::string OpensslReason() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

// Sets up the context for HttpTlsOptions; on failure says why in *error.
bool SetUpTls(SSL_CTX& ctx, const HttpTlsOptions& tls, std::string* error) {
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  SSL_CTX_set_min_proto_version(&ctx, tls.tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(&ctx, tls.cert_file.c_str()) != 1) {
    *error = "cannot load the TLS certificate " + tls.cert_file + ": " + OpensslReason();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::string reason = OpensslReason();
    *error =
        reason.find("key values mismatch") != std::string::npos
            ? "the TLS key " + tls.key_file + " does not belong to the certificate " + tls.cert_file
            : "cannot load the TLS key " + tls.key_file + ": " + reason;
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    *error = "the TLS key " + tls.key_file + " does not belong to the certificate " +
             tls.cert_file + ": " + OpensslReason();
    return false;
  }
  if (!tls.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, tls.client_ca_file.c_str(), nullptr) != 1) {
      *error = "cannot load the client CA " + tls.client_ca_file + ": " + OpensslReason();
      return false;
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(&ctx, names);
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return true;
}

httplib::Server::Handler Wrap(HttpHandler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    ToHttplib(handler(FromHttplib(req)), res);
  };
}

}  // namespace

std::optional<std::string> HttpRequest::Header(std::string_view name) const {
  return Find(headers, name, true);
}
std::optional<std::string> HttpRequest::Query(std::string_view name) const {
  return Find(query, name, false);
}
std::optional<std::string> HttpResponse::Header(std::string_view name) const {
  return Find(headers, name, true);
}

HttpResponse HttpResponse::Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "application/json";
  return r;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  std::unique_ptr<httplib::Server> server;
  std::string tls_error;  // why the TLS context could not be set up
  std::thread thread;
  mutable std::mutex mu;
  int port = 0;  // guarded by mu
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.tls) {
    Impl* impl = impl_.get();
    impl_->server = std::make_unique<httplib::SSLServer>(
        [impl](SSL_CTX& ctx) { return SetUpTls(ctx, *impl->options.tls, &impl->tls_error); });
  } else {
    impl_->server = std::make_unique<httplib::Server>();
  }
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Get(std::string pattern, HttpHandler handler) {
  impl_->server->Get(pattern, Wrap(std::move(handler)));
}

void HttpServer::Post(std::string pattern, HttpHandler handler) {
  impl_->server->Post(pattern, Wrap(std::move(handler)));
}

Status HttpServer::Start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->thread.joinable()) return FailedPrecondition("the HTTP server is already running");
  httplib::Server& s = *impl_->server;
  if (!s.is_valid()) {
    return InvalidArgument(impl_->tls_error.empty() ? "the HTTPS server could not be set up"
                                                    : impl_->tls_error);
  }
  if (impl_->options.guard) {
    s.set_pre_routing_handler(
        [guard = impl_->options.guard](const httplib::Request& req, httplib::Response& res) {
          std::optional<HttpResponse> answer = guard(FromHttplib(req));
          if (!answer) return httplib::Server::HandlerResponse::Unhandled;
          ToHttplib(*answer, res);
          return httplib::Server::HandlerResponse::Handled;
        });
  }
  int threads = std::max(1, impl_->options.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(impl_->options.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind the
  // same port and silently take half the connections. SO_REUSEADDR alone
  // still allows a quick restart after TIME_WAIT.
  s.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_read_timeout(impl_->options.read_timeout);
  // httplib writes a response's headers and body separately; with Nagle on,
  // the body waits for the client's delayed ACK of the headers (40 ms on
  // Linux), which caps a keep-alive connection at ~25 requests a second.
  s.set_tcp_nodelay(true);
  // Idle keep-alive connections hold a worker; a short wait keeps Stop prompt.
  s.set_keep_alive_timeout(2);
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content("internal error: " + what + "\n", "text/plain; charset=utf-8");
      });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      res.set_content("not found: " + req.path + "\n", "text/plain; charset=utf-8");
    }
  });
  const std::string& host = impl_->options.host;
  int port = impl_->options.port;
  if (port == 0) {
    port = s.bind_to_any_port(host);
  } else if (!s.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Unavailable("cannot listen on " + host + ":" + std::to_string(impl_->options.port) +
                       ": the port is in use or " + host +
                       " is not an address of this host; choose another port (0 picks a free one)");
  }
  impl_->port = port;
  impl_->thread = std::thread([this] { impl_->server->listen_after_bind(); });
  // Stop before the accept loop runs would be lost; wait until it runs.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!s.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Internal("the HTTP server on " + address() + " did not start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Ok();
}

void HttpServer::Stop() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->thread.joinable()) return;
  impl_->server->stop();
  impl_->thread.join();
}

int HttpServer::port() const {
  std::lock_guard lock(impl_->mu);
  return impl_->port;
}

std::string HttpServer::address() const {
  return impl_->options.host + ":" + std::to_string(port());
}

std::string HttpServer::scheme() const { return impl_->options.tls ? "https" : "http"; }

struct HttpClient::Impl {
  Impl(const std::string& url, std::string hp, HttpClientOptions o)
      : base_url(url),
        host_port(std::move(hp)),
        options(std::move(o)),
        client(url, options.client_cert_file, options.client_key_file) {
    if (!options.ca_file.empty()) client.set_ca_cert_path(options.ca_file);
    client.set_connection_timeout(options.connect_timeout);
    client.set_read_timeout(options.timeout);
    client.set_write_timeout(options.timeout);
    httplib::Headers headers;
    for (const auto& [k, v] : options.headers) headers.emplace(k, v);
    client.set_default_headers(std::move(headers));
    if (!options.tls_server_name.empty()) {
      // The URL names the server; the address it resolves to is the host's.
      const size_t colon = host_port.rfind(':');
      client.set_hostname_addr_map({{options.tls_server_name, host_port.substr(0, colon)}});
    }
  }

  // Runs one request and turns transport failures into Errors.
  // salvage: on a read error, the response already received, if any.
  template <typename F>
  Result<HttpResponse> Do(std::string_view method, std::string_view path, F&& request,
                          const std::function<std::optional<HttpResponse>()>& salvage) {
    SigpipeGuard no_sigpipe;
    std::lock_guard lock(mu);
    stopped = false;
    auto start = std::chrono::steady_clock::now();
    httplib::Result res = request(client);
    auto elapsed = std::chrono::steady_clock::now() - start;
    std::string what = std::string(method) + " " + base_url + std::string(path);
    if (!res) {
      httplib::Error e = res.error();
      auto secs = [](std::chrono::milliseconds d) {
        return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
      };
      switch (e) {
        case httplib::Error::Connection:
        case httplib::Error::ConnectionTimeout:
          if (e == httplib::Error::ConnectionTimeout || elapsed >= options.connect_timeout) {
            return DeadlineExceeded(what + ": no connection to " + host_port + " within " +
                                    secs(options.connect_timeout));
          }
          return Unavailable(what + ": cannot connect to " + host_port +
                             " (connection refused or unreachable): is the server running?");
        case httplib::Error::Read:
          if (stopped.exchange(false)) return Cancelled(what + ": stopped");
          if (salvage) {
            if (std::optional<HttpResponse> got = salvage()) return *std::move(got);
          }
          if (elapsed >= options.timeout) {
            return DeadlineExceeded(what + ": no response from " + host_port + " within " +
                                    secs(options.timeout));
          }
          return Unavailable(what + ": " + host_port +
                             " closed the connection before a full response" + NoCertHint());
        case httplib::Error::SSLConnection:
          return Unavailable(what + ": the TLS handshake with " + host_port +
                             " failed (a plain-HTTP server, an old TLS version, or a server "
                             "that requires a client certificate)");
        case httplib::Error::SSLServerVerification: {
          const long v = client.get_openssl_verify_result();
          const std::string reason =
              v != X509_V_OK ? std::string(X509_verify_cert_error_string(v)) + ": " : "";
          return Unavailable(what + ": the certificate of " + host_port + " is not trusted (" +
                             reason + "a CA other than the one given, or a certificate that " +
                             "does not name that host); give its CA");
        }
        case httplib::Error::Canceled:
          return Cancelled(what + ": stopped");
        case httplib::Error::Write:
          if (stopped.exchange(false)) return Cancelled(what + ": stopped");
          return Unavailable(what + ": " + host_port +
                             " closed the connection while the request was sent" + NoCertHint());
        case httplib::Error::SSLLoadingCerts:
          return InvalidArgument(what + ": cannot load the CA or client certificate files");
        default:
          return Unavailable(what + ": " + httplib::to_string(e));
      }
    }
    HttpResponse out = FromHttplib(*res);
    out.body = res->body;
    return out;
  }
  template <typename F>
  Result<HttpResponse> Do(std::string_view method, std::string_view path, F&& request) {
    return Do(method, path, std::forward<F>(request), {});
  }

  // After a connection closed mid-request: with TLS 1.3, a server that
  // wants a client certificate closes it so, after the handshake.
  std::string NoCertHint() const {
    if (!base_url.starts_with("https://") || !options.client_cert_file.empty()) return "";
    return " (a TLS server that requires a client certificate does so when none is given)";
  }

  static HttpResponse FromHttplib(const httplib::Response& r) {
    HttpResponse out;
    out.status = r.status;
    out.content_type = r.get_header_value("Content-Type");
    for (const auto& [k, v] : r.headers) out.headers.emplace_back(k, v);
    return out;
  }

  // Sends req, its body going to on_body (nullptr: into the response). A
  // response that announces trailers (etcd's gateway does, for every error
  // and stream) ends in a form this HTTP library cannot read past: the read
  // error after its body is taken as its end; a body cut short by a broken
  // connection is then the caller's to notice (etcd's JSON does not parse).
  Result<HttpResponse> Send(std::string_view method, httplib::Request& req,
                            const std::function<bool(std::string_view)>* on_body) {
    std::optional<httplib::Response> head;
    std::string body;
    req.response_handler = [&](const httplib::Response& r) {
      head = r;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (on_body != nullptr) return (*on_body)(std::string_view(data, n));
      body.append(data, n);
      return true;
    };
    auto salvage = [&]() -> std::optional<HttpResponse> {
      if (!head || !head->has_header("Trailer")) return std::nullopt;
      HttpResponse out = FromHttplib(*head);
      out.body = body;
      return out;
    };
    auto r = Do(
        method, req.path, [&](httplib::Client& c) { return c.send(req); }, salvage);
    if (r && r->body.empty()) r->body = std::move(body);
    return r;
  }

  std::string base_url;
  std::string host_port;
  HttpClientOptions options;
  std::mutex mu;
  std::atomic<bool> stopped{false};  // Stop() was called during a request
  httplib::Client client;
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpClient::HttpClient(std::string host, int port, HttpClientOptions options) {
  std::string hp = host + ":" + std::to_string(port);
  impl_ = std::make_unique<Impl>("http://" + hp, hp, std::move(options));
}

Result<HttpClient> HttpClient::ForUrl(std::string_view base_url, HttpClientOptions options) {
  std::string_view rest = base_url;
  int default_port = 0;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    default_port = 80;
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    default_port = 443;
  } else {
    return InvalidArgument("URL '" + std::string(base_url) +
                           "' must start with http:// or https://");
  }
  if (rest.ends_with("/")) rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos) {
    return InvalidArgument("URL '" + std::string(base_url) +
                           "' must be scheme://host[:port] without a path");
  }
  std::string hp(rest);
  if (hp.find(':') == std::string::npos || hp.back() == ']') {
    hp += ":" + std::to_string(default_port);
  }
  std::string url(base_url);
  if (url.ends_with("/")) url.pop_back();
  if (!options.tls_server_name.empty() && url.starts_with("https://")) {
    const size_t colon = hp.rfind(':');
    url = "https://" + options.tls_server_name + ":" + hp.substr(colon + 1);
  }
  return HttpClient(std::make_unique<Impl>(url, hp, std::move(options)));
}

HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;
HttpClient::~HttpClient() {
  SigpipeGuard no_sigpipe;  // the TLS shutdown writes
  impl_.reset();
}

const std::string& HttpClient::base_url() const { return impl_->base_url; }

Result<HttpResponse> HttpClient::Get(std::string_view path, const HttpHeaders& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  std::string p(path);
  return impl_->Do("GET", path, [&](httplib::Client& c) { return c.Get(p, h); });
}

Result<HttpResponse> HttpClient::Post(std::string_view path, std::string_view body,
                                      std::string_view content_type, const HttpHeaders& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  httplib::Request req;
  req.method = "POST";
  req.path = std::string(path);
  req.headers = std::move(h);
  req.headers.emplace("Content-Type", std::string(content_type));
  req.body = std::string(body);
  return impl_->Send("POST", req, nullptr);
}

Result<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "socket"));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  if (port == 0) return Unavailable("no free TCP port on 127.0.0.1");
  return port;
}

Result<HttpResponse> HttpClient::PostStream(std::string_view path, std::string_view body,
                                            const std::function<bool(std::string_view)>& on_body,
                                            const HttpHeaders& headers) {
  httplib::Request req;
  req.method = "POST";
  req.path = std::string(path);
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  req.headers.emplace("Content-Type", "application/json");
  req.body = std::string(body);
  return impl_->Send("POST", req, &on_body);
}

Result<int64_t> CertificateNotAfter(const std::string& pem_file) {
  FILE* f = std::fopen(pem_file.c_str(), "re");
  if (f == nullptr) return std::unexpected(ErrnoError(errno, "opening " + pem_file));
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (cert == nullptr) {
    ERR_clear_error();
    return InvalidArgument(pem_file + ": no PEM certificate in it");
  }
  struct tm t {};
  const int ok = ASN1_TIME_to_tm(X509_get0_notAfter(cert), &t);
  X509_free(cert);
  if (ok != 1) return InvalidArgument(pem_file + ": the certificate's notAfter cannot be read");
  return static_cast<int64_t>(timegm(&t));
}

void HttpClient::Stop() {
  SigpipeGuard no_sigpipe;  // the TLS shutdown writes
  impl_->stopped = true;
  impl_->client.stop();
}

}  // namespace anxin
