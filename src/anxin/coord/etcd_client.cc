#include "anxin/coord/etcd_client.h"

#include <atomic>
#include <nlohmann/json.hpp>

#include "anxin/base/http.h"
#include "anxin/base/strings.h"

namespace anxin::coord {
namespace {

using nlohmann::json;

// The gateway writes int64 fields as JSON strings and leaves out zeros.
int64_t Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_string()) return ParseInt(it->get<std::string>()).value_or(0);
  if (it->is_number_integer()) return it->get<int64_t>();
  return 0;
}

}  // namespace

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c < 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

namespace {

// An answer that another member may give better: no leader, no quorum, a
// timeout, a member shutting down.
bool TryElsewhere(int grpc_code, std::string_view message) {
  return grpc_code == 14 || grpc_code == 4 || grpc_code == 1 ||
         message.find("leader") != std::string_view::npos ||
         message.find("timed out") != std::string_view::npos ||
         message.find("stopped") != std::string_view::npos;
}

Result<EtcdKv> ParseKv(const json& j) {
  EtcdKv kv;
  auto key = Base64Decode(j.value("key", ""));
  auto value = Base64Decode(j.value("value", ""));
  if (!key || !value) return DataLoss("etcd: a key or value that is not base64");
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  kv.create_revision = Int(j, "create_revision");
  kv.mod_revision = Int(j, "mod_revision");
  kv.version = Int(j, "version");
  kv.lease = Int(j, "lease");
  return kv;
}

Result<EtcdRange> ParseRange(const json& j) {
  EtcdRange r;
  if (auto h = j.find("header"); h != j.end()) r.revision = Int(*h, "revision");
  if (auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array()) {
    for (const json& k : *kvs) {
      ANXIN_ASSIGN_OR_RETURN(EtcdKv kv, ParseKv(k));
      r.kvs.push_back(std::move(kv));
    }
  }
  r.count = Int(j, "count");
  return r;
}

// The end of the first complete JSON object at the start of text (after
// any whitespace), or npos while it is still incomplete. The watch stream
// is a sequence of such objects.
size_t EtcdJsonObjectEnd(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{') {
      ++depth;
    } else if (ch == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// etcd refused the token: it expired (--auth-token-ttl) or the member
// restarted.
bool EtcdTokenRejected(std::string_view message) {
  return message.find("invalid auth token") != std::string_view::npos ||
         message.find("user name is empty") != std::string_view::npos ||
         message.find("auth revision") != std::string_view::npos;
}

// base/http's words for a certificate etcd's member or this client cannot
// get past: retrying does not help.
bool EtcdTlsRefused(std::string_view message) {
  return message.find("is not trusted") != std::string_view::npos ||
         message.find("cannot load the CA") != std::string_view::npos ||
         message.find("TLS handshake") != std::string_view::npos ||
         message.find("requires a client certificate") != std::string_view::npos;
}

// The message of a gateway error body: {"error": "...", "code": N} from
// unary calls, {"error": {"message": ..., "grpc_code": N}} from streams.
std::pair<int, std::string> EtcdErrorOf(const json& err, std::string_view raw) {
  if (!err.is_object()) return {0, std::string(Trim(raw.substr(0, 200)))};
  if (auto e = err.find("error"); e != err.end() && e->is_object()) {
    return {e->value("grpc_code", e->value("code", 0)), e->value("message", e->dump())};
  }
  std::string message = err.value("message", "");
  if (message.empty() && err.contains("error") && err["error"].is_string()) {
    message = err["error"].get<std::string>();
  }
  if (message.empty()) message = std::string(Trim(raw.substr(0, 200)));
  return {err.value("code", 0), message};
}

}  // namespace

Result<std::vector<std::string>> ParseEndpoints(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view part : Split(text, ',')) {
    std::string_view e = Trim(part);
    if (e.starts_with("http://")) e.remove_prefix(7);
    const bool https = e.starts_with("https://");
    const std::string_view host_port = https ? e.substr(8) : e;
    const size_t colon = host_port.rfind(':');
    if (host_port.empty() || colon == std::string_view::npos || colon == 0 ||
        !ParseInt(host_port.substr(colon + 1)) || *ParseInt(host_port.substr(colon + 1)) <= 0 ||
        *ParseInt(host_port.substr(colon + 1)) > 65535) {
      return InvalidArgument("--rdzv-endpoint: expected [https://]host:port[,host:port...], got '" +
                             std::string(text) + "'");
    }
    out.emplace_back(e);
  }
  if (out.empty()) return InvalidArgument("--rdzv-endpoint: no endpoint given");
  return out;
}

struct EtcdClient::Impl {
  EtcdOptions options;
  std::vector<HttpClient> clients;
  std::vector<HttpClient> watch_clients;  // the same members, with the watch's silence limit
  size_t current = 0;                     // the member that answered last
  std::string token;                      // etcd's auth token; "" before the first call
  std::atomic<bool> stop_watch{false};

