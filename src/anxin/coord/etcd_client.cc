#include "anxin/coord/etcd_client.h"

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

// The key just past every key that starts with prefix (etcd's range_end).
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
  return r;
}

}  // namespace

Result<std::vector<std::string>> ParseEndpoints(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view part : Split(text, ',')) {
    std::string_view e = Trim(part);
    if (e.starts_with("https://")) {
      return InvalidArgument("--rdzv-endpoint: '" + std::string(e) +
                             "': TLS to etcd is not supported yet; give an http:// client URL "
                             "(etcd --listen-client-urls http://...)");
    }
    if (e.starts_with("http://")) e.remove_prefix(7);
    const size_t colon = e.rfind(':');
    if (e.empty() || colon == std::string_view::npos || colon == 0 ||
        !ParseInt(e.substr(colon + 1)) || *ParseInt(e.substr(colon + 1)) <= 0 ||
        *ParseInt(e.substr(colon + 1)) > 65535) {
      return InvalidArgument("--rdzv-endpoint: expected host:port[,host:port...], got '" +
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
  size_t current = 0;  // the member that answered last
};

Result<EtcdClient> EtcdClient::Create(std::string_view endpoints, EtcdOptions options) {
  ANXIN_ASSIGN_OR_RETURN(options.endpoints, ParseEndpoints(endpoints));
  return EtcdClient(std::move(options));
}

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  HttpClientOptions ho;
  ho.connect_timeout = impl_->options.connect_timeout;
  ho.timeout = impl_->options.timeout;
  for (const std::string& e : impl_->options.endpoints) {
    const size_t colon = e.rfind(':');
    impl_->clients.emplace_back(e.substr(0, colon),
                                static_cast<int>(ParseInt(e.substr(colon + 1)).value_or(2379)), ho);
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

Result<std::string> EtcdClient::Call(std::string_view path, const std::string& body) {
  const size_t n = impl_->clients.size();
  if (n == 0) return Unavailable("etcd: no endpoint: give --rdzv-endpoint host:port");
  std::string last;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (impl_->current + i) % n;
    const std::string& where = impl_->options.endpoints[k];
    auto r = impl_->clients[k].Post(path, body);
    if (!r) {
      last = where + ": " + r.error().message();
      continue;
    }
    if (r->status == 200) {
      impl_->current = k;
      return std::move(r->body);
    }
    json err = json::parse(r->body, nullptr, false);
    const int code = err.is_object() ? err.value("code", 0) : 0;
    std::string message = err.is_object() ? err.value("message", err.value("error", r->body))
                                          : std::string(Trim(r->body.substr(0, 200)));
    if (code == 5) return NotFound("etcd " + where + ": " + message);
    if (!TryElsewhere(code, message) && r->status < 500) {
      return MakeError(ErrorCode::kFailedPrecondition, "etcd " + where + ": " + message);
    }
    last = where + ": " + message;
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

Result<EtcdRange> EtcdClient::Range(std::string_view key, bool prefix) {
  json req = {{"key", Base64Encode(key)}};
  if (prefix) req["range_end"] = Base64Encode(PrefixEnd(key));
  ANXIN_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/range", req.dump()));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return DataLoss("etcd: range: not JSON: " + body.substr(0, 120));
  return ParseRange(j);
}

Result<EtcdRange> EtcdClient::Get(std::string_view key) { return Range(key, false); }
Result<EtcdRange> EtcdClient::GetPrefix(std::string_view prefix) { return Range(prefix, true); }

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

}  // namespace anxin::coord
