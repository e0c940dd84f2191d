// A real etcd cluster on loopback for tests: N members of Debian's
// `etcd-server` (/usr/bin/etcd), on ports picked at run time, data in a
// temporary directory, with short heartbeat and election times so that a
// lost leader is replaced within about a second. Every member is a
// Subprocess with a time limit, killed with its group when the object goes,
// so a failing assertion leaves nothing running.
//
//   TempDir dir;
//   EtcdCluster etcd(dir, 3);
//   ASSERT_TRUE(etcd.Start());
//   std::string endpoints = etcd.Endpoints();   // "127.0.0.1:41000,127.0.0.1:41002,..."
//   int leader = etcd.Leader();                  // index of the member that leads
//   etcd.Kill(leader);                           // SIGKILL; Restart(leader) brings it back
//
// With EtcdTls, the members serve clients over https only, with the given
// certificate, and (client_cert_auth) refuse a client without a certificate
// their CA signed; tests/support/make_test_certs.sh makes such files.
//
//   EtcdCluster etcd(dir, 1, {.ca = d + "/ca.pem", .cert = d + "/server.pem",
//                             .key = d + "/server-key.pem", .client_cert = d + "/client.pem",
//                             .client_key = d + "/client-key.pem"});
//
// Thread safety: one test thread.
#ifndef ANXIN_TESTS_SUPPORT_ETCD_CLUSTER_H_
#define ANXIN_TESTS_SUPPORT_ETCD_CLUSTER_H_

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::testing {

inline constexpr const char* kEtcd = "/usr/bin/etcd";

// The members' TLS set-up (PEM files); empty ca: plain http.
struct EtcdTls {
  std::string ca;           // --trusted-ca-file
  std::string cert;         // --cert-file
  std::string key;          // --key-file
  std::string client_cert;  // what the cluster's own health checks present
  std::string client_key;
  bool client_cert_auth = true;
};

class EtcdCluster {
 public:
  EtcdCluster(const TempDir& dir, int members, EtcdTls tls = {})
      : dir_(dir.path()), tls_(std::move(tls)) {
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client_port = FreePort();
      m.peer_port = FreePort();
      members_.push_back(std::move(m));
    }
  }
  ~EtcdCluster() {
    for (Member& m : members_) Kill(m);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts every member and waits until each answers and one leads.
  bool Start() {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!StartMember(i, /*fresh=*/true)) return false;
    }
    return WaitHealthy();
  }

  std::string Endpoints() const {
    std::string out;
    for (const Member& m : members_) {
      out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(m.client_port);
    }
    return out;
  }
  std::string Endpoint(size_t i) const {
    return "127.0.0.1:" + std::to_string(members_[i].client_port);
  }
  size_t size() const { return members_.size(); }

  // The index of the leading member, or -1 when none answers with one.
  int Leader() const {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i].proc || !members_[i].proc->Running()) continue;
      auto status = Status(i);
      if (!status) continue;
      const std::string leader = status->value("leader", "");
      const std::string self = (*status)["header"].value("member_id", "");
      if (!leader.empty() && leader == self) return static_cast<int>(i);
    }
    return -1;
  }

  void Kill(size_t i) { Kill(members_[i]); }
  bool Restart(size_t i) { return StartMember(i, /*fresh=*/false); }

  // Every running member answers and one of them leads.
  bool WaitHealthy(std::chrono::seconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (size_t i = 0; i < members_.size(); ++i) {
        if (members_[i].proc && members_[i].proc->Running() && !Status(i)) all = false;
      }
      if (all && Leader() >= 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "etcd did not become healthy within " << timeout.count() << " s:\n" << Logs();
    return false;
  }

  std::string Logs() {
    std::lock_guard lock(mu_);
    return log_.size() > 6000 ? log_.substr(log_.size() - 6000) : log_;
  }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<Subprocess> proc;
  };

  std::optional<nlohmann::json> Status(size_t i) const {
    HttpClientOptions o{.connect_timeout = std::chrono::milliseconds(300),
                        .timeout = std::chrono::milliseconds(1000)};
    o.ca_file = tls_.ca;
    o.client_cert_file = tls_.client_cert;
    o.client_key_file = tls_.client_key;
    auto c = HttpClient::ForUrl((tls_.ca.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") +
                                    std::to_string(members_[i].client_port),
                                o);
    if (!c) return std::nullopt;
    auto r = c->Post("/v3/maintenance/status", "{}");
    if (!r || r->status != 200) return std::nullopt;
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (!j.is_object() || !j.contains("header")) return std::nullopt;
    return j;
  }

  void Kill(Member& m) {
    if (!m.proc) return;
    (void)m.proc->Signal(SIGKILL);
    (void)m.proc->Wait();
    m.proc.reset();
  }

  bool StartMember(size_t i, bool fresh) {
    Member& m = members_[i];
    std::string cluster;
    for (const Member& x : members_) {
      cluster += (cluster.empty() ? "" : ",") + x.name +
                 "=http://127.0.0.1:" + std::to_string(x.peer_port);
    }
    const std::string client = (tls_.ca.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") +
                               std::to_string(m.client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    SubprocessOptions o;
    o.argv = {kEtcd,
              "--name",
              m.name,
              "--data-dir",
              dir_ + "/etcd-" + m.name,
              "--listen-client-urls",
              client,
              "--advertise-client-urls",
              client,
              "--listen-peer-urls",
              peer,
              "--initial-advertise-peer-urls",
              peer,
              "--initial-cluster",
              cluster,
              "--initial-cluster-token",
              "anxin-test",
              "--initial-cluster-state",
              fresh ? "new" : "existing",
              "--heartbeat-interval",
              "50",
              "--election-timeout",
              "500",
              "--log-level",
              "warn"};
    if (!tls_.ca.empty()) {
      for (const std::string& a :
           {std::string("--trusted-ca-file"), tls_.ca, std::string("--cert-file"), tls_.cert,
            std::string("--key-file"), tls_.key}) {
        o.argv.push_back(a);
      }
      if (tls_.client_cert_auth) o.argv.push_back("--client-cert-auth");
    }
    o.timeout = std::chrono::seconds(600);
    o.on_stderr = [this, name = m.name](const OutputLine& l) {
      std::lock_guard lock(mu_);
      log_ += name + ": " + l.text + "\n";
    };
    o.on_stdout = o.on_stderr;
    auto p = Subprocess::Start(std::move(o));
    if (!p) {
      ADD_FAILURE() << "cannot start " << kEtcd << ": " << p.error().ToString();
      return false;
    }
    m.proc = std::move(*p);
    return true;
  }

  std::string dir_;
  EtcdTls tls_;
  std::vector<Member> members_;
  std::mutex mu_;
  std::string log_;
};

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_SUPPORT_ETCD_CLUSTER_H_
