#include "anxin/coord/etcd_coordinator.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "anxin/base/clock.h"
#include "anxin/base/http.h"
#include "anxin/base/strings.h"
#include "anxin/base/time_format.h"
#include "anxin/coord/etcd_client.h"
#include "anxin/run/launch.h"

namespace anxin::coord {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

double WallSeconds(SysClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
double WallNow() { return WallSeconds(SysClock::now()); }

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

json ParseJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

// What a node said when it reached a barrier.
struct Ready {
  std::string node;
  int rank_hint = -1;
  std::vector<int64_t> steps;  // newest first
  std::string address;
  int port = 0;
  double ready_seconds = -1;
  double ready_time = 0;
};

// The names after prefix of the keys in r (node names, from alive/, ready/
// or done/ keys).
std::set<std::string> NamesUnder(const EtcdRange& r, std::string_view prefix) {
  std::set<std::string> names;
  for (const EtcdKv& kv : r.kvs) {
    if (kv.key.starts_with(prefix)) names.insert(kv.key.substr(prefix.size()));
  }
  return names;
}

Ready ReadyFromJson(const json& j) {
  Ready r;
  r.node = j.value("node", "");
  r.rank_hint = j.value("rank_hint", -1);
  r.steps = j.value("steps", std::vector<int64_t>{});
  r.address = j.value("address", "");
  r.port = j.value("port", 0);
  r.ready_seconds = j.value("ready_seconds", -1.0);
  r.ready_time = j.value("ready_time", 0.0);
  return r;
}

}  // namespace

struct EtcdCoordinator::Impl {
  ClusterOptions o;
  std::string prefix;  // "/anxin/run/JOB/"
  EtcdOptions etcd_options;
  EtcdClient main_client{EtcdOptions{}};  // the supervisor's thread
  run::FaultSink report;

  std::mutex mu;
  std::condition_variable cv;
  bool quit = false;
  int64_t lease = 0;
  int running_gen = -1;  // the generation whose ranks run here; -1 while none do
  std::vector<std::string> members;
  int reported_gen = -1;
  std::optional<Placement> placement;
  std::optional<run::ClusterView> view;
  std::atomic<int> store_pauses{0};

  // The recovery under way: the generation it joined (-1: none decided yet)
  // and when this node learned of the fault.
  int target_gen = -1;
  Clock::TimePoint fault_seen{};  // the fault's time (run::Fault::seen)
  bool first_barrier = true;

  std::thread keepalive;
  std::thread watcher;
  run::RankGate* gate = nullptr;  // the supervisor's fence (AttachGate)

  // The job's keys as the watch saw them (under mu; keys_cv says they moved).
  EtcdClient stream_client{EtcdOptions{}};  // the streaming thread's; StopWatch from others
  std::thread streamer;
  std::atomic<bool> streamer_running{false};
  std::condition_variable keys_cv;
  std::map<std::string, EtcdKv> keys;
  uint64_t keys_seq = 0;        // bumped at every change
  bool keys_live = false;       // a watch stands: the copy is current
  int plan_copy_gen = -1;       // the generation of the plan key in the copy
  bool leading = false;         // the copy's lead key names this node
  bool copy_has_alive = false;  // the copy holds the alive keys (the lead's watch)
  // The plan key (the copy every node's watch carries) lists the times of
  // this many of the slowest nodes; gen/G/plan lists every node's.
  static constexpr size_t kViewNodes = 8;
  // The watcher thread's: when the lead last read the alive keys, the plan
  // members of generation done_gen seen done, and since when (and how much
  // longer) the lead key has been missing.
  static constexpr auto kAliveReadGap = std::chrono::seconds(1);
  SteadyClock::time_point alive_read{};
  int done_gen = -1;
  std::set<std::string> done_known;
  SteadyClock::time_point lead_missing_since{};
  std::chrono::milliseconds lead_wait{0};

  std::string Key(std::string_view rest) const { return prefix + std::string(rest); }
  std::string GenKey(int g, std::string_view rest) const {
    return prefix + "gen/" + std::to_string(g) + "/" + std::string(rest);
  }

