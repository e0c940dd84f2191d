// A client of etcd v3 over its JSON gateway (/v3/kv/range, /v3/kv/txn,
// /v3/lease/..., /v3/watch), through base/http: reads, writes,
// compare-and-swap, leases and watches, tried on each member of the cluster
// in turn until one answers. Keys and values are plain bytes here; base64 is
// the gateway's business. https:// endpoints (or any TLS file given) speak
// TLS; a user authenticates once per client and again whenever etcd says
// the token is no longer valid.
//
//   EtcdOptions o;
//   o.ca_file = "ca.pem";                       // https, with client certificates
//   o.cert_file = "client.pem";
//   o.key_file = "client-key.pem";
//   o.user = "root";
//   o.password = "pw";
//   ANXIN_ASSIGN_OR_RETURN(EtcdClient etcd, EtcdClient::Create("10.0.0.1:2379,10.0.0.2:2379", o));
//   ANXIN_ASSIGN_OR_RETURN(int64_t lease, etcd.GrantLease(5));
//   ANXIN_ASSIGN_OR_RETURN(bool created, etcd.PutIfAbsent("/anxin/run/j1/generation", "{}"));
//   ANXIN_ASSIGN_OR_RETURN(EtcdRange r, etcd.GetPrefix("/anxin/run/j1/nodes/"));
//   for (const EtcdKv& kv : r.kvs) std::printf("%s = %s\n", kv.key.c_str(), kv.value.c_str());
//   ANXIN_ASSIGN_OR_RETURN(int64_t ttl, etcd.KeepAlive(lease));   // seconds left
//   // Every change under the prefix after revision r.revision, until false:
//   Status s = etcd.WatchPrefix("/anxin/run/j1/", r.revision + 1, [](const EtcdWatchBatch& b) {
//     for (const EtcdEvent& e : b.events) std::printf("%s\n", e.kv.key.c_str());
//     return true;
//   });
//
// Errors: no member answers (refused, timed out, no leader, no quorum) ->
// kUnavailable naming every endpoint and the last reason; a TLS handshake or
// certificate that fails, or a user or password that etcd refuses ->
// kPermissionDenied naming the endpoint and the reason (never the
// password); a lease that expired -> kNotFound; an answer that is not
// etcd's -> kDataLoss.
//
// Thread safety: one thread at a time per client; make one client per
// thread (they are cheap). StopWatch may be called from any thread.
#ifndef ANXIN_COORD_ETCD_CLIENT_H_
#define ANXIN_COORD_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::coord {

struct EtcdOptions {
  // "host:port", "http://host:port" or "https://host:port" of each member.
  std::vector<std::string> endpoints{};
  std::chrono::milliseconds connect_timeout{500};
  // Per request and member; a member that cannot reach a quorum answers
  // within about this long, so keep it short.
  std::chrono::milliseconds timeout{2000};
  // TLS (PEM files): the CA that signed the members' certificates, and the
  // client certificate and key for a cluster started with
  // --client-cert-auth. Any of them makes "host:port" endpoints https.
  std::string ca_file{};
  std::string cert_file{};
  std::string key_file{};
  std::string server_name{};  // the name the members' certificates carry, if not the host
  // etcd's authentication (etcdctl user add / auth enable); "" = none.
  std::string user{};
  std::string password{};
  // A watch stream that carries nothing for this long is opened anew (from
  // the revision after the last one seen, so nothing is lost).
  std::chrono::milliseconds watch_idle{15000};
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
  int64_t count = 0;  // how many keys the range holds (also when only counted)
};

// One change a watch saw: kv after a put, or the key (and the revision of
// the delete in kv.mod_revision) after a delete or a lease's expiry.
struct EtcdEvent {
  bool deleted = false;
  EtcdKv kv{};
};

// What the members served, from their own /metrics, summed over the
// members: gRPC calls started per method (the gateway's requests are
// gRPC calls too: "Range", "Txn", "Put", "LeaseGrant", "LeaseKeepAlive",
// "Watch", ...) and the bytes clients sent and received.
struct EtcdServerCounts {
  std::map<std::string, double> started{};
  double received_bytes = 0;  // etcd_network_client_grpc_received_bytes_total
  double sent_bytes = 0;      // etcd_network_client_grpc_sent_bytes_total

