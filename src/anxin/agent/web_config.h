// TLS and basic authentication for the agent's HTTP endpoints, configured by
// a web configuration file in the format of the Prometheus exporter toolkit
// (`--web.config.file`), so one file serves node-exporter and anxin alike:
//
//   [yaml]
//   tls_server_config:
//     cert_file: /etc/anxin/agent.crt      # relative paths: from this file's directory
//     key_file: /etc/anxin/agent.key
//     client_auth_type: RequireAndVerifyClientCert   # optional
//     client_ca_file: /etc/anxin/clients-ca.crt
//     min_version: TLS12                   # TLS12 (default) or TLS13
//   basic_auth_users:
//     prometheus: $2y$10$...               # bcrypt, e.g. `anxin agent --hash-password`
//
// In code:
//
//   ANXIN_ASSIGN_OR_RETURN(WebConfig web, LoadWebConfig("/etc/anxin/web.yml"));
//   HttpServerOptions server;
//   server.tls = web.tls;
//   server.guard = MakeBasicAuthGuard(web.users);   // empty users: no guard
//
// Passwords are checked with libcrypt's bcrypt ($2a$, $2b$, $2y$); a
// successful check is remembered (as a SHA-256 of user, hash and password) so
// a scraper pays the bcrypt cost once, not at every scrape.
#ifndef ANXIN_AGENT_WEB_CONFIG_H_
#define ANXIN_AGENT_WEB_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "anxin/base/error.h"
#include "anxin/base/http.h"

namespace anxin::agent {

struct WebConfig {
  std::optional<HttpTlsOptions> tls{};         // nullopt: plain HTTP
  std::map<std::string, std::string> users{};  // user -> bcrypt hash; empty: no auth
};

// Errors name file:line:col: unknown keys (the toolkit is strict too), a
// client_auth_type other than NoClientCert / RequireAndVerifyClientCert, a
// hash that is not bcrypt, a cert_file without key_file, files that do not
// exist.
Result<WebConfig> LoadWebConfig(const std::string& path);

// A guard that answers 401 (with WWW-Authenticate) unless the request's
// Authorization header carries a user and password that match `users`.
// Returns an empty guard for no users.
HttpGuard MakeBasicAuthGuard(std::map<std::string, std::string> users);

// A bcrypt hash of `password` ($2b$, the given cost 4..31) for
// basic_auth_users.
Result<std::string> HashPassword(std::string_view password, int cost = 10);

// Whether `password` matches the bcrypt `hash` (false for a malformed hash).
bool CheckPassword(std::string_view password, const std::string& hash);

}  // namespace anxin::agent

#endif  // ANXIN_AGENT_WEB_CONFIG_H_