  // Calls f until the store answers (anything but kUnavailable), logging and
  // counting a pause while it cannot; kUnavailable after store_timeout.
  template <typename F>
  auto Patiently(const char* what, F&& f) -> decltype(f()) {
    const auto deadline = SteadyClock::now() + Millis(o.store_timeout_seconds);
    bool paused = false;
    for (;;) {
      auto r = f();
      if (r || r.error().code() != ErrorCode::kUnavailable) {
        if (paused) spdlog::warn("anxin run: etcd answers again: {} goes on", what);
        return r;
      }
      if (!paused) {
        paused = true;
        ++store_pauses;
        spdlog::warn("anxin run: {}: {}: recovery decisions paused until etcd answers", what,
                     r.error().message());
      }
      if (SteadyClock::now() >= deadline) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  json NodeRecord(int gen) const {
    return {{"node", o.node_id}, {"pid", static_cast<int>(getpid())}, {"address", o.address},
            {"generation", gen}, {"rank_hint", o.node_rank},          {"time", WallNow()}};
  }

  // The generation record: {generation, node, fault_class, summary}, and its
  // revision (0: absent).
  Result<std::pair<json, int64_t>> ReadGeneration(EtcdClient& c) {
    ANXIN_ASSIGN_OR_RETURN(EtcdRange r, c.Get(Key("generation")));
    if (r.kvs.empty()) return std::pair<json, int64_t>(json::object(), 0);
    return std::pair<json, int64_t>(ParseJson(r.kvs[0].value), r.kvs[0].mod_revision);
  }

  // Moves the generation from `from` to from+1 with this fault; returns the
  // generation the job is now at (from+1, or a newer one another node opened).
  Result<int> Bump(EtcdClient& c, int from, const std::string& fault_class,
                   const std::string& summary) {
    for (;;) {
      ANXIN_ASSIGN_OR_RETURN(auto rec, ReadGeneration(c));
      const int cur = rec.first.value("generation", -1);
      if (rec.second != 0 && cur > from) return cur;  // someone was first
      json next = {{"generation", from + 1},
                   {"node", o.node_id},
                   {"fault_class", fault_class},
                   {"summary", summary},
                   {"time", WallNow()}};
      ANXIN_ASSIGN_OR_RETURN(bool won,
                             c.PutIfModRevision(Key("generation"), next.dump(), rec.second));
      if (won) {
        spdlog::warn("anxin run: {} opened generation {}: {}", o.node_id, from + 1, summary);
        return from + 1;
      }
    }
  }

  // ---- Liveness and fencing.

  // The ranks stop this long before the lease can expire at etcd: time for
  // the stop and for the lease's clock at etcd running a little fast.
  double FenceMarginSeconds() const { return std::max(0.5, 0.2 * o.lease_ttl_seconds); }

  // A renewal sent at `sent` succeeded: the ranks may run until TTL - margin
  // after it (etcd counts the TTL from when it got the renewal, later still).
  void Renewed(SteadyClock::time_point sent, double ttl_seconds) {
    if (gate == nullptr) return;
    run::RunLease l;
    l.renewed = sent;
    l.fence_at = sent + Millis(ttl_seconds - FenceMarginSeconds());
    l.expires_at = sent + Millis(ttl_seconds);
    l.holder = fmt::format("{}'s lease at etcd {} (TTL {:g} s)", o.node_id, main_client.Endpoints(),
                           ttl_seconds);
    gate->RunUntil(std::move(l));
  }

  // Renews the lease TTL/3 after the last renewal that succeeded (200 ms
  // after a try that failed), each try bounded by TTL/5 per member, and
  // after each success tells the gate until when the ranks may run. A lease
  // that expired means the others may have counted this node lost: its
  // ranks are fenced at once and it takes a new lease to come back as a
  // rejoining node; nothing of the generation it was in runs on.
  void KeepAliveLoop() {
    EtcdOptions eo = etcd_options;
    eo.timeout = std::min(eo.timeout, Millis(std::max(0.2, o.lease_ttl_seconds / 5.0)));
    EtcdClient c(eo);
    const auto period = Millis(std::max(0.2, o.lease_ttl_seconds / 3.0));
    auto next = SteadyClock::now() + period;
    bool failing = false;
    for (;;) {
      int64_t id;
      {
        std::unique_lock lock(mu);
        if (cv.wait_until(lock, next, [&] { return quit; })) return;
        id = lease;
      }
      const auto sent = SteadyClock::now();
      auto ttl = c.KeepAlive(id);
      if (ttl) {
        if (failing) spdlog::warn("anxin run: {}: etcd renews the lease again", o.node_id);
        failing = false;
        Renewed(sent, std::min(static_cast<double>(*ttl), double(o.lease_ttl_seconds)));
        next = sent + period;
        continue;
      }
      next = SteadyClock::now() + std::chrono::milliseconds(200);
      if (ttl.error().code() != ErrorCode::kNotFound) {
        if (!failing && gate != nullptr) {
          spdlog::warn(
              "anxin run: {}: renewing the lease: {}: the ranks are fenced {:g} s after the last "
              "renewal unless etcd answers first",
              o.node_id, ttl.error().message(), o.lease_ttl_seconds - FenceMarginSeconds());
        }
        failing = true;
        continue;
      }
      if (gate != nullptr) {
        gate->Fence(o.node_id + "'s lease expired at etcd " + c.Endpoints() +
                    ": the other nodes may have counted it lost and gone on without it; its "
                    "ranks are killed and the node rejoins the job");
      }
      spdlog::warn("anxin run: {}: the lease expired; taking a new one to rejoin the job",
                   o.node_id);
      const auto granted = SteadyClock::now();
      auto fresh = c.GrantLease(o.lease_ttl_seconds);
      if (!fresh) continue;
      (void)c.Put(Key("alive/" + o.node_id), NodeRecord(-1).dump(), *fresh);
      {
        std::lock_guard lock(mu);
        lease = *fresh;
      }
      failing = false;
      Renewed(granted, o.lease_ttl_seconds);
      next = granted + period;
    }
  }

  // ---- The watch: a copy of the job's keys.

  // REQUIRES: mu held.
  void ApplyLocked(const EtcdEvent& e) {
    // The lead's wider watch also carries gen/: of those it keeps the done
    // keys only (the ready keys are counted in the barrier).
    const std::string& k = e.kv.key;
    if (k.starts_with(Key("gen/")) && k.find("/done/") == std::string::npos) return;
    if (e.deleted) {
      keys.erase(k);
    } else {
      keys.insert_or_assign(k, e.kv);
    }
    if (k == Key("plan")) {
      plan_copy_gen = e.deleted ? -1 : ParseJson(e.kv.value).value("generation", -1);
    }
    if (k == Key("lead")) {
      leading = !e.deleted && ParseJson(e.kv.value).value("node", "") == o.node_id;
    }
  }

  // REQUIRES: mu held.
  void ResetLocked(const EtcdRange& r, bool with_alive) {
    keys.clear();
    plan_copy_gen = -1;
    leading = false;
    copy_has_alive = with_alive;
    for (const EtcdKv& kv : r.kvs) ApplyLocked(EtcdEvent{.deleted = false, .kv = kv});
    ++keys_seq;
  }

  // Waits up to d for quit; true when quitting.
  bool Rest(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, d, [&] { return quit; });
  }

  // The keys a node's watch covers: PREFIX + generation, lead, plan and
  // stopped, what every node acts on. The alive keys (before "generation")
  // and the per-generation keys under gen/ (ready, done, plans) stay out,
  // so the N writes of a job's start or of a barrier reach etcd's watchers
  // once each, not N times. The lead's watch starts at alive/ instead: it
  // sees nodes come and go, and the done keys, without reading them.
  Result<EtcdRange> ReadWatched(EtcdClient& c, bool lead) {
    ANXIN_ASSIGN_OR_RETURN(EtcdRange r, c.GetRange(Key("generation"), PrefixEnd(prefix)));
    if (!lead) return r;
    // Read after the rest, so that watching from this revision replays
    // whatever changed in between (in order: the copy ends the same).
    ANXIN_ASSIGN_OR_RETURN(EtcdRange alive, c.GetPrefix(Key("alive/")));
    for (EtcdKv& kv : alive.kvs) r.kvs.push_back(std::move(kv));
    return r;
  }

  // The streaming thread: the keys read once, then watched from the next
  // revision on; a watch that breaks is resumed where it stopped, and only
  // a compaction, a failure to watch at all or this node's taking or losing
  // the lead reads them again.
  void StreamLoop() {
    EtcdClient& c = stream_client;
    bool blind = false;
    for (;;) {
      bool lead_range;
      {
        std::lock_guard lock(mu);
        if (quit) break;
        lead_range = leading;
      }
      auto r = ReadWatched(c, lead_range);
      if (!r) {
        if (!blind) {
          blind = true;
          spdlog::warn("anxin run: reading job {}'s keys: {}", o.job, r.error().message());
        }
        if (Rest(Millis(o.poll_seconds))) break;
        continue;
      }
      int64_t next = r->revision + 1;
      bool reread;
      {
        std::lock_guard lock(mu);
        ResetLocked(*r, lead_range);
        reread = leading != lead_range;  // it took or lost the lead before the read
      }
      keys_cv.notify_all();
      if (reread) continue;
      const std::string from = lead_range ? Key("alive/") : Key("generation");
      for (;;) {
        const auto opened = SteadyClock::now();
        bool rewatch = false;
        Status s = c.WatchRange(from, PrefixEnd(prefix), next, [&](const EtcdWatchBatch& b) {
          {
            std::lock_guard lock(mu);
            for (const EtcdEvent& e : b.events) {
              ApplyLocked(e);
              next = std::max(next, e.kv.mod_revision + 1);
            }
            keys_live = true;
            ++keys_seq;
            if (quit) return false;
            rewatch = leading != lead_range;
          }
          keys_cv.notify_all();
          return !rewatch;
        });
        if (rewatch) break;  // the copy stays current: read the other range
        {
          // A stream that stood and ended resumes at once from next: the
          // copy stays current meanwhile. Otherwise the readers fall back
          // to reading the keys until a watch stands again.
          std::lock_guard lock(mu);
          if (!s) {
            keys_live = false;
            ++keys_seq;
          }
          if (quit) break;
        }
        keys_cv.notify_all();
        if (s) {
          if (blind) spdlog::warn("anxin run: watching job {} again", o.job);
          blind = false;
          // A stream that ends at once again and again: do not spin.
          if (SteadyClock::now() - opened < std::chrono::seconds(1) &&
              Rest(Millis(o.poll_seconds))) {
            break;
          }
          continue;  // resume from next
        }
        if (s.error().code() == ErrorCode::kCancelled) break;
        if (s.error().code() != ErrorCode::kAborted && !blind) {
          blind = true;
          spdlog::warn("anxin run: watching job {}: {}: reading its keys every {:g} s meanwhile",
                       o.job, s.error().message(), o.poll_seconds);
        }
        // Read the keys afresh: at once after a compaction, else after a rest.
        if (s.error().code() != ErrorCode::kAborted) (void)Rest(Millis(o.poll_seconds));
        break;
      }
      std::lock_guard lock(mu);
      if (quit) break;
    }
    streamer_running = false;
  }

  // Ends the streaming thread; a watch blocked in a read is woken.
  void StopStreaming() {
    while (streamer_running) {
      stream_client.StopWatch();
      keys_cv.notify_all();
      cv.notify_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (streamer.joinable()) streamer.join();
  }

  // ---- The lead, and judging the others while the ranks run.

  // The lead: one live node, holder of the lead key (under its lease),
  // looks at the other nodes' keys: it finds lost members, and it closes
  // the barriers. The others learn what it decided from the generation and
  // plan keys on their watch, so no node but the lead reads N records.
  // A missing lead key is taken by the first node to try, after a short
  // random wait so that the nodes do not all try at once.
  void MaybeTakeLead(EtcdClient& c, bool present) {
    if (present) {
      lead_missing_since = {};
      return;
    }
    const auto now = SteadyClock::now();
    if (lead_missing_since == SteadyClock::time_point{}) {
      lead_missing_since = now;
      thread_local std::minstd_rand random(std::random_device{}());
      lead_wait = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(random));
      return;
    }
    if (now - lead_missing_since < lead_wait) return;
    lead_missing_since = {};
    (void)TakeLead(c);
  }

  // Puts the lead key if none stands; true when this node took it.
  bool TakeLead(EtcdClient& c) {
    int64_t id;
    {
      std::lock_guard lock(mu);
      id = lease;
    }
    json rec = {{"node", o.node_id}, {"time", WallNow()}};
    auto won = c.PutIfAbsent(Key("lead"), rec.dump(), id);
    if (won && *won) spdlog::info("anxin run: {} leads job {}", o.node_id, o.job);
    return won && *won;
  }

  void WatchLoop() {
    EtcdClient c(etcd_options);
    bool blind = false;
    uint64_t seen_seq = 0;
    int judged_gen = -1;
    for (;;) {
      int gen;
      bool live;
      std::vector<std::string> now_members;
      std::optional<std::string> leader;
      {
        std::unique_lock lock(mu);
        keys_cv.wait_for(lock, Millis(o.poll_seconds), [&] {
          return quit || keys_seq != seen_seq || (running_gen >= 0 && running_gen != judged_gen);
        });
        if (quit) return;
        seen_seq = keys_seq;
        gen = running_gen;
        live = keys_live;
        now_members = members;
        if (live) leader = LeadLocked();
      }
      Status s = Ok();
      if (!live) {
        auto read = c.Get(Key("lead"));
        if (read) {
          if (!read->kvs.empty()) leader = ParseJson(read->kvs[0].value).value("node", "");
        } else {
          s = std::unexpected(read.error());
        }
      }
      if (s) MaybeTakeLead(c, leader.has_value());
      if (gen < 0) continue;  // recovering, or not started: the barrier watches
      const bool lead = leader && *leader == o.node_id;
      if (s && lead && now_members.empty()) now_members = MembersOf(c, gen);
      if (s) s = JudgeTurn(c, gen, now_members, live, lead);
      judged_gen = gen;
      if (!s && !blind) {
        blind = true;
        ++store_pauses;
        spdlog::warn("anxin run: watching generation {}: {}: no decision until etcd answers", gen,
                     s.error().message());
      } else if (s && blind) {
        blind = false;
        spdlog::warn("anxin run: etcd answers again; watching generation {}", gen);
      }
    }
  }

  // The names after prefix of the copy's keys. REQUIRES: mu held.
  std::set<std::string> NamesInCopyLocked(const std::string& prefix) const {
    std::set<std::string> names;
    for (auto it = keys.lower_bound(prefix); it != keys.end() && it->first.starts_with(prefix);
         ++it) {
      names.insert(it->first.substr(prefix.size()));
    }
    return names;
  }

  // The lead key's node in the copy. REQUIRES: mu held.
  std::optional<std::string> LeadLocked() const {
    auto it = keys.find(Key("lead"));
    if (it == keys.end()) return std::nullopt;
    return ParseJson(it->second.value).value("node", "");
  }

  void Report(int gen, std::string fault_class, std::string summary) {
    {
      std::lock_guard lock(mu);
      if (running_gen < 0 || reported_gen >= gen) return;
      reported_gen = gen;
    }
    run::Fault f;
    f.detector = "cluster";
    f.fault_class = std::move(fault_class);
    f.severity = device::Severity::kMajor;
    f.summary = std::move(summary);
    f.seen = RealClock().Now();
    f.wall = f.seen;
    f.detection_seconds = 0;
    if (report) report(std::move(f));
  }

  // What the watcher decides from the generation record, the stopped
  // record and which plan members still have a node (or done) key.
  Status Judge(EtcdClient& c, int gen, const std::vector<std::string>& plan_members,
               const json& generation, const std::optional<json>& stopped,
               const std::set<std::string>* absent) {
    const int cur = generation.value("generation", -1);
    if (cur > gen) {
      const std::string cls = generation.value("fault_class", "");
      Report(cur, cls == "node_lost" ? "node_lost" : "cluster_restart",
             generation.value("node", "?") + " opened generation " + std::to_string(cur) + ": " +
                 generation.value("summary", ""));
      return Ok();
    }
    if (stopped && stopped->value("generation", -1) >= gen &&
        stopped->value("node", "") != o.node_id) {
      Report(gen + 1000000, "fatal_job_stopped",
             stopped->value("node", "?") + " stopped the job: " + stopped->value("why", ""));
      return Ok();
    }
    if (absent == nullptr) return Ok();
    for (const std::string& m : plan_members) {
      if (!absent->contains(m)) continue;
      const std::string summary =
          "node " + m + " is lost: its lease expired (no supervisor keeps it alive)";
      ANXIN_ASSIGN_OR_RETURN(int next, Bump(c, gen, "node_lost", summary));
      if (next == gen + 1) Report(next, "node_lost", summary);
      return Ok();
    }
    return Ok();
  }

  // One turn of judging generation gen: the generation and stopped records
  // from the watch's copy (live) or read; and, on the lead, which members
  // have no alive key and, of those, which did not write done (a node seen
  // done is not read again).
  Status JudgeTurn(EtcdClient& c, int gen, const std::vector<std::string>& plan_members, bool live,
                   bool lead) {
    json generation = json::object();
    std::optional<json> stopped;
    if (live) {
      std::lock_guard lock(mu);
      if (auto it = keys.find(Key("generation")); it != keys.end()) {
        generation = ParseJson(it->second.value);
      }
      if (auto it = keys.find(Key("stopped")); it != keys.end()) {
        stopped = ParseJson(it->second.value);
      }
    } else {
      ANXIN_ASSIGN_OR_RETURN(auto rec, ReadGeneration(c));
      generation = std::move(rec.first);
      ANXIN_ASSIGN_OR_RETURN(EtcdRange st, c.Get(Key("stopped")));
      if (!st.kvs.empty()) stopped = ParseJson(st.kvs[0].value);
    }
    if (!lead) return Judge(c, gen, plan_members, generation, stopped, nullptr);
    if (done_gen != gen) {
      done_gen = gen;
      done_known.clear();
    }
    // The lead's watch carries the alive and done keys; while it is being
    // opened, the alive keys are read (their names, at most once a second).
    const std::string alive_prefix = Key("alive/");
    std::set<std::string> present;
    bool from_copy = false;
    {
      std::lock_guard lock(mu);
      if (live && copy_has_alive) {
        from_copy = true;
        present = NamesInCopyLocked(alive_prefix);
        done_known.merge(NamesInCopyLocked(GenKey(gen, "done/")));
      }
    }
    if (!from_copy) {
      const auto now = SteadyClock::now();
      if (now - alive_read < kAliveReadGap) {
        return Judge(c, gen, plan_members, generation, stopped, nullptr);
      }
      alive_read = now;
      ANXIN_ASSIGN_OR_RETURN(EtcdRange alive, c.GetPrefixKeys(alive_prefix));
      present = NamesUnder(alive, alive_prefix);
    }
    std::set<std::string> absent;
    for (const std::string& m : plan_members) {
      if (!present.contains(m) && !done_known.contains(m)) absent.insert(m);
    }
    // A node without a lease that wrote done finished; it is not lost.
    if (!absent.empty()) {
      const std::string done_prefix = GenKey(gen, "done/");
      ANXIN_ASSIGN_OR_RETURN(EtcdRange done, absent.size() == 1
                                                 ? c.Get(done_prefix + *absent.begin())
                                                 : c.GetPrefixKeys(done_prefix));
      for (const std::string& node : NamesUnder(done, done_prefix)) {
        absent.erase(node);
        done_known.insert(node);
      }
    }
    return Judge(c, gen, plan_members, generation, stopped, &absent);
  }

  // ---- The barrier.

  // The generation a node entering without a fault of its own joins: the
  // current one while its barrier is open, else the next one.
  Result<int> Enter(EtcdClient& c, const std::string& why_class, const std::string& why) {
    for (;;) {
      ANXIN_ASSIGN_OR_RETURN(auto rec, ReadGeneration(c));
      if (rec.second == 0) {
        json first = {{"generation", 0},
                      {"node", o.node_id},
                      {"fault_class", ""},
                      {"summary", "the job starts"},
                      {"time", WallNow()}};
        ANXIN_ASSIGN_OR_RETURN(bool created, c.PutIfAbsent(Key("generation"), first.dump()));
        if (created) return 0;
        continue;
      }
      const int cur = rec.first.value("generation", 0);
      ANXIN_ASSIGN_OR_RETURN(EtcdRange plan, c.Get(GenKey(cur, "plan")));
      if (plan.kvs.empty()) return cur;
      ANXIN_ASSIGN_OR_RETURN(int next, Bump(c, cur, why_class, why));
      if (next > cur) return next;
    }
  }

  // Writes the plan of generation g from the ready records, when the rule
  // says the barrier closes. Losing the race to another node is fine.
  // generation: the generation record as the watch saw it; nullptr: read it.
  // all_alive_ready: every node whose lease is alive is among ready
  // (AllAliveReady).
  // closed: set to generation g's plan once there is one (this node's, or
  // the one that won the race), so the closer adopts it without waiting for
  // its watch and never closes twice.
  Status MaybeClose(EtcdClient& c, int g, const std::vector<Ready>& ready, bool timed_out,
                    bool stop_deadline, const json* generation, bool all_alive_ready,
                    std::optional<std::string>& closed) {
    const int n = static_cast<int>(ready.size());
    json plan = {{"generation", g}, {"by", o.node_id}, {"closed_time", WallNow()}};
    json rec = generation != nullptr ? *generation : json::object();
    if (generation == nullptr) {
      ANXIN_ASSIGN_OR_RETURN(auto read, ReadGeneration(c));
      rec = std::move(read.first);
    }
    if (rec.value("generation", -1) != g) return Ok();  // moved on meanwhile
    plan["fault_node"] = rec.value("node", "");
    plan["fault_class"] = rec.value("fault_class", "");
    if (n >= o.max_nodes || ((timed_out || all_alive_ready) && n >= o.min_nodes)) {
      std::vector<Ready> m = ready;
      std::sort(m.begin(), m.end(), [](const Ready& a, const Ready& b) {
        const int ra = a.rank_hint < 0 ? INT32_MAX : a.rank_hint;
        const int rb = b.rank_hint < 0 ? INT32_MAX : b.rank_hint;
        return ra != rb ? ra < rb : a.node < b.node;
      });
      if (static_cast<int>(m.size()) > o.max_nodes) m.resize(static_cast<size_t>(o.max_nodes));
      // The agreed step: the newest every member holds intact.
      std::set<int64_t> common(m[0].steps.begin(), m[0].steps.end());
      for (size_t i = 1; i < m.size(); ++i) {
        std::set<int64_t> mine(m[i].steps.begin(), m[i].steps.end());
        std::erase_if(common, [&](int64_t s) { return !mine.contains(s); });
      }
      json nodes = json::array();
      json names = json::array();
      for (const Ready& r : m) {
        names.push_back(r.node);
        nodes.push_back({{"node", r.node},
                         {"ready_seconds", r.ready_seconds},
                         {"ready_time", r.ready_time},
                         {"newest_verified", r.steps.empty() ? -1 : r.steps.front()}});
      }
      plan["stop"] = false;
      plan["members"] = names;
      plan["nodes"] = nodes;
      plan["master_addr"] = m[0].address;
      plan["master_port"] = m[0].port;
      plan["agreed_step"] = common.empty() ? -1 : *common.rbegin();
      plan["why"] = n >= o.max_nodes ? "all " + std::to_string(n) + " node(s) ready"
                    : all_alive_ready
                        ? std::to_string(n) + " of " + std::to_string(o.max_nodes) +
                              " node(s) ready and no other node alive: the job shrinks"
                        : std::to_string(n) + " of " + std::to_string(o.max_nodes) +
                              " node(s) reached the barrier in time: the job shrinks";
    } else if (stop_deadline) {
      plan["stop"] = true;
      plan["members"] = json::array();
      plan["why"] = "only " + std::to_string(n) + " node(s) reached the barrier of generation " +
                    std::to_string(g) + " within " +
                    fmt::format("{:g} s", first_barrier ? o.join_timeout_seconds
                                                        : o.barrier_timeout_seconds) +
                    " and the job needs at least " + std::to_string(o.min_nodes) + " (--nnodes)";
    } else {
      return Ok();
    }
    // The generation's plan, and a copy as the job's newest plan, which the
    // nodes' watches carry: every node gets the copy, so it holds the times
    // of the kViewNodes slowest nodes only (each node adds its own), and the
    // copies cost etcd N x the member list, not N x every node's record.
    json copy = plan;
    const bool ranks_apart = plan.contains("members") && static_cast<int>(plan["members"].size()) >
                                                             std::max(1, o.plan_inline_members);
    if (ranks_apart) {
      // Each node's rank under gen/G/rank/BY/NODE (below); the slowest
      // nodes' times carry their ranks.
      copy["members_total"] = plan["members"].size();
      copy.erase("members");
      int rank = 0;
      for (json& n : copy["nodes"]) n["rank"] = rank++;
    }
    if (auto it = copy.find("nodes"); it != copy.end() && it->size() > kViewNodes) {
      std::vector<size_t> order(it->size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return (*it)[a].value("ready_seconds", -1.0) > (*it)[b].value("ready_seconds", -1.0);
      });
      order.resize(kViewNodes);
      std::sort(order.begin(), order.end());
      json slowest = json::array();
      for (size_t i : order) slowest.push_back((*it)[i]);
      copy["nodes_total"] = it->size();
      *it = std::move(slowest);
    }
    if (ranks_apart) {
      // Before the plan, under this closer's name (a second closer, late at
      // a deadline, writes its own and loses the plan's create-only race),
      // so a node that sees the plan finds its rank there at once.
      const auto names = plan["members"].get<std::vector<std::string>>();
      for (size_t i = 0; i < names.size(); i += 100) {
        std::vector<std::pair<std::string, std::string>> batch;
        for (size_t k = i; k < std::min(names.size(), i + 100); ++k) {
          batch.emplace_back(GenKey(g, "rank/" + o.node_id + "/" + names[k]), std::to_string(k));
        }
        ANXIN_TRY(c.PutAll(batch));
      }
    }
    ANXIN_ASSIGN_OR_RETURN(
        bool won, c.PutIfAbsentWith(GenKey(g, "plan"), plan.dump(), Key("plan"), copy.dump()));
    if (won) {
      spdlog::info("anxin run: {} closed the barrier of generation {}", o.node_id, g);
      closed = plan.dump();
      return Ok();
    }
    ANXIN_ASSIGN_OR_RETURN(EtcdRange other, c.Get(GenKey(g, "plan")));
    if (!other.kvs.empty()) closed = other.kvs[0].value;
    return Ok();
  }