  bool Tls() const {
    return !options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty();
  }
  HttpHeaders AuthHeaders() const {
    if (token.empty()) return {};
    return {{"Authorization", token}};
  }
};

Result<EtcdClient> EtcdClient::Create(std::string_view endpoints, EtcdOptions options) {
  ANXIN_ASSIGN_OR_RETURN(options.endpoints, ParseEndpoints(endpoints));
  return EtcdClient(std::move(options));
}

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  const EtcdOptions& o = impl_->options;
  HttpClientOptions ho;
  ho.connect_timeout = o.connect_timeout;
  ho.timeout = o.timeout;
  ho.ca_file = o.ca_file;
  ho.client_cert_file = o.cert_file;
  ho.client_key_file = o.key_file;
  ho.tls_server_name = o.server_name;
  HttpClientOptions wo = ho;
  wo.timeout = o.watch_idle;
  auto make = [&](const std::string& e, const HttpClientOptions& with) {
    if (e.starts_with("https://") || impl_->Tls()) {
      auto c = HttpClient::ForUrl(e.starts_with("https://") ? e : "https://" + e, with);
      if (c) return std::move(*c);
    }
    const size_t colon = e.rfind(':');
    return HttpClient(e.substr(0, colon),
                      static_cast<int>(ParseInt(e.substr(colon + 1)).value_or(2379)), with);
  };
  for (const std::string& e : o.endpoints) {
    impl_->clients.push_back(make(e, ho));
    impl_->watch_clients.push_back(make(e, wo));
  }
}

EtcdClient::EtcdClient(EtcdClient&&) noexcept = default;
EtcdClient& EtcdClient::operator=(EtcdClient&&) noexcept = default;
EtcdClient::~EtcdClient() = default;

std::string EtcdClient::Endpoints() const {
  std::string out;
  for (const std::string& e : impl_->options.endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

Status EtcdClient::Authenticate(size_t k) {
  const std::string& where = impl_->options.endpoints[k];
  json req = {{"name", impl_->options.user}, {"password", impl_->options.password}};
  auto r = impl_->clients[k].Post("/v3/auth/authenticate", req.dump());
  if (!r) return std::unexpected(r.error().With("etcd " + where));
  json j = json::parse(r->body, nullptr, false);
  if (r->status == 200 && j.is_object() && !j.value("token", "").empty()) {
    impl_->token = j.value("token", "");
    return Ok();
  }
  auto [code, message] = EtcdErrorOf(j, r->body);
  if (TryElsewhere(code, message) || r->status >= 500) {
    return Unavailable("etcd " + where + ": authenticating: " + message);
  }
  return MakeError(ErrorCode::kPermissionDenied, "etcd " + where + " refused user '" +
                                                     impl_->options.user + "': " + message +
                                                     " (check --etcd-user and its password)");
}

Result<std::string> EtcdClient::Call(std::string_view path, const std::string& body) {
  const size_t n = impl_->clients.size();
  if (n == 0) return Unavailable("etcd: no endpoint: give --rdzv-endpoint host:port");
  std::string last;
  bool refused = false;  // the last failure was TLS's
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (impl_->current + i) % n;
    const std::string& where = impl_->options.endpoints[k];
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!impl_->options.user.empty() && impl_->token.empty()) {
        Status auth = Authenticate(k);
        if (!auth) {
          if (auth.error().code() == ErrorCode::kPermissionDenied)
            return std::unexpected(auth.error());
          last = auth.error().message();
          refused = EtcdTlsRefused(last);
          break;
        }
      }
      auto r = impl_->clients[k].Post(path, body, "application/json", impl_->AuthHeaders());
      if (!r) {
        last = where + ": " + r.error().message();
        refused = EtcdTlsRefused(last);
        break;
      }
      if (r->status == 200) {
        impl_->current = k;
        return std::move(r->body);
      }
      json err = json::parse(r->body, nullptr, false);
      auto [code, message] = EtcdErrorOf(err, r->body);
      if (!impl_->options.user.empty() && EtcdTokenRejected(message) && attempt == 0) {
        impl_->token.clear();  // authenticate again, then retry once
        continue;
      }
      if (code == 5) return NotFound("etcd " + where + ": " + message);
      if (message.find("permission denied") != std::string::npos ||
          message.find("user name is empty") != std::string::npos) {
        return MakeError(ErrorCode::kPermissionDenied,
                         "etcd " + where + ": " + message +
                             (impl_->options.user.empty()
                                  ? " (the cluster has authentication on: give --etcd-user)"
                                  : " (user '" + impl_->options.user + "' lacks the right)"));
      }
      if (!TryElsewhere(code, message) && r->status < 500) {
        return MakeError(ErrorCode::kFailedPrecondition, "etcd " + where + ": " + message);
      }
      last = where + ": " + message;
      refused = false;
      break;
    }
  }
  if (refused) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "etcd at " + Endpoints() + ": " + last +
                         " (check --etcd-cacert, --etcd-cert and --etcd-key)");
  }
  return Unavailable("etcd at " + Endpoints() + " does not answer (" + last +
                     "): start etcd there or fix --rdzv-endpoint");
}

