#include "anxin/netsim/scenario.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::netsim {
namespace {

uint64_t SecondsToPs(double s) { return static_cast<uint64_t>(std::llround(s * 1e12)); }

Result<uint64_t> GetPs(const ConfigNode& n, std::string_view key, uint64_t def) {
  ANXIN_ASSIGN_OR_RETURN(double s, n.GetSeconds(key, static_cast<double>(def) / 1e12));
  if (s > 1e6) return std::unexpected(n.MakeError(std::string(key) + ": longer than 1e6 s"));
  return SecondsToPs(s);
}

Result<double> GetRate(const ConfigNode& n, std::string_view key, double def, bool allow_zero) {
  ANXIN_ASSIGN_OR_RETURN(double v, n.Get<double>(key, def));
  if (!(v > 0) && !(allow_zero && v == 0)) {
    const ConfigNode& at = n.Find(key) ? *n.Find(key) : n;
    return std::unexpected(at.MakeError(std::string(key) + ": a link rate must be above 0 Gbps"));
  }
  if (v > 1e5) {
    return std::unexpected(n.Find(key)->MakeError(std::string(key) + ": above 100000 Gbps"));
  }
  return v;
}

Result<CollKind> ParseCollKind(const ConfigNode& n) {
  ANXIN_ASSIGN_OR_RETURN(std::string op, n.Get<std::string>("op", "all_reduce"));
  std::string k;
  for (char c : op) {
    if (c != '_') k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (k == "allreduce") return CollKind::kAllReduce;
  if (k == "allgather") return CollKind::kAllGather;
  if (k == "reducescatter") return CollKind::kReduceScatter;
  if (k == "alltoall") return CollKind::kAlltoAll;
  return std::unexpected(
      n.Find("op")->MakeError("op: unknown collective '" + op +
                              "' (known: all_reduce, all_gather, reduce_scatter, alltoall)"));
}

Status ParseTopology(const ConfigNode& t, TopologySpec& spec) {
  ANXIN_TRY(t.CheckKeys({"kind", "hosts", "hosts_per_leaf", "spines", "oversubscription", "rails",
                         "k", "switch_ports", "link_gbps", "uplink_gbps", "delay"}));
  ANXIN_ASSIGN_OR_RETURN(std::string kind, t.Get<std::string>("kind", "leaf_spine"));
  if (kind == "star") {
    spec.kind = TopologyKind::kStar;
  } else if (kind == "leaf_spine") {
    spec.kind = TopologyKind::kLeafSpine;
  } else if (kind == "rail") {
    spec.kind = TopologyKind::kRail;
  } else if (kind == "fat_tree") {
    spec.kind = TopologyKind::kFatTree;
  } else {
    return std::unexpected(t.Find("kind")->MakeError(
        "kind: unknown topology '" + kind + "' (known: star, leaf_spine, rail, fat_tree)"));
  }
  ANXIN_ASSIGN_OR_RETURN(spec.hosts, t.GetInRange<int>("hosts", 2, 1 << 16, spec.hosts));
  ANXIN_ASSIGN_OR_RETURN(spec.hosts_per_leaf,
                         t.GetInRange<int>("hosts_per_leaf", 1, 4096, spec.hosts_per_leaf));
  ANXIN_ASSIGN_OR_RETURN(spec.spines, t.GetInRange<int>("spines", 0, 4096, spec.spines));
  ANXIN_ASSIGN_OR_RETURN(spec.oversubscription,
                         t.Get<double>("oversubscription", spec.oversubscription));
  if (!(spec.oversubscription >= 0.1 && spec.oversubscription <= 64)) {
    return std::unexpected(
        t.Find("oversubscription")->MakeError("oversubscription: must be in [0.1, 64]"));
  }
  ANXIN_ASSIGN_OR_RETURN(spec.rails, t.GetInRange<int>("rails", 1, 64, spec.rails));
  ANXIN_ASSIGN_OR_RETURN(spec.k, t.GetInRange<int>("k", 2, 128, spec.k));
  if (spec.k % 2 != 0) return std::unexpected(t.Find("k")->MakeError("k: must be even"));
  ANXIN_ASSIGN_OR_RETURN(spec.switch_ports,
                         t.GetInRange<int>("switch_ports", 2, 4096, spec.switch_ports));
  ANXIN_ASSIGN_OR_RETURN(spec.link_gbps, GetRate(t, "link_gbps", spec.link_gbps, false));
  ANXIN_ASSIGN_OR_RETURN(spec.uplink_gbps, GetRate(t, "uplink_gbps", spec.uplink_gbps, true));
  ANXIN_ASSIGN_OR_RETURN(spec.delay_ps, GetPs(t, "delay", spec.delay_ps));
  // Radix checks here, where the file position is known.
  const int hpl = spec.hosts_per_leaf;
  auto ports_error = [&](const std::string& what) { return std::unexpected(t.MakeError(what)); };
  if (spec.kind == TopologyKind::kStar && spec.hosts > spec.switch_ports) {
    return ports_error("a star of " + std::to_string(spec.hosts) + " hosts needs a switch with " +
                       std::to_string(spec.hosts) + " ports, but switch_ports is " +
                       std::to_string(spec.switch_ports) + ": use leaf_spine or fat_tree");
  }
  if (spec.kind == TopologyKind::kLeafSpine || spec.kind == TopologyKind::kRail) {
    if (spec.kind == TopologyKind::kRail && spec.hosts % spec.rails != 0) {
      return ports_error("rail: hosts (" + std::to_string(spec.hosts) +
                         ") must be a multiple of rails (" + std::to_string(spec.rails) + ")");
    }
    const double down = hpl * spec.link_gbps;
    const double up_rate = spec.uplink_gbps > 0 ? spec.uplink_gbps : spec.link_gbps;
    int spines = spec.spines;
    if (spines == 0) {
      spines =
          std::max(1, static_cast<int>(std::ceil(down / (spec.oversubscription * up_rate) - 1e-9)));
    }
    const int per_plane = spec.kind == TopologyKind::kRail ? spec.hosts / spec.rails : spec.hosts;
    const int leaves = spec.kind == TopologyKind::kRail ? spec.rails * ((per_plane + hpl - 1) / hpl)
                                                        : (spec.hosts + hpl - 1) / hpl;
    if (hpl + spines > spec.switch_ports) {
      return ports_error("a leaf needs " + std::to_string(hpl) + " host ports + " +
                         std::to_string(spines) + " spine ports = " + std::to_string(hpl + spines) +
                         ", more than switch_ports " + std::to_string(spec.switch_ports) +
                         ": lower hosts_per_leaf or spines, or raise oversubscription");
    }
    if (leaves > 1 && leaves > spec.switch_ports) {
      return ports_error("each spine needs one port per leaf (" + std::to_string(leaves) +
                         "), more than switch_ports " + std::to_string(spec.switch_ports) +
                         ": use fat_tree or more hosts_per_leaf");
    }
  }
  if (spec.kind == TopologyKind::kFatTree) {
    if (spec.k > spec.switch_ports) {
      return ports_error("fat_tree k=" + std::to_string(spec.k) + " needs " +
                         std::to_string(spec.k) + "-port switches, but switch_ports is " +
                         std::to_string(spec.switch_ports));
    }
    const int most = spec.k * spec.k * spec.k / 4;
    if (spec.hosts > most) {
      return ports_error("fat_tree k=" + std::to_string(spec.k) + " holds " + std::to_string(most) +
                         " hosts, not " + std::to_string(spec.hosts) + ": raise k");
    }
  }
  return Ok();
}

Status ParseQueue(const ConfigNode& q, Scenario& s, uint64_t buffer,
                  std::array<bool, kPriorities>& pfc_given) {
  ANXIN_TRY(q.CheckKeys({"priority", "strict", "ets_weight", "pfc", "ecn"}));
  ANXIN_ASSIGN_OR_RETURN(int prio, q.GetInRange<int>("priority", 0, kPriorities - 1));
  QueueSpec& spec = s.queues[static_cast<size_t>(prio)];
  pfc_given[static_cast<size_t>(prio)] = q.Find("pfc").has_value();
  ANXIN_ASSIGN_OR_RETURN(spec.strict, q.Get<bool>("strict", false));
  ANXIN_ASSIGN_OR_RETURN(spec.ets_weight, q.GetInRange<int>("ets_weight", 0, 100, 0));
  if (auto pfc = q.Find("pfc")) {
    if (pfc->IsScalar()) {
      ANXIN_ASSIGN_OR_RETURN(spec.pfc, pfc->As<bool>());
      if (spec.pfc) {
        spec.xoff_bytes = 256 << 10;
        spec.xon_bytes = 128 << 10;
      }
    } else {
      ANXIN_TRY(pfc->CheckKeys({"xoff", "xon"}));
      spec.pfc = true;
      ANXIN_ASSIGN_OR_RETURN(spec.xoff_bytes, pfc->GetBytes("xoff", 256 << 10));
      ANXIN_ASSIGN_OR_RETURN(spec.xon_bytes, pfc->GetBytes("xon", spec.xoff_bytes / 2));
      if (spec.xon_bytes >= spec.xoff_bytes) {
        return std::unexpected(pfc->MakeError("xon (" + std::to_string(spec.xon_bytes) +
                                              " B) must be below xoff (" +
                                              std::to_string(spec.xoff_bytes) + " B)"));
      }
      if (spec.xoff_bytes > buffer) {
        return std::unexpected(pfc->MakeError("xoff is larger than the switch buffer"));
      }
    }
  }
  if (auto ecn = q.Find("ecn")) {
    if (ecn->IsScalar()) {
      ANXIN_ASSIGN_OR_RETURN(spec.ecn, ecn->As<bool>());
      if (spec.ecn) {
        spec.kmin_bytes = 100 << 10;
        spec.kmax_bytes = 400 << 10;
        spec.pmax = 0.2;
      }
    } else {
      ANXIN_TRY(ecn->CheckKeys({"kmin", "kmax", "pmax"}));
      spec.ecn = true;
      ANXIN_ASSIGN_OR_RETURN(spec.kmin_bytes, ecn->GetBytes("kmin", 100 << 10));
      ANXIN_ASSIGN_OR_RETURN(spec.kmax_bytes, ecn->GetBytes("kmax", 400 << 10));
      ANXIN_ASSIGN_OR_RETURN(spec.pmax, ecn->Get<double>("pmax", 0.2));
      if (spec.kmin_bytes >= spec.kmax_bytes) {
        return std::unexpected(ecn->MakeError("kmin must be below kmax"));
      }
      if (!(spec.pmax > 0 && spec.pmax <= 1)) {
        return std::unexpected(ecn->MakeError("pmax must be in (0, 1]"));
      }
    }
  }
  return Ok();
}

void SetPfc(QueueSpec& q, bool on) {
  q.pfc = on;
  q.xoff_bytes = on ? 256 << 10 : 0;
  q.xon_bytes = on ? 128 << 10 : 0;
}
void SetEcn(QueueSpec& q) {
  q.ecn = true;
  q.kmin_bytes = 100 << 10;
  q.kmax_bytes = 400 << 10;
  q.pmax = 0.2;
}

// switch.qos_from: the DSCP map and PFC priorities of a host from its
// `anxin doctor --json` report. Keys the scenario sets itself win (each is
// listed in HostQos::overrides): dscp_to_priority entries, and a queue's pfc.
Status ApplyQosFrom(const ConfigNode& n, Scenario& s, const ScenarioFileReader& read,
                    bool queues_given, const std::array<bool, kPriorities>& pfc_given) {
  std::string file;
  std::string kinds = "auto";
  if (n.IsScalar()) {
    ANXIN_ASSIGN_OR_RETURN(file, n.As<std::string>());
  } else {
    ANXIN_TRY(n.CheckKeys({"file", "ports"}));
    ANXIN_ASSIGN_OR_RETURN(file, n.Get<std::string>("file"));
    ANXIN_ASSIGN_OR_RETURN(kinds, n.Get<std::string>("ports", kinds));
    if (kinds != "auto" && kinds != "nic" && kinds != "npu") {
      return std::unexpected(
          n.Find("ports")->MakeError("ports: '" + kinds + "' is not auto, nic or npu"));
    }
  }
  if (file.empty()) {
    return std::unexpected(n.MakeError("the path of a saved `anxin doctor --json` report"));
  }
  std::filesystem::path path(file);
  if (path.is_relative()) path = std::filesystem::path(s.source).parent_path() / path;
  const std::string resolved = path.lexically_normal().string();
  auto text = read ? read(resolved) : ReadFile(resolved, 16u << 20);
  if (!text) return std::unexpected(n.MakeError(text.error().message()));
  auto q = ParseHostQos(*text, kinds);
  if (!q) return std::unexpected(n.MakeError(resolved + ": " + q.error().message()));
  q->file = resolved;
  // The host's map, then the scenario's own entries over it.
  std::map<int, int> map = q->dscp_to_priority;
  for (const auto& [dscp, prio] : s.dscp_to_priority) {
    auto it = q->dscp_to_priority.find(dscp);
    const int host = it != q->dscp_to_priority.end() ? it->second : (dscp >> 3) & 7;
    if (host != prio) {
      q->overrides.push_back("DSCP " + std::to_string(dscp) + " -> priority " +
                             std::to_string(prio) + " (host: " + std::to_string(host) + ")");
    }
    map[dscp] = prio;
  }
  s.dscp_to_priority = std::move(map);
  if (!queues_given) {
    // No queues of its own: the host's PFC priorities, each with ECN as the
    // default scenario's lossless queue has it.
    s.queues = {};
    for (size_t p = 0; p < kPriorities; ++p) {
      if (!q->pfc[p]) continue;
      SetPfc(s.queues[p], true);
      SetEcn(s.queues[p]);
    }
  } else {
    for (size_t p = 0; p < kPriorities; ++p) {
      if (!pfc_given[p]) {
        SetPfc(s.queues[p], q->pfc[p]);
      } else if (s.queues[p].pfc != q->pfc[p]) {
        q->overrides.push_back("priority " + std::to_string(p) + " PFC " +
                               (s.queues[p].pfc ? "on" : "off") +
                               " (host: " + (q->pfc[p] ? "on" : "off") + ")");
      }
    }
  }
  s.qos_from = *std::move(q);
  return Ok();
}

Status ParseSwitch(const ConfigNode& sw, Scenario& s, const ScenarioFileReader& read) {
  ANXIN_TRY(sw.CheckKeys({"buffer", "queues", "dscp_to_priority", "rto", "storm", "qos_from"}));
  ANXIN_ASSIGN_OR_RETURN(s.buffer_bytes, sw.GetBytes("buffer", s.buffer_bytes));
  if (s.buffer_bytes < 64 * 1024) {
    return std::unexpected(sw.Find("buffer")->MakeError("buffer: at least 64KiB"));
  }
  ANXIN_ASSIGN_OR_RETURN(s.rto_ps, GetPs(sw, "rto", s.rto_ps));
  ANXIN_ASSIGN_OR_RETURN(s.storm_ps, GetPs(sw, "storm", s.storm_ps));
  std::array<bool, kPriorities> pfc_given{};
  const bool queues_given = sw.Find("queues").has_value();
  if (auto queues = sw.Find("queues")) {
    s.queues = {};
    ANXIN_ASSIGN_OR_RETURN(auto list, queues->Elements());
    for (const ConfigNode& q : list) ANXIN_TRY(ParseQueue(q, s, s.buffer_bytes, pfc_given));
  }
  if (auto map = sw.Find("dscp_to_priority")) {
    s.dscp_to_priority.clear();
    ANXIN_ASSIGN_OR_RETURN(auto entries, map->Entries());
    for (const auto& [key, value] : entries) {
      auto dscp = ParseInt(key);
      if (!dscp || *dscp < 0 || *dscp > 63) {
        return std::unexpected(value.MakeError("DSCP '" + key + "' is not in 0..63"));
      }
      ANXIN_ASSIGN_OR_RETURN(int prio, value.As<int>());
      if (prio < 0 || prio >= kPriorities) {
        return std::unexpected(value.MakeError("priority must be in 0..7"));
      }
      s.dscp_to_priority[static_cast<int>(*dscp)] = prio;
    }
  }
  if (auto qf = sw.Find("qos_from")) ANXIN_TRY(ApplyQosFrom(*qf, s, read, queues_given, pfc_given));
  return Ok();
}

Status ParseDcqcn(const ConfigNode& d, DcqcnSpec& spec) {
  ANXIN_TRY(d.CheckKeys({"enabled", "g", "alpha_timer", "increase_timer", "cnp_interval",
                         "rai_gbps", "min_rate_gbps", "fast_recovery_steps", "cnp_dscp"}));
  ANXIN_ASSIGN_OR_RETURN(spec.enabled, d.Get<bool>("enabled", true));
  ANXIN_ASSIGN_OR_RETURN(spec.g, d.Get<double>("g", spec.g));
  if (!(spec.g > 0 && spec.g <= 1)) return std::unexpected(d.MakeError("g must be in (0, 1]"));
  ANXIN_ASSIGN_OR_RETURN(spec.alpha_timer_ps, GetPs(d, "alpha_timer", spec.alpha_timer_ps));
  ANXIN_ASSIGN_OR_RETURN(spec.increase_timer_ps,
                         GetPs(d, "increase_timer", spec.increase_timer_ps));
  ANXIN_ASSIGN_OR_RETURN(spec.cnp_interval_ps, GetPs(d, "cnp_interval", spec.cnp_interval_ps));
  if (spec.alpha_timer_ps == 0 || spec.increase_timer_ps == 0) {
    return std::unexpected(d.MakeError("the DCQCN timers must be above 0"));
  }
  ANXIN_ASSIGN_OR_RETURN(spec.rai_gbps, GetRate(d, "rai_gbps", spec.rai_gbps, false));
  ANXIN_ASSIGN_OR_RETURN(spec.min_rate_gbps,
                         GetRate(d, "min_rate_gbps", spec.min_rate_gbps, false));
  ANXIN_ASSIGN_OR_RETURN(spec.fast_recovery_steps, d.GetInRange<int>("fast_recovery_steps", 0, 100,
                                                                     spec.fast_recovery_steps));
  ANXIN_ASSIGN_OR_RETURN(spec.cnp_dscp, d.GetInRange<int>("cnp_dscp", 0, 63, spec.cnp_dscp));
  return Ok();
}

// A traffic item's dscp: 0..63, or `job`: the DSCP the host report of
// switch.qos_from says the job's collectives use (HCCL_RDMA_TC, NCCL_IB_TC).
Result<int> GetDscp(const ConfigNode& item, const Scenario& s, int def) {
  auto d = item.Find("dscp");
  if (!d || !d->IsScalar() || d->ScalarText() != "job") {
    return item.GetInRange<int>("dscp", 0, 63, def);
  }
  if (!s.qos_from) {
    return std::unexpected(
        d->MakeError("dscp: job needs switch.qos_from (the host report it comes from)"));
  }
  if (!s.qos_from->job_dscp) {
    return std::unexpected(
        d->MakeError("dscp: job: " + s.qos_from->file + ": " + s.qos_from->job_dscp_error));
  }
  return *s.qos_from->job_dscp;
}

Status ParseTraffic(const ConfigNode& t, Scenario& s) {
  ANXIN_TRY(t.CheckKeys({"collectives", "control", "flows", "incast", "serial"}));
  ANXIN_ASSIGN_OR_RETURN(s.serial, t.Get<bool>("serial", false));
  if (auto list = t.Find("collectives")) {
    ANXIN_ASSIGN_OR_RETURN(auto items, list->Elements());
    for (const ConfigNode& c : items) {
      ANXIN_TRY(c.CheckKeys({"op", "algo", "bytes", "ranks", "dscp", "start", "repeat", "chunk",
                             "name", "handshake", "control_dscp"}));
      CollectiveSpec spec;
      ANXIN_ASSIGN_OR_RETURN(spec.op, ParseCollKind(c));
      ANXIN_ASSIGN_OR_RETURN(std::string algo, c.Get<std::string>("algo", "ring"));
      auto a = ParseAlgo(algo);
      if (!a) return std::unexpected(c.Find("algo")->MakeError(a.error().message()));
      spec.algo = *a;
      ANXIN_ASSIGN_OR_RETURN(spec.bytes, c.GetBytes("bytes", spec.bytes));
      if (spec.bytes == 0) return std::unexpected(c.Find("bytes")->MakeError("bytes: above 0"));
      ANXIN_ASSIGN_OR_RETURN(spec.ranks, c.GetInRange<int>("ranks", 0, 1 << 16, 0));
      if (spec.ranks > s.topology.hosts) {
        return std::unexpected(c.Find("ranks")->MakeError(
            "ranks: " + std::to_string(spec.ranks) + " is more than the topology's " +
            std::to_string(s.topology.hosts) + " hosts"));
      }
      if (spec.ranks == 1) return std::unexpected(c.Find("ranks")->MakeError("ranks: at least 2"));
      ANXIN_ASSIGN_OR_RETURN(spec.dscp, GetDscp(c, s, spec.dscp));
      ANXIN_ASSIGN_OR_RETURN(spec.start_ps, GetPs(c, "start", 0));
      ANXIN_ASSIGN_OR_RETURN(spec.repeat, c.GetInRange<int>("repeat", 1, 100000, 1));
      if (auto ch = c.Find("chunk"); ch && !(ch->IsScalar() && ch->ScalarText() == "auto")) {
        ANXIN_ASSIGN_OR_RETURN(spec.chunk_bytes, ch->AsBytes());
        if (spec.chunk_bytes == 0) {
          return std::unexpected(ch->MakeError("chunk: above 0 (or auto: NCCL's choice)"));
        }
      }
      ANXIN_ASSIGN_OR_RETURN(spec.name, c.Get<std::string>("name", ""));
      ANXIN_ASSIGN_OR_RETURN(spec.handshake_bytes, c.GetBytes("handshake", 0));
      ANXIN_ASSIGN_OR_RETURN(spec.control_dscp,
                             c.GetInRange<int>("control_dscp", 0, 63, spec.control_dscp));
      s.collectives.push_back(spec);
    }
  }
  if (auto list = t.Find("control")) {
    ANXIN_ASSIGN_OR_RETURN(auto items, list->Elements());
    for (const ConfigNode& c : items) {
      ANXIN_TRY(c.CheckKeys({"bytes", "interval", "dscp", "count"}));
      ControlSpec spec;
      ANXIN_ASSIGN_OR_RETURN(spec.bytes, c.GetBytes("bytes", spec.bytes));
      ANXIN_ASSIGN_OR_RETURN(spec.interval_ps, GetPs(c, "interval", spec.interval_ps));
      if (spec.bytes == 0 || spec.interval_ps == 0) {
        return std::unexpected(c.MakeError("bytes and interval must be above 0"));
      }
      ANXIN_ASSIGN_OR_RETURN(spec.dscp, c.GetInRange<int>("dscp", 0, 63, spec.dscp));
      ANXIN_ASSIGN_OR_RETURN(spec.count, c.GetInRange<int>("count", 0, 100'000'000, 0));
      s.control.push_back(spec);
    }
  }
  auto check_host = [&](const ConfigNode& at, int h, const char* what) -> Status {
    if (h < 0 || h >= s.topology.hosts) {
      return std::unexpected(at.MakeError(std::string(what) + ": host " + std::to_string(h) +
                                          " does not exist (0.." +
                                          std::to_string(s.topology.hosts - 1) + ")"));
    }
    return Ok();
  };
  if (auto list = t.Find("flows")) {
    ANXIN_ASSIGN_OR_RETURN(auto items, list->Elements());
    for (const ConfigNode& c : items) {
      ANXIN_TRY(c.CheckKeys({"src", "dst", "bytes", "dscp", "start"}));
      FlowSpec f;
      ANXIN_ASSIGN_OR_RETURN(f.src, c.Get<int>("src"));
      ANXIN_ASSIGN_OR_RETURN(f.dst, c.Get<int>("dst"));
      ANXIN_TRY(check_host(c, f.src, "src"));
      ANXIN_TRY(check_host(c, f.dst, "dst"));
      if (f.src == f.dst) return std::unexpected(c.MakeError("src and dst are the same host"));
      ANXIN_ASSIGN_OR_RETURN(f.bytes, c.GetBytes("bytes", f.bytes));
      if (f.bytes == 0) return std::unexpected(c.MakeError("bytes: above 0"));
      ANXIN_ASSIGN_OR_RETURN(f.dscp, GetDscp(c, s, 0));
      ANXIN_ASSIGN_OR_RETURN(f.start_ps, GetPs(c, "start", 0));
      s.flows.push_back(f);
    }
  }
  if (auto c = t.Find("incast")) {
    ANXIN_TRY(c->CheckKeys({"senders", "dst", "bytes", "dscp", "start"}));
    ANXIN_ASSIGN_OR_RETURN(int senders, c->GetInRange<int>("senders", 1, 1 << 16));
    ANXIN_ASSIGN_OR_RETURN(int dst, c->Get<int>("dst", 0));
    ANXIN_TRY(check_host(*c, dst, "dst"));
    if (senders >= s.topology.hosts) {
      return std::unexpected(c->MakeError("senders: at most hosts - 1 (" +
                                          std::to_string(s.topology.hosts - 1) + ")"));
    }
    ANXIN_ASSIGN_OR_RETURN(uint64_t bytes, c->GetBytes("bytes", 1 << 20));
    if (bytes == 0) return std::unexpected(c->MakeError("bytes: above 0"));
    ANXIN_ASSIGN_OR_RETURN(int dscp, GetDscp(*c, s, 26));
    ANXIN_ASSIGN_OR_RETURN(uint64_t start, GetPs(*c, "start", 0));
    // Senders from the far end of the host list, so they sit under other leaves.
    for (int i = 0, h = s.topology.hosts - 1; i < senders; --h) {
      if (h == dst) continue;
      s.flows.push_back(FlowSpec{h, dst, bytes, dscp, start});
      ++i;
    }
  }
  return Ok();
}

}  // namespace

std::string_view TopologyName(TopologyKind k) {
  switch (k) {
    case TopologyKind::kStar:
      return "star";
    case TopologyKind::kLeafSpine:
      return "leaf_spine";
    case TopologyKind::kRail:
      return "rail";
    case TopologyKind::kFatTree:
      return "fat_tree";
  }
  return "?";
}

std::string_view AlgoName(CollAlgo a) {
  switch (a) {
    case CollAlgo::kRing:
      return "ring";
    case CollAlgo::kTree:
      return "tree";
    case CollAlgo::kHalvingDoubling:
      return "hd";
    case CollAlgo::kPairwise:
      return "pairwise";
  }
  return "?";
}

Result<CollAlgo> ParseAlgo(std::string_view name) {
  if (name == "ring") return CollAlgo::kRing;
  if (name == "tree" || name == "dbtree" || name == "double_binary_tree") return CollAlgo::kTree;
  if (name == "hd" || name == "halving_doubling" || name == "recursive_halving_doubling") {
    return CollAlgo::kHalvingDoubling;
  }
  if (name == "pairwise" || name == "direct") return CollAlgo::kPairwise;
  return InvalidArgument("algo: unknown algorithm '" + std::string(name) +
                         "' (known: ring, tree, hd, pairwise)");
}

std::string_view CollName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce:
      return "all_reduce";
    case CollKind::kAllGather:
      return "all_gather";
    case CollKind::kReduceScatter:
      return "reduce_scatter";
    case CollKind::kAlltoAll:
      return "alltoall";
  }
  return "?";
}