  // This node's rank in plan (the watch's copy) and the member list if the
  // copy holds it. A copy without it: the rank from gen/G/rank/BY/NODE,
  // which the closer BY wrote before the plan. rank -1: not a member.
  Result<std::pair<int, std::vector<std::string>>> RankIn(EtcdClient& c, const json& plan, int g) {
    if (plan.contains("members")) {
      auto names = plan.value("members", std::vector<std::string>{});
      const auto it = std::find(names.begin(), names.end(), o.node_id);
      const int rank = it == names.end() ? -1 : static_cast<int>(it - names.begin());
      return std::pair(rank, std::move(names));
    }
    ANXIN_ASSIGN_OR_RETURN(EtcdRange r,
                           c.Get(GenKey(g, "rank/" + plan.value("by", "") + "/" + o.node_id)));
    const int rank = r.kvs.empty() ? -1 : static_cast<int>(ParseInt(r.kvs[0].value).value_or(-1));
    return std::pair(rank, std::vector<std::string>{});
  }

  // The members of generation gen where the watch's copy left them out: one
  // read of gen/G/plan, kept. Empty when not known.
  std::vector<std::string> MembersOf(EtcdClient& c, int gen) {
    {
      std::lock_guard lock(mu);
      if (!members.empty() || !placement || placement->generation != gen) return members;
    }
    auto full = c.Get(GenKey(gen, "plan"));
    if (!full || full->kvs.empty()) return {};
    auto names = ParseJson(full->kvs[0].value).value("members", std::vector<std::string>{});
    std::lock_guard lock(mu);
    if (placement && placement->generation == gen) members = names;
    return names;
  }