Status EtcdClient::Ping() {
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/maintenance/status", "{}"));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("header")) {
    return DataLoss("etcd at " + Endpoints() + ": not an etcd v3 answer: " + body.substr(0, 120));
  }
  return Ok();
}

Result<EtcdRange> EtcdClient::Range(std::string_view key, std::string_view end, Read read) {
  json req = {{"key", Base64Encode(key)}};
  if (!end.empty()) req["range_end"] = Base64Encode(end);
  if (read == Read::kKeysOnly) req["keys_only"] = true;
  if (read == Read::kCountOnly) req["count_only"] = true;
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/range", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: range: not JSON: " + body.substr(0, 120));
  return ParseRange(j);
}

Result<EtcdRange> EtcdClient::Get(std::string_view key) { return Range(key, ""); }
Result<EtcdRange> EtcdClient::GetPrefix(std::string_view prefix) {
  return Range(prefix, PrefixEnd(prefix));
}
Result<EtcdRange> EtcdClient::GetRange(std::string_view from, std::string_view to) {
  return Range(from, to);
}
Result<EtcdRange> EtcdClient::GetPrefixKeys(std::string_view prefix) {
  return Range(prefix, PrefixEnd(prefix), Read::kKeysOnly);
}
Result<int64_t> EtcdClient::CountPrefix(std::string_view prefix) {
  ANXIN_ASSIGN_OR_RETURN(EtcdRange r, Range(prefix, PrefixEnd(prefix), Read::kCountOnly));
  return r.count;
}

Result<int64_t> EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  json req = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/put", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: put: not JSON: " + body.substr(0, 120));
  return Int(j.value("header", json::object()), "revision");
}

