// A client of etcd v3 over its JSON gateway (/v3/kv/range, /v3/kv/txn,
// /v3/lease/...), through base/http: reads, writes, compare-and-swap and
// leases, tried on each member of the cluster in turn until one answers.
// Keys and values are plain bytes here; base64 is the gateway's business.
//
//   ANXIN_ASSIGN_OR_RETURN(EtcdClient etcd, EtcdClient::Create("127.0.0.1:2379,127.0.0.1:2381"));
//   ANXIN_ASSIGN_OR_RETURN(int64_t lease, etcd.GrantLease(5));
//   ANXIN_ASSIGN_OR_RETURN(bool created, etcd.PutIfAbsent("/anxin/run/j1/generation", "{}"));
//   ANXIN_ASSIGN_OR_RETURN(EtcdRange r, etcd.GetPrefix("/anxin/run/j1/nodes/"));
//   for (const EtcdKv& kv : r.kvs) std::printf("%s = %s\n", kv.key.c_str(), kv.value.c_str());
//   ANXIN_ASSIGN_OR_RETURN(int64_t ttl, etcd.KeepAlive(lease));   // seconds left
//
// Errors: no member answers (refused, timed out, no leader, no quorum) ->
// kUnavailable naming every endpoint and the last reason; a lease that
// expired -> kNotFound; an answer that is not etcd's -> kDataLoss.
//
// Thread safety: one thread at a time per client; make one client per
// thread (they are cheap).
#ifndef ANXIN_COORD_ETCD_CLIENT_H_
#define ANXIN_COORD_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::coord {

struct EtcdOptions {
  // "host:port" (or "http://host:port") of each member.
  std::vector<std::string> endpoints{};
  std::chrono::milliseconds connect_timeout{500};
  // Per request and member; a member that cannot reach a quorum answers
  // within about this long, so keep it short.
  std::chrono::milliseconds timeout{2000};
};

struct EtcdKv {
  std::string key{};
  std::string value{};
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct EtcdRange {
  int64_t revision = 0;  // the store's revision when it answered
  std::vector<EtcdKv> kvs{};
};

// "a:1,b:2" -> {"a:1", "b:2"}; an empty list, an empty entry or an entry
// without a port -> kInvalidArgument naming --rdzv-endpoint.
Result<std::vector<std::string>> ParseEndpoints(std::string_view text);

class EtcdClient {
 public:
  static Result<EtcdClient> Create(std::string_view endpoints, EtcdOptions options = {});
  explicit EtcdClient(EtcdOptions options);
  EtcdClient(EtcdClient&&) noexcept;
  EtcdClient& operator=(EtcdClient&&) noexcept;
  ~EtcdClient();

  // The endpoints as given, comma-separated: "127.0.0.1:2379,127.0.0.1:2381".
  std::string Endpoints() const;

  // The cluster answers at all (maintenance/status of a member).
  Status Ping();

  // Linearizable reads: the key itself, or every key starting with prefix.
  Result<EtcdRange> Get(std::string_view key);
  Result<EtcdRange> GetPrefix(std::string_view prefix);

  // Returns the revision of the write. lease 0: no lease.
  Result<int64_t> Put(std::string_view key, std::string_view value, int64_t lease = 0);
  Status Delete(std::string_view key);

  // Writes key only when nobody has: true when this call created it.
  Result<bool> PutIfAbsent(std::string_view key, std::string_view value, int64_t lease = 0);
  // Writes key only when its mod_revision is still mod_revision (0: absent):
  // true when it did. The compare-and-swap every decision goes through.
  Result<bool> PutIfModRevision(std::string_view key, std::string_view value, int64_t mod_revision,
                                int64_t lease = 0);

  // A lease of ttl_seconds; returns its id.
  Result<int64_t> GrantLease(int ttl_seconds);
  // Renews the lease; returns its TTL. An expired lease -> kNotFound.
  Result<int64_t> KeepAlive(int64_t lease);
  // Ends the lease, deleting its keys now. An unknown lease is not an error.
  Status RevokeLease(int64_t lease);

 private:
  // POSTs body to path on the member that answered last, then on the others.
  Result<std::string> Call(std::string_view path, const std::string& body);
  Result<EtcdRange> Range(std::string_view key, bool prefix);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin::coord

#endif  // ANXIN_COORD_ETCD_CLIENT_H_