  // Adopts plan (a member's view); nullptr result is "from scratch". own:
  // the ready record this node wrote, for its times where the plan (the
  // watch's copy) leaves them out.
  const run::Checkpoint* Adopt(const json& plan, int g, const run::CheckpointScan& local,
                               const Ready& own, int rank, std::vector<std::string> names) {
    Placement p;
    p.generation = g;
    p.nnodes = plan.contains("members_total") ? plan.value("members_total", 0)
                                              : static_cast<int>(names.size());
    p.node_rank = rank;
    p.master_addr = plan.value("master_addr", "");
    p.master_port = plan.value("master_port", 0);
    const int64_t agreed = plan.value("agreed_step", int64_t{-1});
    run::ClusterView v;
    v.fault_node = plan.value("fault_node", "");
    v.fault_class = plan.value("fault_class", "");
    v.generation = g;
    v.agreed_step = agreed;
    v.nnodes = p.nnodes;
    v.store_pauses = store_pauses.load();
    const double closed = plan.value("closed_time", 0.0);
    std::map<std::string, int> rank_of;
    for (size_t i = 0; i < names.size(); ++i) rank_of.emplace(names[i], static_cast<int>(i));
    auto times = [&](const std::string& node, double ready_seconds, double ready_time,
                     int64_t newest) {
      run::ClusterNodeTimes t;
      t.node = node;
      auto r = rank_of.find(node);
      t.node_rank = node == o.node_id ? rank : r == rank_of.end() ? -1 : r->second;
      t.ready_seconds = ready_seconds;
      t.barrier_seconds = std::max(0.0, closed - ready_time);
      t.newest_verified = newest;
      return t;
    };
    bool mine = false;
    for (const json& n : plan.value("nodes", json::array())) {
      v.nodes.push_back(times(n.value("node", ""), n.value("ready_seconds", -1.0),
                              n.value("ready_time", closed),
                              n.value("newest_verified", int64_t{-1})));
      if (n.contains("rank")) v.nodes.back().node_rank = n.value("rank", -1);
      mine |= v.nodes.back().node == o.node_id;
    }
    if (!mine && !plan.value("nodes", json::array()).empty()) {
      v.nodes.push_back(times(o.node_id, own.ready_seconds, own.ready_time,
                              own.steps.empty() ? -1 : own.steps.front()));
      std::stable_sort(v.nodes.begin(), v.nodes.end(),
                       [](const auto& a, const auto& b) { return a.node_rank < b.node_rank; });
    }
    const run::Checkpoint* chosen = nullptr;
    for (const run::Checkpoint& c : local.checkpoints) {
      if (c.valid && c.step == agreed) chosen = &c;
    }
    spdlog::info("anxin run: generation {}: node rank {} of {}, master {}:{}, agreed step {}", g,
                 p.node_rank, p.nnodes, p.master_addr, p.master_port, agreed);
    std::lock_guard lock(mu);
    placement = std::move(p);
    view = std::move(v);
    members = names;
    running_gen = g;
    reported_gen = std::max(reported_gen, g);
    target_gen = -1;
    first_barrier = false;
    return chosen;
  }