int Scenario::PriorityOfDscp(int dscp) const {
  auto it = dscp_to_priority.find(dscp);
  return it != dscp_to_priority.end() ? it->second : (dscp >> 3) & 7;
}

Scenario DefaultScenario() {
  Scenario s;
  QueueSpec& data = s.queues[3];
  data.pfc = true;
  data.xoff_bytes = 256 << 10;
  data.xon_bytes = 128 << 10;
  data.ecn = true;
  data.kmin_bytes = 100 << 10;
  data.kmax_bytes = 400 << 10;
  data.pmax = 0.2;
  return s;
}

Status ValidateScenario(const Scenario& s) {
  if (s.topology.hosts < 2) return InvalidArgument("topology.hosts: at least 2");
  if (!(s.topology.link_gbps > 0)) return InvalidArgument("topology.link_gbps: above 0");
  if (s.mtu < 64 || s.mtu > 65536) return InvalidArgument("nic.mtu: in 64..65536");
  if (s.train_packets < 1 || s.train_packets > 1024) {
    return InvalidArgument("nic.train_packets: in 1..1024");
  }
  for (int p = 0; p < kPriorities; ++p) {
    const QueueSpec& q = s.queues[static_cast<size_t>(p)];
    if (q.pfc && q.xon_bytes >= q.xoff_bytes) {
      return InvalidArgument("priority " + std::to_string(p) + ": xon must be below xoff");
    }
    if (q.ecn && q.kmin_bytes >= q.kmax_bytes) {
      return InvalidArgument("priority " + std::to_string(p) + ": kmin must be below kmax");
    }
  }
  for (const auto& c : s.collectives) {
    if (c.ranks > s.topology.hosts) {
      return InvalidArgument("a collective has more ranks than the topology has hosts");
    }
  }
  return Ok();
}

