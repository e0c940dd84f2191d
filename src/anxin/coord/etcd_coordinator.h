// The multi-node Coordinator of `anxin run` (docs/recovery.md, "Many
// nodes"): the supervisors of one job meet in etcd, under
// /anxin/run/JOB/, and decide together when to restart, at which
// generation, from which checkpoint and with which ranks.
//
//   ClusterOptions c;
//   c.endpoints = "127.0.0.1:2379";
//   c.job = "llama-70b";
//   c.min_nodes = c.max_nodes = 2;
//   c.node_rank = 0;
//   c.address = "10.0.0.1";
//   ANXIN_ASSIGN_OR_RETURN(auto coordinator, EtcdCoordinator::Create(c));
//   run::SupervisorOptions options;
//   options.command = {"python3", "train.py", "--resume", "{checkpoint}"};
//   run::Supervisor s(std::move(options), nullptr, {}, {}, std::move(coordinator));
//   ANXIN_ASSIGN_OR_RETURN(int status, s.Run());   // every node: the same world
//
// The protocol (every value is JSON and carries its generation):
// - alive/NODE, under the node's lease (TTL lease_ttl_seconds, kept alive):
//   the node is alive. A node of the running generation whose key is gone
//   (and that did not finish) is lost: the lead (below) opens the next
//   generation with class node_lost. The ranks run only while the lease
//   is sure to hold (AttachGate): unrenewed for TTL - max(0.5 s, TTL / 5)
//   since the last renewal was sent, they are fenced (stopped) and the node
//   rejoins through the next generation; it never resumes the old one.
// - lead, under the lease of one live node, taken create-only by the first
//   node to try (at its start, or when the key went with a lease): the lead
//   watches the alive and done keys (reads their names, at most once a
//   second, only while its watch is being opened) to find lost members, and
//   closes the barriers.
// - generation: the job's generation and the fault that opened it. A node
//   that detects a fault moves it from G to G+1 with a compare-and-swap on
//   the key's revision, so nodes that detect at once open ONE generation.
// - gen/G/ready/NODE, under the lease: the node has stopped its ranks, run
//   its playbook and holds these checkpoint steps intact.
// - gen/G/plan, written once (create-only) by the node that closes the
//   barrier (the lead, or any node once the lead is late past the deadline): all max_nodes are
//   ready; or, in a recovery, at least min_nodes are and no other node holds a live lease (the job
//   shrinks at once); or the barrier timed out with at least min_nodes ready (the job shrinks), or
//   with fewer (the job stops). It names the members in node-rank order, MASTER_ADDR/PORT of the
//   first (the generation's leader) and the agreed step: the newest that every member holds intact.
// - gen/G/done/NODE: the node's ranks finished (or it ended with its peers:
//   PeersFinished); stopped: a node gave up, and the others stop too.
// A node that comes (back) while a generation runs without it opens the
// next one, so a restarted supervisor rejoins. While the store has no
// quorum, no decision is taken: calls are retried (logged, counted in
// store_pauses) until it answers again or store_timeout_seconds pass.
//
// Every node watches the keys it acts on (generation, lead, plan, stopped:
// one etcd watch stream, which leaves the alive and per-generation keys
// out) and keeps what it saw in memory, so while the ranks run a node sends
// etcd only a lease renewal every TTL/3 and a new watch every
// watch_idle_seconds. In a barrier each node writes its ready key; the lead
// counts them, reads them once the barrier can close and writes the plan,
// whose copy under "plan" (the member list, not every node's record)
// reaches the others through their watch: O(N) etcd calls per generation.
//
// Thread safety: the Coordinator calls come from the supervisor's thread;
// three threads of its own keep the lease alive, hold the watch and judge
// what it saw.
#ifndef ANXIN_COORD_ETCD_COORDINATOR_H_
#define ANXIN_COORD_ETCD_COORDINATOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "anxin/base/error.h"
#include "anxin/run/options.h"
#include "anxin/run/supervisor.h"

namespace anxin::coord {

struct ClusterOptions {
  std::string endpoints;  // --rdzv-endpoint host:port[,host:port...]
  std::string job;        // --rdzv-id
  int min_nodes = 1;      // --nnodes N (min = max) or MIN:MAX
  int max_nodes = 1;
  int node_rank = -1;   // --node-rank: orders the nodes; -1 = by name
  std::string node_id;  // "" = "node-RANK", or the host name without --node-rank
  std::string address;  // how the other nodes reach this one (MASTER_ADDR when it leads)
  int lease_ttl_seconds = 5;
  double barrier_timeout_seconds = 30;  // a recovery's barrier
  double join_timeout_seconds = 600;    // the first barrier, while nodes start
  // The job's keys come from a watch on /anxin/run/JOB/; they are read
  // this often only while the watch is being opened again.
  double poll_seconds = 0.5;
  double watch_idle_seconds = 15;  // a silent watch stream is opened anew this often
  // A plan of more members than this reaches the nodes' watches without
  // the member list: each member reads its own rank from gen/G/rank/BY/NODE,
  // so a generation costs etcd O(N) bytes, not N copies of N names.
  int plan_inline_members = 64;
  // false: no watch; every node reads the job's keys every poll_seconds
  // (how supervisors worked before the watch; control-plane benchmark's peer).
  bool watch = true;
  double store_timeout_seconds = 300;  // no answer from etcd this long: the job stops
  // etcd's TLS and authentication (--etcd-cacert, --etcd-cert, --etcd-key,
  // --etcd-server-name, --etcd-user; EtcdOptions).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;
  std::string user;
  std::string password;
  // The restart policy each node applies (as LocalCoordinator's).
  int max_restarts = 3;
  int storm_limit = 3;
};

class EtcdCoordinator final : public run::Coordinator {
 public:
  // Checks the options and that etcd answers: unreachable -> kUnavailable
  // naming the endpoints.
  static Result<std::unique_ptr<EtcdCoordinator>> Create(ClusterOptions options);
  ~EtcdCoordinator() override;

  // The node's lease holds its ranks: they are fenced (stopped) when it has
  // not been renewed for TTL - max(0.5 s, TTL / 5), before etcd can expire
  // it, and a fenced node comes back through the next generation.
  bool AttachGate(run::RankGate& gate) override;
  Status Start(run::FaultSink report) override;
  Decision OnFault(const run::Fault& fault, const run::RestartState& state) override;
  const run::Checkpoint* AgreeCheckpoint(const run::CheckpointScan& local) override;
  std::optional<Placement> Agreed() const override;
  // One read of gen/G/done/, 0.5 s per member at most (no retries: a store
  // that does not answer is nullopt, and the fault is recovered as usual).
  std::optional<std::string> PeersFinished() override;
  std::optional<run::ClusterView> View() const override;
  void Finish(int status) override;

  const std::string& node_id() const;

 private:
  struct Impl;
  explicit EtcdCoordinator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `anxin run`'s factory (run::RunJob): a ClusterRequest (the --nnodes and
// --rdzv-* flags) as ClusterOptions, then Create.
Result<std::unique_ptr<run::Coordinator>> CreateEtcdCoordinator(const run::ClusterRequest& request);

}  // namespace anxin::coord

#endif  // ANXIN_COORD_ETCD_COORDINATOR_H_