  void StopPlacement(int g, std::string why) {
    Placement p;
    p.generation = g;
    p.stop = true;
    p.why = std::move(why);
    std::lock_guard lock(mu);
    placement = std::move(p);
    running_gen = -1;
    target_gen = -1;
  }

  const run::Checkpoint* Barrier(const run::CheckpointScan& local) {
    EtcdClient& c = main_client;
    std::vector<int64_t> steps;
    for (const run::Checkpoint& x : local.checkpoints) {
      if (x.valid && x.step >= 0) steps.push_back(x.step);
    }
    int g;
    Clock::TimePoint seen;
    bool first;
    {
      std::lock_guard lock(mu);
      g = target_gen;
      seen = fault_seen;
      first = first_barrier;
      running_gen = -1;  // the watcher stays quiet: this loop watches now
    }
    const Clock::TimePoint now = RealClock().Now();
    if (seen == Clock::TimePoint{}) seen = now;
    const double ready_seconds = std::chrono::duration<double>(now - seen).count();
    if (g < 0) {
      auto entered = Patiently("joining the job", [&] {
        return Enter(c, first ? "node_joined" : "node_rejoined",
                     "node " + o.node_id + (first ? " joins the job" : " rejoins the job"));
      });
      if (!entered) {
        StopPlacement(-1, "etcd at " + c.Endpoints() + ": " + entered.error().message());
        return nullptr;
      }
      g = *entered;
    }
    auto picked = run::PickFreePort();
    const int port = picked ? *picked : 0;
    const double ready_time = WallNow();
    auto enter_time = SteadyClock::now();
    const double close_after = o.barrier_timeout_seconds;
    const double stop_after = first ? o.join_timeout_seconds : o.barrier_timeout_seconds;
    int written = -1;
    int64_t written_lease = 0;
    std::optional<std::string> closed_plan;  // generation g's plan, once this node has it
    bool closer = true;  // this node counts the ready keys and closes the barrier
    auto last_ready_read = SteadyClock::now();
    const auto store_deadline_span = Millis(o.store_timeout_seconds);
    auto last_answer = SteadyClock::now();
    bool paused = false;
    for (;;) {
      uint64_t seen_seq;
      bool live;
      {
        std::lock_guard lock(mu);
        live = keys_live;
        seen_seq = keys_seq;
      }
      Status s = [&]() -> Status {
        int64_t id;
        {
          std::lock_guard lock(mu);
          id = lease;
        }
        const std::string ready_prefix = GenKey(g, "ready/");
        // Written again under a new lease: the old one took the key with it.
        if (written != g || written_lease != id) {
          json r = {{"generation", g},
                    {"node", o.node_id},
                    {"rank_hint", o.node_rank},
                    {"steps", steps},
                    {"address", o.address},
                    {"port", port},
                    {"ready_seconds", ready_seconds},
                    {"ready_time", ready_time}};
          auto put = c.Put(ready_prefix + o.node_id, r.dump(), id);
          if (!put) return std::unexpected(put.error());
          written = g;
          written_lease = id;
          spdlog::info(
              "anxin run: {} is ready for generation {} (verified steps: {})", o.node_id, g,
              steps.empty() ? std::string("none") : fmt::format("{}", fmt::join(steps, ", ")));
          return Ok();  // read again, with this node in
        }
        const auto now_steady = SteadyClock::now();
        const double waited = std::chrono::duration<double>(now_steady - enter_time).count();
        const bool timed_out = waited >= close_after || waited >= stop_after;
        // The watch carries no ready key: the lead counts them (a number,
        // not N records) and reads them once the barrier can close, then
        // writes the plan; a barrier costs etcd O(N), not every node's read
        // of every ready key. The others read them only when the lead is
        // late: 1 s after the deadline plus up to 3.5 s, by node, so that one
        // of them closes it. While no watch stands every node is a closer.
        if (live) {
          std::lock_guard lock(mu);
          const auto leader = LeadLocked();
          closer = leader && *leader == o.node_id;
        } else {
          closer = true;
        }
        const std::string alive_prefix = Key("alive/");
        if (!closer) {
          const double late_after =
              std::min(close_after, stop_after) + 1.0 +
              0.5 * static_cast<double>(std::hash<std::string>{}(o.node_id) % 8);
          if (waited < late_after || now_steady - last_ready_read < std::chrono::seconds(2)) {
            return Ok();
          }
        } else {
          ANXIN_ASSIGN_OR_RETURN(const int64_t count, c.CountPrefix(ready_prefix));
          bool closable = count >= o.max_nodes || waited >= stop_after ||
                          (waited >= close_after && count >= o.min_nodes);
          if (!closable && !first && count >= o.min_nodes) {
            ANXIN_ASSIGN_OR_RETURN(const int64_t alive, c.CountPrefix(alive_prefix));
            closable = count >= alive;
          }
          if (!closable) return Ok();
        }
        last_ready_read = now_steady;
        ANXIN_ASSIGN_OR_RETURN(EtcdRange readies, c.GetPrefix(ready_prefix));
        std::vector<Ready> ready;
        bool mine = false;
        for (const EtcdKv& kv : readies.kvs) {
          ready.push_back(ReadyFromJson(ParseJson(kv.value)));
          mine |= ready.back().node == o.node_id;
        }
        if (!mine) {
          written = -1;  // gone with a lease: write it again
          return Ok();
        }
        const int count = static_cast<int>(ready.size());
        // A recovery need not wait for a node that is gone: once every node
        // whose lease is alive is ready (and they are at least MIN), waiting
        // longer cannot bring more. The job's first barrier waits for nodes
        // still starting, which hold no lease yet.
        bool alive_ready = false;
        if (!first && count >= o.min_nodes && count < o.max_nodes) {
          ANXIN_ASSIGN_OR_RETURN(EtcdRange a, c.GetPrefixKeys(alive_prefix));
          const std::set<std::string> alive = NamesUnder(a, alive_prefix);
          std::set<std::string> in;
          for (const Ready& r : ready) in.insert(r.node);
          alive_ready = std::includes(in.begin(), in.end(), alive.begin(), alive.end());
        }
        if (count < o.max_nodes && !alive_ready && !timed_out) return Ok();
        std::optional<json> generation;
        if (live) {
          std::lock_guard lock(mu);
          if (auto it = keys.find(Key("generation")); it != keys.end()) {
            generation = ParseJson(it->second.value);
          }
        }
        return MaybeClose(c, g, ready, waited >= close_after, waited >= stop_after,
                          generation ? &*generation : nullptr, alive_ready, closed_plan);
      }();
      if (s) {
        last_answer = SteadyClock::now();
        if (paused) {
          paused = false;
          spdlog::warn("anxin run: etcd answers again: the barrier of generation {} goes on", g);
        }
      } else if (s.error().code() == ErrorCode::kUnavailable) {
        if (!paused) {
          paused = true;
          ++store_pauses;
          spdlog::warn("anxin run: barrier of generation {}: {}: recovery decisions paused", g,
                       s.error().message());
        }
        if (SteadyClock::now() - last_answer > store_deadline_span) {
          StopPlacement(g, "etcd at " + c.Endpoints() + " did not answer for " +
                               fmt::format("{:g} s", o.store_timeout_seconds));
          return nullptr;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      } else {
        spdlog::warn("anxin run: barrier of generation {}: {}", g, s.error().message());
      }
      // The plan, once someone wrote it; a newer generation, once opened.
      auto next = [&]() -> Result<std::optional<const run::Checkpoint*>> {
        std::optional<std::string> plan_text = closed_plan;
        std::optional<json> generation;
        if (plan_text) {
          // This node closed it (or lost the race to write it): at hand.
        } else if (live) {
          std::lock_guard lock(mu);
          // The newest plan; this generation's once it names g.
          if (auto it = keys.find(Key("plan")); it != keys.end() && plan_copy_gen == g) {
            plan_text = it->second.value;
          }
          if (auto it = keys.find(Key("generation")); it != keys.end()) {
            generation = ParseJson(it->second.value);
          }
        } else {
          ANXIN_ASSIGN_OR_RETURN(EtcdRange plan, c.Get(GenKey(g, "plan")));
          if (!plan.kvs.empty()) plan_text = plan.kvs[0].value;
        }
        if (plan_text) {
          json p = ParseJson(*plan_text);
          if (p.value("stop", false)) {
            StopPlacement(g, p.value("why", "the job stops"));
            return std::optional<const run::Checkpoint*>(nullptr);
          }
          ANXIN_ASSIGN_OR_RETURN(auto rank, RankIn(c, p, g));
          if (rank.first >= 0) {
            Ready own;
            own.ready_seconds = ready_seconds;
            own.ready_time = ready_time;
            own.steps = steps;
            return std::optional<const run::Checkpoint*>(
                Adopt(p, g, local, own, rank.first, std::move(rank.second)));
          }
          // Closed without this node: it comes back through the next one.
          ANXIN_ASSIGN_OR_RETURN(
              int opened, Bump(c, g, "node_rejoined", "node " + o.node_id + " rejoins the job"));
          g = opened;
          closed_plan.reset();
          enter_time = SteadyClock::now();
          return std::optional<const run::Checkpoint*>();
        }
        if (!generation) {
          ANXIN_ASSIGN_OR_RETURN(auto rec, ReadGeneration(c));
          generation = rec.first;
        }
        if (const int cur = generation->value("generation", g); cur > g) {
          spdlog::info("anxin run: generation {} opened meanwhile ({}): joining it", cur,
                       generation->value("summary", ""));
          g = cur;
          closed_plan.reset();
          enter_time = SteadyClock::now();
        }
        return std::optional<const run::Checkpoint*>();
      }();
      if (next && *next) {
        return **next;
      }
      if (!next && next.error().code() != ErrorCode::kUnavailable) {
        spdlog::warn("anxin run: barrier of generation {}: {}", g, next.error().message());
      }
      {
        std::lock_guard lock(mu);
        if (placement && placement->stop) return nullptr;
      }
      if (!live) {
        std::this_thread::sleep_for(Millis(o.poll_seconds));
        continue;
      }
      // Until the copy moves, the closer's next read of the ready keys, or
      // the next deadline.
      const double waited = std::chrono::duration<double>(SteadyClock::now() - enter_time).count();
      double until = std::min(close_after, stop_after) - waited;
      if (until <= 0) until = 0.2;
      until = std::min(until, closer ? 0.05 : 0.5);
      std::unique_lock lock(mu);
      keys_cv.wait_for(lock, Millis(until), [&] { return quit || keys_seq != seen_seq; });
      if (quit) return nullptr;
    }
  }
};

EtcdCoordinator::EtcdCoordinator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<EtcdCoordinator>> EtcdCoordinator::Create(ClusterOptions o) {
  if (o.job.empty()) {
    return InvalidArgument("--rdzv-id: a multi-node job needs a job id, the same on every node");
  }
  for (char ch : o.job) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
      return InvalidArgument("--rdzv-id '" + o.job +
                             "': use letters, digits, '-', '_' and '.' only");
    }
  }
  if (o.min_nodes < 1 || o.max_nodes < o.min_nodes) {
    return InvalidArgument("--nnodes: MIN must be 1 or more and not above MAX");
  }
  if (o.node_id.empty()) {
    o.node_id = o.node_rank >= 0 ? "node-" + std::to_string(o.node_rank) : HostName();
  }
  if (o.address.empty()) o.address = HostName();
  auto impl = std::make_unique<Impl>();
  ANXIN_ASSIGN_OR_RETURN(impl->etcd_options.endpoints, ParseEndpoints(o.endpoints));
  EtcdOptions& eo = impl->etcd_options;
  eo.ca_file = o.ca_file;
  eo.cert_file = o.cert_file;
  eo.key_file = o.key_file;
  eo.server_name = o.server_name;
  eo.user = o.user;
  eo.password = o.password;
  eo.watch_idle = Millis(std::max(1.0, o.watch_idle_seconds));
  if (!eo.cert_file.empty() && eo.key_file.empty()) {
    return InvalidArgument("--etcd-cert " + eo.cert_file + " needs its key: give --etcd-key");
  }
  if (eo.cert_file.empty() && !eo.key_file.empty()) {
    return InvalidArgument("--etcd-key " + eo.key_file +
                           " needs its certificate: give --etcd-cert");
  }
  for (const auto& [file, flag] :
       {std::pair{eo.ca_file, "--etcd-cacert"}, std::pair{eo.cert_file, "--etcd-cert"},
        std::pair{eo.key_file, "--etcd-key"}}) {
    if (!file.empty() && access(file.c_str(), R_OK) != 0) {
      return InvalidArgument(std::string(flag) + " " + file + ": cannot read it (" +
                             std::strerror(errno) + ")");
    }
  }
  if (!eo.cert_file.empty()) {
    ANXIN_ASSIGN_OR_RETURN(const int64_t not_after, CertificateNotAfter(eo.cert_file));
    if (not_after <= static_cast<int64_t>(std::time(nullptr))) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "etcd at " + o.endpoints + ": the client certificate " + eo.cert_file +
                           " (--etcd-cert) expired on " +
                           FormatRfc3339(std::chrono::system_clock::from_time_t(
                                             static_cast<std::time_t>(not_after)),
                                         TimePrecision::kSeconds) +
                           ": the members refuse it; renew it");
    }
  }
  impl->main_client = EtcdClient(impl->etcd_options);
  impl->stream_client = EtcdClient(impl->etcd_options);
  Status ping = impl->main_client.Ping();
  if (!ping) {
    if (ping.error().code() == ErrorCode::kUnavailable ||
        ping.error().code() == ErrorCode::kPermissionDenied) {
      return std::unexpected(ping.error());
    }
    return Unavailable("--rdzv-endpoint " + o.endpoints + ": " + ping.error().message());
  }
  impl->prefix = "/anxin/run/" + o.job + "/";
  impl->o = std::move(o);
  return std::unique_ptr<EtcdCoordinator>(new EtcdCoordinator(std::move(impl)));
}