Status EtcdClient::Delete(std::string_view key) {
  json req = {{"key", Base64Encode(key)}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/deleterange", req.dump()));
  (void)body;
  return Ok();
}

Result<bool> EtcdClient::PutIfAbsentWith(std::string_view key, std::string_view value,
                                         std::string_view also_key, std::string_view also_value) {
  json compare = {{"key", Base64Encode(key)},
                  {"result", "EQUAL"},
                  {"target", "CREATE"},
                  {"create_revision", "0"}};
  json put = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  json also = {{"key", Base64Encode(also_key)}, {"value", Base64Encode(also_value)}};
  json req = {{"compare", json::array({compare})},
              {"success", json::array({{{"request_put", put}}, {{"request_put", also}}})}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/txn", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: txn: not JSON: " + body.substr(0, 120));
  return j.value("succeeded", false);
}

Status EtcdClient::PutAll(const std::vector<std::pair<std::string, std::string>>& kvs) {
  json ops = json::array();
  for (const auto& [k, v] : kvs) {
    ops.push_back({{"request_put", {{"key", Base64Encode(k)}, {"value", Base64Encode(v)}}}});
  }
  json req = {{"success", ops}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/txn", req.dump()));
  (void)body;
  return Ok();
}

Result<bool> EtcdClient::PutIfModRevision(std::string_view key, std::string_view value,
                                          int64_t mod_revision, int64_t lease) {
  json put = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  json compare = {{"key", Base64Encode(key)}, {"result", "EQUAL"}};
  if (mod_revision == 0) {
    compare["target"] = "CREATE";
    compare["create_revision"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(mod_revision);
  }
  json req = {{"compare", json::array({compare})},
              {"success", json::array({{{"request_put", put}}})}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/txn", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: txn: not JSON: " + body.substr(0, 120));
  return j.value("succeeded", false);
}

Result<bool> EtcdClient::PutIfAbsent(std::string_view key, std::string_view value, int64_t lease) {
  return PutIfModRevision(key, value, 0, lease);
}

Result<int64_t> EtcdClient::GrantLease(int ttl_seconds) {
  json req = {{"TTL", std::to_string(ttl_seconds)}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/grant", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: lease grant: not JSON: " + body.substr(0, 120));
  if (j.contains("error") && !j["error"].empty()) {
    return Unavailable("etcd: lease grant: " + j["error"].dump());
  }
  const int64_t id = Int(j, "ID");
  if (id == 0) return DataLoss("etcd: lease grant without an ID: " + body.substr(0, 120));
  return id;
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  json req = {{"ID", std::to_string(lease)}};
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/keepalive", req.dump()));
  // A stream of one message: {"result": {...}} or {"error": {...}}.
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: keepalive: not JSON: " + body.substr(0, 120));
  if (auto e = j.find("error"); e != j.end()) {
    const std::string message = e->value("message", e->dump());
    if (e->value("code", 0) == 5)
      return NotFound("etcd: lease " + std::to_string(lease) + ": " + message);
    return Unavailable("etcd: keepalive: " + message);
  }
  const int64_t ttl = Int(j.value("result", json::object()), "TTL");
  if (ttl <= 0) return NotFound("etcd: lease " + std::to_string(lease) + " has expired");
  return ttl;
}

Status EtcdClient::RevokeLease(int64_t lease) {
  json req = {{"ID", std::to_string(lease)}};
  auto r = Call("/v3/lease/revoke", req.dump());
  if (!r && r.error().code() != ErrorCode::kNotFound) return std::unexpected(r.error());
  return Ok();
}

Status EtcdClient::WatchPrefix(std::string_view prefix, int64_t start_revision,
                               const std::function<bool(const EtcdWatchBatch&)>& on_batch) {
  return WatchRange(prefix, PrefixEnd(prefix), start_revision, on_batch);
}

Status EtcdClient::WatchRange(std::string_view from, std::string_view to, int64_t start_revision,
                              const std::function<bool(const EtcdWatchBatch&)>& on_batch) {
  const size_t n = impl_->watch_clients.size();
  if (n == 0) return Unavailable("etcd: no endpoint: give --rdzv-endpoint host:port");
  json create = {{"key", Base64Encode(from)}, {"range_end", Base64Encode(to)}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  const std::string body = json{{"create_request", create}}.dump();
  std::string last;
  for (size_t i = 0; i < n; ++i) {
    if (impl_->stop_watch) return Cancelled("etcd: the watch was stopped");
    const size_t k = (impl_->current + i) % n;
    const std::string& where = impl_->options.endpoints[k];
    if (!impl_->options.user.empty() && impl_->token.empty()) {
      Status auth = Authenticate(k);
      if (!auth) {
        if (auth.error().code() == ErrorCode::kPermissionDenied) return auth;
        last = auth.error().message();
        continue;
      }
    }
    std::string pending;
    bool created = false;
    Status verdict = Ok();
    auto on_body = [&](std::string_view piece) -> bool {
      if (impl_->stop_watch) {
        verdict = Cancelled("etcd: the watch was stopped");
        return false;
      }
      pending.append(piece);
      for (;;) {
        const size_t start = pending.find('{');
        if (start == std::string::npos) {
          pending.clear();
          return true;
        }
        const size_t end = EtcdJsonObjectEnd(std::string_view(pending).substr(start));
        if (end == std::string_view::npos) return true;
        json j = json::parse(pending.substr(start, end), nullptr, false);
        pending.erase(0, start + end);
        if (!j.is_object()) {
          verdict = DataLoss("etcd " + where + ": a watch message that is not JSON");
          return false;
        }
        if (j.contains("error")) {
          auto [code, message] = EtcdErrorOf(j, "");
          if (EtcdTokenRejected(message)) impl_->token.clear();
          verdict = Unavailable("etcd " + where + ": watch: " + message);
          return false;
        }
        const json result = j.value("result", json::object());
        if (const int64_t compacted = Int(result, "compact_revision"); compacted > 0) {
          verdict = MakeError(ErrorCode::kAborted,
                              "etcd " + where + ": revision " + std::to_string(start_revision) +
                                  " was compacted (now from " + std::to_string(compacted) + ")");
          return false;
        }
        if (result.value("canceled", false)) {
          const std::string why = result.value("cancel_reason", "");
          if (EtcdTokenRejected(why)) impl_->token.clear();
          verdict = Unavailable("etcd " + where + ": the watch was canceled: " + why);
          return false;
        }
        EtcdWatchBatch batch;
        batch.revision = Int(result.value("header", json::object()), "revision");
        for (const json& e : result.value("events", json::array())) {
          auto kv = ParseKv(e.value("kv", json::object()));
          if (!kv) {
            verdict = std::unexpected(kv.error());
            return false;
          }
          batch.events.push_back({e.value("type", "") == "DELETE", std::move(*kv)});
        }
        created = true;
        if (!on_batch(batch)) {
          verdict = Cancelled("etcd: the watch ended");
          return false;
        }
      }
    };
    HttpHeaders headers = impl_->AuthHeaders();
    // Ask the member to end the watch when it loses its leader, so that a
    // member cut off from the others does not leave it silent.
    headers.emplace_back("Grpc-Metadata-hasleader", "true");
    auto r = impl_->watch_clients[k].PostStream("/v3/watch", body, on_body, headers);
    // A watch's connection ends with its stream half read: never reuse it
    // (a request sent on it reads the old stream's leftovers).
    impl_->watch_clients[k].Stop();
    if (!verdict) {
      if (verdict.error().code() != ErrorCode::kUnavailable || created) return verdict;
      last = verdict.error().message();
      continue;
    }
    if (!r) {
      if (impl_->stop_watch) return Cancelled("etcd: the watch was stopped");
      if (created) return Ok();  // it stood and broke: the caller resumes
      last = where + ": " + r.error().message();
      if (EtcdTlsRefused(last)) {
        return MakeError(ErrorCode::kPermissionDenied, "etcd " + last);
      }
      continue;
    }
    if (r->status != 200) {
      json err = json::parse(pending, nullptr, false);
      last = where + ": watch: HTTP " + std::to_string(r->status) + ": " +
             EtcdErrorOf(err, pending).second;
      continue;
    }
    impl_->current = k;
    return Ok();  // the member ended the stream
  }
  return Unavailable("etcd at " + Endpoints() + ": no member opens a watch (" + last + ")");
}

double EtcdServerCounts::Total() const {
  double n = 0;
  for (const auto& [method, count] : started) n += count;
  return n;
}

EtcdServerCounts EtcdServerCounts::Since(const EtcdServerCounts& before) const {
  EtcdServerCounts d = *this;
  for (const auto& [method, count] : before.started) d.started[method] -= count;
  d.received_bytes -= before.received_bytes;
  d.sent_bytes -= before.sent_bytes;
  return d;
}

Result<EtcdServerCounts> EtcdClient::ServerCounts() {
  EtcdServerCounts out;
  for (size_t k = 0; k < impl_->clients.size(); ++k) {
    const std::string& where = impl_->options.endpoints[k];
    auto r = impl_->clients[k].Get("/metrics", impl_->AuthHeaders());
    if (!r) return Unavailable("etcd " + where + ": /metrics: " + r.error().message());
    if (r->status != 200) {
      return Unavailable("etcd " + where + ": /metrics: HTTP " + std::to_string(r->status));
    }
    // Sample lines: NAME{LABELS} VALUE
    for (std::string_view line : Split(r->body, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      if (space == std::string_view::npos) continue;
      auto value = ParseDouble(Trim(line.substr(space + 1)));
      if (!value) continue;
      const std::string_view series = line.substr(0, space);
      if (series.starts_with("grpc_server_started_total{")) {
        const size_t at = series.find("grpc_method=\"");
        if (at == std::string_view::npos) continue;
        const size_t from = at + 13;
        const size_t to = series.find('"', from);
        if (to == std::string_view::npos) continue;
        out.started[std::string(series.substr(from, to - from))] += *value;
      } else if (series == "etcd_network_client_grpc_received_bytes_total") {
        out.received_bytes += *value;
      } else if (series == "etcd_network_client_grpc_sent_bytes_total") {
        out.sent_bytes += *value;
      }
    }
  }
  return out;
}

void EtcdClient::StopWatch() {
  impl_->stop_watch = true;
  for (HttpClient& c : impl_->watch_clients) c.Stop();
}

}  // namespace anxin::coord
