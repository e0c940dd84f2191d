#include "anxin/netsim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "anxin/base/strings.h"
#include "anxin/comm/format.h"
#include "anxin/comm/stats.h"

namespace anxin::netsim {
namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

std::string Bytes(uint64_t b) { return FormatBytes(b, ByteUnits::kExact); }

std::string FormatHostQos(const HostQos& q) {
  std::string out = fmt::format(
      "# QoS from {} (host {}, {} {} port{}): PFC on priority {}; DSCP -> priority {} (others "
      "DSCP >> 3)\n",
      q.file, q.host.empty() ? "?" : q.host, q.ports.size(), q.kinds,
      q.ports.size() == 1 ? "" : "s", FormatPfc(q.pfc), FormatDscpMap(q.dscp_to_priority));
  if (q.job_dscp) {
    auto it = q.dscp_to_priority.find(*q.job_dscp);
    const int prio = it != q.dscp_to_priority.end() ? it->second : (*q.job_dscp >> 3) & 7;
    out += fmt::format("#   the job's collectives (dscp: job): DSCP {} ({}), host priority {}\n",
                       *q.job_dscp, q.job_dscp_source, prio);
  }
  for (const std::string& s : q.skipped) out += "#   left out (unreadable): " + s + "\n";
  for (const std::string& s : q.overrides) out += "#   the scenario's own setting: " + s + "\n";
  return out;
}

}  // namespace

comm::CollOp ToCommOp(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce:
      return comm::CollOp::kAllReduce;
    case CollKind::kAllGather:
      return comm::CollOp::kAllGather;
    case CollKind::kReduceScatter:
      return comm::CollOp::kReduceScatter;
    case CollKind::kAlltoAll:
      return comm::CollOp::kAlltoAll;
  }
  return comm::CollOp::kAllReduce;
}