EtcdCoordinator::~EtcdCoordinator() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->quit = true;
  }
  impl_->cv.notify_all();
  impl_->keys_cv.notify_all();
  impl_->StopStreaming();
  if (impl_->keepalive.joinable()) impl_->keepalive.join();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  if (impl_->lease != 0) (void)impl_->main_client.RevokeLease(impl_->lease);
}

const std::string& EtcdCoordinator::node_id() const { return impl_->o.node_id; }

bool EtcdCoordinator::AttachGate(run::RankGate& gate) {
  impl_->gate = &gate;
  return true;
}

Status EtcdCoordinator::Start(run::FaultSink report) {
  Impl& m = *impl_;
  m.report = std::move(report);
  SteadyClock::time_point sent;
  auto lease = m.Patiently("taking a lease", [&] {
    sent = SteadyClock::now();
    return m.main_client.GrantLease(m.o.lease_ttl_seconds);
  });
  if (!lease) return std::unexpected(lease.error());
  m.lease = *lease;
  m.Renewed(sent, m.o.lease_ttl_seconds);
  auto put = m.Patiently("registering the node", [&] {
    return m.main_client.Put(m.Key("alive/" + m.o.node_id), m.NodeRecord(-1).dump(), m.lease);
  });
  if (!put) return std::unexpected(put.error());
  spdlog::info("anxin run: {} joined job {} at etcd {} ({} to {} node(s))", m.o.node_id, m.o.job,
               m.main_client.Endpoints(), m.o.min_nodes, m.o.max_nodes);
  (void)m.TakeLead(m.main_client);  // else the watcher takes it when it is free
  m.keepalive = std::thread([&m] { m.KeepAliveLoop(); });
  if (m.o.watch) {
    m.streamer_running = true;
    m.streamer = std::thread([&m] { m.StreamLoop(); });
  }
  m.watcher = std::thread([&m] { m.WatchLoop(); });
  return Ok();
}