  double Total() const;
  // this - before, per method (counters only grow while members run).
  EtcdServerCounts Since(const EtcdServerCounts& before) const;
};

// What one message of a watch stream carried.
struct EtcdWatchBatch {
  int64_t revision = 0;  // the store's revision when it was sent
  std::vector<EtcdEvent> events{};
};

// "a:1,b:2" -> {"a:1", "b:2"}; "http://a:1" -> "a:1"; "https://a:1" stays.
// An empty list, an empty entry or an entry without a port ->
// kInvalidArgument naming --rdzv-endpoint.
Result<std::vector<std::string>> ParseEndpoints(std::string_view text);

// The key just past every key that starts with prefix (etcd's range_end).
std::string PrefixEnd(std::string_view prefix);

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
  // The keys in [from, to).
  Result<EtcdRange> GetRange(std::string_view from, std::string_view to);
  // The prefix's keys without their values (kvs hold keys and revisions), or
  // only how many there are (count; kvs empty): what a reader that needs
  // names or a number pays for, not every value.
  Result<EtcdRange> GetPrefixKeys(std::string_view prefix);
  Result<int64_t> CountPrefix(std::string_view prefix);

  // Returns the revision of the write. lease 0: no lease.
  Result<int64_t> Put(std::string_view key, std::string_view value, int64_t lease = 0);
  Status Delete(std::string_view key);

  // Writes key only when nobody has: true when this call created it.
  Result<bool> PutIfAbsent(std::string_view key, std::string_view value, int64_t lease = 0);
  // key = value only if key is absent, and then also_key = also_value, in
  // one transaction. True when written.
  Result<bool> PutIfAbsentWith(std::string_view key, std::string_view value,
                               std::string_view also_key, std::string_view also_value);
  // Every key = value, in one transaction (at most 128: etcd's default
  // --max-txn-ops).
  Status PutAll(const std::vector<std::pair<std::string, std::string>>& kvs);
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

  // Every member's /metrics, summed (EtcdServerCounts). A member that does
  // not answer -> kUnavailable naming it: a sum without it would be wrong.
  Result<EtcdServerCounts> ServerCounts();

  // Streams every change to the keys under prefix from start_revision on to
  // on_batch, in revision order. Returns Ok once a watch that stood ends
  // (the connection broke, the member ended it, or it carried nothing for
  // watch_idle): watch again from the revision after the last one seen, and
  // nothing is lost. kCancelled: on_batch returned false or StopWatch was
  // called. kAborted: start_revision was compacted away (read the prefix
  // afresh and watch from its revision + 1). kUnavailable: no member opened
  // a watch. kPermissionDenied: TLS or the user was refused. on_batch's
  // first call (an empty batch) says the member confirmed the watch.
  Status WatchPrefix(std::string_view prefix, int64_t start_revision,
                     const std::function<bool(const EtcdWatchBatch&)>& on_batch);
  // The same for the keys in [from, to).
  Status WatchRange(std::string_view from, std::string_view to, int64_t start_revision,
                    const std::function<bool(const EtcdWatchBatch&)>& on_batch);
  // From any thread: a WatchPrefix in flight returns soon (kCancelled). Call
  // it until the watching thread has left WatchPrefix: a watch that was
  // just connecting may miss one call.
  void StopWatch();

 private:
  // POSTs body to path on the member that answered last, then on the others.
  Result<std::string> Call(std::string_view path, const std::string& body);
  enum class Read { kValues, kKeysOnly, kCountOnly };
  Result<EtcdRange> Range(std::string_view key, std::string_view end,
                          Read read = Read::kValues);  // end "": key alone
  // Gets a token for options.user from member k.
  Status Authenticate(size_t k);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anxin::coord

#endif  // ANXIN_COORD_ETCD_CLIENT_H_