std::vector<comm::CommRun> ToCommRuns(const SimResult& r) {
  std::map<std::tuple<int, int, int>, std::map<uint64_t, std::vector<const CollectiveResult*>>>
      groups;
  std::vector<std::tuple<int, int, int>> order;
  for (const auto& c : r.collectives) {
    auto key = std::make_tuple(static_cast<int>(c.op), static_cast<int>(c.algo), c.ranks);
    if (!groups.contains(key)) order.push_back(key);
    groups[key][c.bytes].push_back(&c);
  }
  std::vector<comm::CommRun> runs;
  for (const auto& key : order) {
    comm::CommRun run;
    run.source = "anxin";
    run.engine = "sim";
    const auto& sizes = groups[key];
    const CollectiveResult& first = *sizes.begin()->second.front();
    run.op = ToCommOp(first.op);
    run.type = comm::DataType::kFloat;
    if (comm::OpReduces(*run.op)) run.redop = comm::RedOp::kSum;
    run.ranks = first.ranks;
    run.algo = std::string(AlgoName(first.algo));
    run.algo_effective = run.algo;
    run.command = "anxin sim net " + r.scenario;
    for (const auto& [bytes, list] : sizes) {
      comm::Row row;
      row.bytes = bytes;
      row.count = bytes / 4;
      std::vector<double> times;
      double sum = 0;
      for (const auto* c : list) {
        times.push_back(c->time_us);
        sum += c->time_us;
      }
      comm::Sample s;
      s.time_us = sum / static_cast<double>(times.size());
      s.algbw = comm::AlgBandwidth(bytes, s.time_us);
      s.busbw = s.algbw * comm::BusBandwidthFactor(*run.op, run.ranks);
      if (times.size() > 1) {
        s.p50_us = Percentile(times, 0.5);
        s.p99_us = Percentile(times, 0.99);
        s.max_us = *std::max_element(times.begin(), times.end());
      }
      row.out_of_place = s;
      run.iters = static_cast<int>(times.size());
      run.rows.push_back(row);
    }
    comm::UpdateAverageBusBandwidth(run);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::string FormatReport(const SimResult& r) {
  std::string out =
      fmt::format("# anxin sim net {}: {} hosts, {} switches\n", r.scenario, r.hosts, r.switches);
  if (r.qos_from) out += FormatHostQos(*r.qos_from);
  for (const comm::CommRun& run : ToCommRuns(r)) {
    out +=
        fmt::format("# --- {} algo {} on {} ranks\n", comm::OpName(*run.op), run.algo, run.ranks);
    out += comm::FormatTable(run);
  }
  // Two or more algorithms of one collective on the same ranks: `bench comm
  // --sweep-algos`' table, with the sizes where the fastest changes.
  const auto runs = ToCommRuns(r);
  std::vector<bool> used(runs.size(), false);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (used[i]) continue;
    comm::SweepReport sweep;
    for (size_t k = i; k < runs.size(); ++k) {
      if (runs[k].op == runs[i].op && runs[k].ranks == runs[i].ranks &&
          runs[k].rows.size() == runs[i].rows.size()) {
        used[k] = true;
        sweep.algos.push_back(runs[k].algo);
        sweep.runs.push_back(runs[k]);
      }
    }
    if (sweep.runs.size() < 2) continue;
    comm::FindCrossovers(sweep);
    out += "#\n" + comm::FormatSweep(sweep);
  }
  if (!r.collectives.empty()) {
    out += "#\n# Collectives against the alpha-beta model of an idle fabric\n";
    out += fmt::format("# {:<16} {:>5} {:>6} {:>10} {:>12} {:>12} {:>8}\n", "collective", "algo",
                       "ranks", "size", "time (us)", "model (us)", "vs model");
    for (const auto& c : r.collectives) {
      out += fmt::format("  {:<16} {:>5} {:>6} {:>10} {:>12.2f} {:>12.2f} {:>+7.1f}%\n",
                         c.name.empty() ? std::string(CollName(c.op)) : c.name, AlgoName(c.algo),
                         c.ranks, Bytes(c.bytes), c.time_us, c.model_us,
                         c.model_us > 0 ? (c.time_us / c.model_us - 1) * 100 : 0);
    }
  }
  if (r.control.count > 0) {
    out += fmt::format(
        "#\n# Control messages: {} sent; latency p50 {:.2f} us, p99 {:.2f} us, max {:.2f} us\n",
        r.control.count, r.control.p50_us, r.control.p99_us, r.control.max_us);
  }
  if (r.handshake.count > 0) {
    out += fmt::format(
        "# Ready notifications of the collectives: {}; latency p50 {:.2f} us, p99 {:.2f} us, max "
        "{:.2f} us\n",
        r.handshake.count, r.handshake.p50_us, r.handshake.p99_us, r.handshake.max_us);
  }
  if (!r.flows.empty()) {
    out += "#\n# Flows\n";
    out += fmt::format("# {:>5} {:>5} {:>10} {:>10} {:>12}\n", "src", "dst", "size", "start (us)",
                       "fct (us)");
    for (const auto& f : r.flows) {
      out += fmt::format("  {:>5} {:>5} {:>10} {:>10.2f} {:>12.2f}\n", f.src, f.dst, Bytes(f.bytes),
                         f.start_us, f.fct_us);
    }
  }
  out += "#\n# Switch queues per priority\n";
  out += fmt::format("# {:>4} {:>12} {:>10} {:>10} {:>12} {:>12} {:>10} {:>7}  {}\n", "prio",
                     "bytes out", "max queue", "XOFF sent", "paused (us)", "longest (us)",
                     "ECN marks", "drops", "deepest at");
  for (const auto& q : r.queues) {
    if (q.bytes == 0 && q.pauses_sent == 0 && q.drops == 0) continue;
    out += fmt::format("  {:>4} {:>12} {:>10} {:>10} {:>12.1f} {:>12.1f} {:>10} {:>7}  {}\n",
                       q.priority, Bytes(q.bytes), Bytes(q.max_bytes), q.pauses_sent, q.paused_us,
                       q.longest_pause_us, q.ecn_marks, q.drops,
                       q.max_port.empty() ? "-" : q.max_port);
  }
  if (r.storms.empty()) {
    out += "# PFC storm: none (no pause outlasted the storm threshold)\n";
  } else {
    out += fmt::format("# PFC storm: {} port/priority pairs paused longer than the threshold\n",
                       r.storms.size());
    for (size_t i = 0; i < std::min<size_t>(r.storms.size(), 8); ++i) {
      out += fmt::format("#   {} priority {}: {:.1f} us in one pause\n", r.storms[i].port,
                         r.storms[i].priority, r.storms[i].longest_pause_us);
    }
  }
  if (r.cnps > 0 || r.drops > 0) {
    out += fmt::format("# CNPs {}, drops {} (on lossless priorities {})\n", r.cnps, r.drops,
                       r.lossless_drops);
  }
  if (r.unfinished_flows > 0) {
    out += fmt::format("# STALLED: {} flows never finished (PFC deadlock?)\n", r.unfinished_flows);
  }
  out += fmt::format(
      "# Engine: {} events in {:.3f} s wall, {:.3f} s CPU ({:.2f} M events/s), {:.1f} us "
      "simulated, peak {} flows and {} packets in flight, {:.1f} MiB\n",
      r.events, r.wall_s, r.cpu_s, r.events_per_s / 1e6, r.sim_us, r.peak_flows, r.peak_packets,
      static_cast<double>(r.peak_memory_bytes) / (1 << 20));
  return out;
}

std::string FormatCompare(const SimResult& a, const SimResult& b) {
  std::string out = fmt::format("# A: {}\n# B: {}\n", a.scenario, b.scenario);
  out += fmt::format("# {:<28} {:>14} {:>14} {:>9}\n", "", "A", "B", "B vs A");
  auto line = [&](const std::string& what, double x, double y) {
    out += fmt::format("  {:<28} {:>14.2f} {:>14.2f} {:>+8.1f}%\n", what, x, y,
                       x != 0 ? (y / x - 1) * 100 : 0);
  };
  const size_t n = std::min(a.collectives.size(), b.collectives.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& ca = a.collectives[i];
    const auto& cb = b.collectives[i];
    const std::string name =
        fmt::format("{} {} {}", CollName(ca.op), AlgoName(ca.algo), Bytes(ca.bytes));
    line(name + " time (us)", ca.time_us, cb.time_us);
    line(name + " busbw (GB/s)", ca.busbw, cb.busbw);
  }
  if (a.control.count > 0 || b.control.count > 0) {
    line("control p50 (us)", a.control.p50_us, b.control.p50_us);
    line("control p99 (us)", a.control.p99_us, b.control.p99_us);
  }
  uint64_t pa = 0, pb = 0;
  for (const auto& q : a.queues) pa += q.pauses_sent;
  for (const auto& q : b.queues) pb += q.pauses_sent;
  line("PFC XOFF frames", static_cast<double>(pa), static_cast<double>(pb));
  line("PFC storms", static_cast<double>(a.storms.size()), static_cast<double>(b.storms.size()));
  return out;
}

nlohmann::json ToJson(const SimResult& r) {
  nlohmann::json j;
  j["scenario"] = r.scenario;
  if (r.qos_from) {
    const HostQos& q = *r.qos_from;
    nlohmann::json map = nlohmann::json::object();
    for (const auto& [d, p] : q.dscp_to_priority) map[std::to_string(d)] = p;
    nlohmann::json pfc = nlohmann::json::array();
    for (int p = 0; p < kPriorities; ++p) {
      if (q.pfc[static_cast<size_t>(p)]) pfc.push_back(p);
    }
    j["qos_from"] = {{"file", q.file},
                     {"host", q.host},
                     {"kinds", q.kinds},
                     {"ports", q.ports},
                     {"skipped", q.skipped},
                     {"pfc", pfc},
                     {"dscp_to_priority", map},
                     {"job_dscp", q.job_dscp ? nlohmann::json(*q.job_dscp) : nlohmann::json()},
                     {"job_dscp_source", q.job_dscp_source},
                     {"overrides", q.overrides}};
  } else {
    j["qos_from"] = nullptr;
  }
  j["hosts"] = r.hosts;
  j["switches"] = r.switches;
  auto& colls = j["collectives"] = nlohmann::json::array();
  for (const auto& c : r.collectives) {
    colls.push_back({{"name", c.name},
                     {"op", CollName(c.op)},
                     {"algo", AlgoName(c.algo)},
                     {"ranks", c.ranks},
                     {"bytes", c.bytes},
                     {"iteration", c.iteration},
                     {"start_us", c.start_us},
                     {"time_us", c.time_us},
                     {"algbw", c.algbw},
                     {"busbw", c.busbw},
                     {"model_us", c.model_us},
                     {"flows", c.flows}});
  }
  j["comm_runs"] = nlohmann::json::array();
  for (const auto& run : ToCommRuns(r)) j["comm_runs"].push_back(comm::ToJson(run));
  j["control"] = {{"count", r.control.count},
                  {"p50_us", r.control.p50_us},
                  {"p99_us", r.control.p99_us},
                  {"max_us", r.control.max_us},
                  {"mean_us", r.control.mean_us}};
  j["handshake"] = {{"count", r.handshake.count},
                    {"p50_us", r.handshake.p50_us},
                    {"p99_us", r.handshake.p99_us},
                    {"max_us", r.handshake.max_us},
                    {"mean_us", r.handshake.mean_us}};
  auto& flows = j["flows"] = nlohmann::json::array();
  for (const auto& f : r.flows) {
    flows.push_back({{"src", f.src},
                     {"dst", f.dst},
                     {"bytes", f.bytes},
                     {"start_us", f.start_us},
                     {"fct_us", f.fct_us}});
  }
  auto& queues = j["queues"] = nlohmann::json::array();
  for (const auto& q : r.queues) {
    queues.push_back({{"priority", q.priority},
                      {"bytes", q.bytes},
                      {"max_queue_bytes", q.max_bytes},
                      {"max_queue_port", q.max_port},
                      {"pauses_sent", q.pauses_sent},
                      {"paused_us", q.paused_us},
                      {"longest_pause_us", q.longest_pause_us},
                      {"ecn_marks", q.ecn_marks},
                      {"drops", q.drops}});
  }
  auto& storms = j["pfc_storms"] = nlohmann::json::array();
  for (const auto& s : r.storms) {
    storms.push_back(
        {{"port", s.port}, {"priority", s.priority}, {"longest_pause_us", s.longest_pause_us}});
  }
  j["timeline"] = {{"bin_us", r.timeline.bin_us},
                   {"max_queue_bytes", r.timeline.max_queue_bytes},
                   {"pauses", r.timeline.pauses}};
  j["cnps"] = r.cnps;
  j["drops"] = r.drops;
  j["lossless_drops"] = r.lossless_drops;
  j["unfinished_flows"] = r.unfinished_flows;
  j["engine"] = {{"events", r.events},
                 {"wall_s", r.wall_s},
                 {"cpu_s", r.cpu_s},
                 {"events_per_s", r.events_per_s},
                 {"sim_us", r.sim_us},
                 {"peak_flows", r.peak_flows},
                 {"peak_packets", r.peak_packets},
                 {"peak_memory_bytes", r.peak_memory_bytes}};
  return j;
}

std::string TimelineSvg(const SimResult& r) {
  // Per priority in use: a line of the deepest queue per bin, and ticks
  // under it where PFC XOFF frames were sent.
  static const char* kColors[kPriorities] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                             "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
  const auto& q = r.timeline.max_queue_bytes;
  size_t bins = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    for (int p = 0; p < kPriorities; ++p) {
      if (q[i][static_cast<size_t>(p)] > 0 || r.timeline.pauses[i][static_cast<size_t>(p)] > 0)
        bins = i + 1;
    }
  }
  bins = std::max<size_t>(bins, 1);
  uint64_t top = 1;
  for (size_t i = 0; i < bins; ++i) {
    for (int p = 0; p < kPriorities; ++p) top = std::max(top, q[i][static_cast<size_t>(p)]);
  }
  const int width = 800, plot_h = 240, left = 70, bottom = plot_h + 40;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      width + left + 20, bottom + 40 + 12 * kPriorities);
  out += fmt::format(
      "<text x=\"{}\" y=\"14\">{}: deepest switch queue per priority, PFC XOFF "
      "ticks below (bin {:.2f} us)</text>\n",
      left, r.scenario, r.timeline.bin_us);
  out += fmt::format("<line x1=\"{0}\" y1=\"20\" x2=\"{0}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                     plot_h + 20);
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                     plot_h + 20, left + width);
  out += fmt::format("<text x=\"2\" y=\"26\">{}</text>\n", Bytes(top));
  out += fmt::format("<text x=\"{}\" y=\"{}\">{:.1f} us</text>\n", left + width - 50, plot_h + 34,
                     r.timeline.bin_us * static_cast<double>(bins));
  int legend = 0;
  for (int p = 0; p < kPriorities; ++p) {
    bool used = false;
    for (size_t i = 0; i < bins; ++i) {
      used = used || q[i][static_cast<size_t>(p)] > 0 ||
             r.timeline.pauses[i][static_cast<size_t>(p)] > 0;
    }
    if (!used) continue;
    std::string points;
    for (size_t i = 0; i < bins; ++i) {
      const double x = left + width * (static_cast<double>(i) + 0.5) / static_cast<double>(bins);
      const double y = 20 + plot_h * (1 - static_cast<double>(q[i][static_cast<size_t>(p)]) /
                                              static_cast<double>(top));
      points += fmt::format("{:.1f},{:.1f} ", x, y);
      if (r.timeline.pauses[i][static_cast<size_t>(p)] > 0) {
        out += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"{3}\"/>\n", x,
            bottom - 10 + 2 * p, bottom - 4 + 2 * p, kColors[p]);
      }
    }
    out +=
        fmt::format("<polyline fill=\"none\" stroke=\"{}\" points=\"{}\"/>\n", kColors[p], points);
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">priority {}</text>\n", left,
                       bottom + 20 + 12 * legend++, kColors[p], p);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace anxin::netsim