run::Coordinator::Decision EtcdCoordinator::OnFault(const run::Fault& fault,
                                                    const run::RestartState& state) {
  Impl& m = *impl_;
  Decision d = run::LocalCoordinator(m.o.max_restarts, m.o.storm_limit).OnFault(fault, state);
  int running;
  {
    std::lock_guard lock(m.mu);
    running = m.running_gen;
    m.fault_seen = fault.seen == Clock::TimePoint{} ? RealClock().Now() : fault.seen;
    m.running_gen = -1;  // recovering: the barrier watches from here
    m.target_gen = -1;
    // Fenced: the store may be what is away, so nothing is asked of it here.
    // The generation goes on (or went on) without this node; its barrier
    // brings the node back as a rejoining one, in the next generation.
    if (fault.fault_class == run::kFaultLeaseLost) {
      m.first_barrier = false;
      return d;
    }
  }
  if (d.verdict != Verdict::kRestart) return d;
  if (running < 0) return d;  // a restarted supervisor: the barrier finds its generation
  auto next = m.Patiently("opening a generation", [&]() -> Result<int> {
    if (fault.detector == "cluster") {
      // Another node opened it: the watch's copy already holds it.
      {
        std::lock_guard lock(m.mu);
        auto it = m.keys.find(m.Key("generation"));
        if (m.keys_live && it != m.keys.end()) {
          return ParseJson(it->second.value).value("generation", 0);
        }
      }
      ANXIN_ASSIGN_OR_RETURN(auto rec, m.ReadGeneration(m.main_client));
      return rec.first.value("generation", 0);
    }
    return m.Bump(m.main_client, running, fault.fault_class, m.o.node_id + ": " + fault.summary);
  });
  if (!next) {
    d.verdict = Verdict::kGiveUp;
    d.why = next.error().message();
    return d;
  }
  {
    std::lock_guard lock(m.mu);
    m.target_gen = std::max(*next, running + 1);
  }
  d.generation = std::max(*next, running + 1);
  return d;
}