Result<Scenario> ParseScenario(std::string_view yaml, const std::string& name,
                               const ScenarioFileReader& read_file) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(yaml, name));
  ANXIN_TRY(root.CheckKeys({"seed", "topology", "nic", "switch", "dcqcn", "traffic", "limits"}));
  Scenario s = DefaultScenario();
  s.source = name;
  ANXIN_ASSIGN_OR_RETURN(s.seed, root.Get<uint64_t>("seed", 1));
  if (auto t = root.Find("topology")) ANXIN_TRY(ParseTopology(*t, s.topology));
  if (auto n = root.Find("nic")) {
    ANXIN_TRY(n->CheckKeys({"mtu", "header_bytes", "train_packets"}));
    ANXIN_ASSIGN_OR_RETURN(s.mtu, n->GetInRange<unsigned>("mtu", 64, 65536, s.mtu));
    ANXIN_ASSIGN_OR_RETURN(s.header_bytes,
                           n->GetInRange<unsigned>("header_bytes", 0, 512, s.header_bytes));
    ANXIN_ASSIGN_OR_RETURN(s.train_packets,
                           n->GetInRange<unsigned>("train_packets", 1, 1024, s.train_packets));
  }
  if (auto sw = root.Find("switch")) ANXIN_TRY(ParseSwitch(*sw, s, read_file));
  if (auto d = root.Find("dcqcn")) ANXIN_TRY(ParseDcqcn(*d, s.dcqcn));
  if (auto t = root.Find("traffic")) ANXIN_TRY(ParseTraffic(*t, s));
  if (auto l = root.Find("limits")) {
    ANXIN_TRY(l->CheckKeys({"max_events", "max_memory", "max_sim_time"}));
    ANXIN_ASSIGN_OR_RETURN(s.limits.max_events,
                           l->Get<uint64_t>("max_events", s.limits.max_events));
    ANXIN_ASSIGN_OR_RETURN(s.limits.max_memory, l->GetBytes("max_memory", s.limits.max_memory));
    ANXIN_ASSIGN_OR_RETURN(s.limits.max_sim_ps, GetPs(*l, "max_sim_time", s.limits.max_sim_ps));
  }
  if (s.collectives.empty() && s.flows.empty()) {
    return std::unexpected(root.MakeError(
        "traffic: nothing to run; add traffic.collectives, traffic.flows or traffic.incast"));
  }
  ANXIN_TRY(ValidateScenario(s));
  return s;
}

Result<Scenario> LoadScenario(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 16u << 20));
  return ParseScenario(text, path);
}

}  // namespace anxin::netsim