const run::Checkpoint* EtcdCoordinator::AgreeCheckpoint(const run::CheckpointScan& local) {
  return impl_->Barrier(local);
}

std::optional<run::Coordinator::Placement> EtcdCoordinator::Agreed() const {
  std::lock_guard lock(impl_->mu);
  return impl_->placement;
}

std::optional<run::ClusterView> EtcdCoordinator::View() const {
  std::lock_guard lock(impl_->mu);
  return impl_->view;
}

std::optional<std::string> EtcdCoordinator::PeersFinished() {
  Impl& m = *impl_;
  int gen;
  {
    std::lock_guard lock(m.mu);
    if (!m.placement || m.placement->stop) return std::nullopt;
    gen = m.placement->generation;
  }
  // Short: a store that does not answer must not hold up the recovery.
  EtcdOptions quick = m.etcd_options;
  quick.connect_timeout = std::min(quick.connect_timeout, std::chrono::milliseconds(300));
  quick.timeout = std::min(quick.timeout, std::chrono::milliseconds(500));
  EtcdClient c(quick);
  std::vector<std::string> others;
  for (std::string& n : m.MembersOf(c, gen)) {
    if (n != m.o.node_id) others.push_back(std::move(n));
  }
  if (others.empty()) return std::nullopt;
  auto done = c.GetPrefixKeys(m.GenKey(gen, "done/"));
  if (!done) return std::nullopt;
  const std::set<std::string> finished = NamesUnder(*done, m.GenKey(gen, "done/"));
  for (const std::string& n : others) {
    if (!finished.contains(n)) return std::nullopt;
  }
  return fmt::format("{} finished generation {}", fmt::join(others, ", "), gen);
}

void EtcdCoordinator::Finish(int status) {
  Impl& m = *impl_;
  int gen;
  bool stopped_by_plan;
  {
    std::lock_guard lock(m.mu);
    gen = m.placement ? m.placement->generation : -1;
    stopped_by_plan = m.placement && m.placement->stop;
  }
  if (status == 0 && gen >= 0) {
    json done = {{"generation", gen}, {"node", m.o.node_id}, {"status", 0}, {"time", WallNow()}};
    (void)m.main_client.Put(m.GenKey(gen, "done/" + m.o.node_id), done.dump());
  } else if (status != 0 && !stopped_by_plan) {
    json s = {{"generation", std::max(gen, 0)},
              {"node", m.o.node_id},
              {"status", status},
              {"why", "its supervisor ended with status " + std::to_string(status)},
              {"time", WallNow()}};
    (void)m.main_client.Put(m.Key("stopped"), s.dump());
  }
  {
    std::lock_guard lock(m.mu);
    m.quit = true;
    m.running_gen = -1;
  }
  m.cv.notify_all();
  m.keys_cv.notify_all();
  m.StopStreaming();
  if (m.keepalive.joinable()) m.keepalive.join();
  if (m.watcher.joinable()) m.watcher.join();
  if (m.lease != 0) (void)m.main_client.RevokeLease(m.lease);
  m.lease = 0;
}

Result<std::unique_ptr<run::Coordinator>> CreateEtcdCoordinator(const run::ClusterRequest& r) {
  ClusterOptions o;
  o.endpoints = r.endpoints;
  o.job = r.job;
  o.min_nodes = r.min_nodes;
  o.max_nodes = r.max_nodes;
  o.node_rank = r.node_rank;
  o.address = r.address;
  if (r.barrier_timeout_seconds > 0) o.barrier_timeout_seconds = r.barrier_timeout_seconds;
  o.max_restarts = r.max_restarts;
  o.storm_limit = r.storm_limit;
  o.ca_file = r.etcd_ca_file;
  o.cert_file = r.etcd_cert_file;
  o.key_file = r.etcd_key_file;
  o.server_name = r.etcd_server_name;
  o.user = r.etcd_user;
  o.password = r.etcd_password;
  ANXIN_ASSIGN_OR_RETURN(std::unique_ptr<EtcdCoordinator> c, EtcdCoordinator::Create(std::move(o)));
  return std::unique_ptr<run::Coordinator>(std::move(c));
}

}  // namespace anxin::coord
