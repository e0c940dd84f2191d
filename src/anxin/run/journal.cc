#include "anxin/run/journal.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>

#include "anxin/base/file.h"
#include "anxin/base/time_format.h"

namespace anxin::run {
namespace fs = std::filesystem;
namespace {

using SysClock = std::chrono::system_clock;

}  // namespace

std::string FormatRfc3339(SysClock::time_point t) {
  if (t == SysClock::time_point{}) return "";
  return ::anxin::FormatRfc3339(t, TimePrecision::kMilliseconds);
}

namespace {

Result<SysClock::time_point> ParseTime(const std::string& s) {
  if (s.empty()) return SysClock::time_point{};
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return DataLoss("bad time '" + s + "'");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t secs = timegm(&tm);
  return SysClock::from_time_t(secs) + std::chrono::milliseconds(ms);
}

}  // namespace

std::string NewIncidentId() {
  static std::atomic<int> counter{0};
  const time_t now = SysClock::to_time_t(SysClock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d%02d%02dT%02d%02d%02d-%d-%d", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(getpid()), ++counter);
  return buf;
}

namespace {

nlohmann::json ClusterToJson(const ClusterView& c) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const ClusterNodeTimes& n : c.nodes) {
    nodes.push_back({{"node", n.node},
                     {"node_rank", n.node_rank},
                     {"ready_seconds", n.ready_seconds},
                     {"barrier_seconds", n.barrier_seconds},
                     {"newest_verified", n.newest_verified}});
  }
  return {
      {"fault_node", c.fault_node},    {"fault_class", c.fault_class}, {"generation", c.generation},
      {"agreed_step", c.agreed_step},  {"nnodes", c.nnodes},           {"nodes", nodes},
      {"store_pauses", c.store_pauses}};
}

ClusterView ClusterFromJson(const nlohmann::json& j) {
  ClusterView c;
  c.fault_node = j.value("fault_node", "");
  c.fault_class = j.value("fault_class", "");
  c.generation = j.value("generation", 0);
  c.agreed_step = j.value("agreed_step", int64_t{-1});
  c.nnodes = j.value("nnodes", 0);
  c.store_pauses = j.value("store_pauses", 0);
  for (const auto& n : j.value("nodes", nlohmann::json::array())) {
    ClusterNodeTimes t;
    t.node = n.value("node", "");
    t.node_rank = n.value("node_rank", -1);
    t.ready_seconds = n.value("ready_seconds", -1.0);
    t.barrier_seconds = n.value("barrier_seconds", -1.0);
    t.newest_verified = n.value("newest_verified", int64_t{-1});
    c.nodes.push_back(std::move(t));
  }
  return c;
}

}  // namespace

nlohmann::json IncidentToJson(const Incident& in) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& s : in.steps) {
    steps.push_back({{"name", s.name},
                     {"start", FormatRfc3339(s.start)},
                     {"end", FormatRfc3339(s.end)},
                     {"seconds", s.seconds()},
                     {"result", s.result},
                     {"detail", s.detail},
                     {"tries", s.tries}});
  }
  const Fault& f = in.fault;
  nlohmann::json j = {{"id", in.id},
                      {"job", in.job},
                      {"attempt", in.attempt},
                      {"fault",
                       {{"detector", f.detector},
                        {"class", f.fault_class},
                        {"severity", std::string(device::SeverityName(f.severity))},
                        {"rank", f.rank},
                        {"device", f.device},
                        {"summary", f.summary},
                        {"time", FormatRfc3339(f.wall)},
                        {"evidence", f.evidence}}},
                      {"detection_seconds", in.detection_seconds},
                      {"steps", steps},
                      {"outcome", in.outcome},
                      {"playbook", in.playbook},
                      {"checkpoint", in.checkpoint},
                      {"recovery_path", in.recovery_path},
                      {"resumed_step", in.resumed_step},
                      {"time_to_recovery_seconds", in.time_to_recovery_seconds}};
  if (in.cluster) j["cluster"] = ClusterToJson(*in.cluster);
  return j;
}

Result<Incident> IncidentFromJson(const nlohmann::json& j) {
  try {
    Incident in;
    in.id = j.at("id").get<std::string>();
    in.job = j.value("job", "");
    in.attempt = j.value("attempt", 0);
    const auto& f = j.at("fault");
    in.fault.detector = f.value("detector", "");
    in.fault.fault_class = f.value("class", "");
    const std::string sev = f.value("severity", "critical");
    in.fault.severity = sev == "minor"   ? device::Severity::kMinor
                        : sev == "major" ? device::Severity::kMajor
                                         : device::Severity::kCritical;
    in.fault.rank = f.value("rank", -1);
    in.fault.device = f.value("device", -1);
    in.fault.summary = f.value("summary", "");
    ANXIN_ASSIGN_OR_RETURN(in.fault.wall, ParseTime(f.value("time", "")));
    in.fault.evidence = f.value("evidence", std::vector<std::string>{});
    in.detection_seconds = j.value("detection_seconds", -1.0);
    for (const auto& s : j.at("steps")) {
      StepRecord r;
      r.name = s.at("name").get<std::string>();
      ANXIN_ASSIGN_OR_RETURN(r.start, ParseTime(s.value("start", "")));
      ANXIN_ASSIGN_OR_RETURN(r.end, ParseTime(s.value("end", "")));
      r.result = s.value("result", "");
      r.detail = s.value("detail", "");
      r.tries = s.value("tries", 0);
      in.steps.push_back(std::move(r));
    }
    in.outcome = j.value("outcome", "");
    in.playbook = j.value("playbook", "");
    in.checkpoint = j.value("checkpoint", "");
    in.recovery_path = j.value("recovery_path", "");
    in.resumed_step = j.value("resumed_step", int64_t{-1});
    in.time_to_recovery_seconds = j.value("time_to_recovery_seconds", -1.0);
    if (j.contains("cluster") && j["cluster"].is_object())
      in.cluster = ClusterFromJson(j["cluster"]);
    return in;
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("malformed incident record: ") + e.what());
  }
}

Status WriteIncident(const std::string& state_dir, const Incident& incident) {
  const fs::path dir = fs::path(state_dir) / "incidents";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return std::unexpected(
        Error(ErrorCode::kUnavailable, "creating " + dir.string() + ": " + ec.message()));
  }
  return WriteFileAtomic((dir / (incident.id + ".json")).string(),
                         IncidentToJson(incident).dump(2) + "\n");
}

Result<std::vector<Incident>> ReadIncidents(const std::string& state_dir) {
  const fs::path dir = fs::path(state_dir) / "incidents";
  std::vector<Incident> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(p.string()));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return DataLoss(p.string() + ": not JSON");
    auto in = IncidentFromJson(j);
    if (!in) return std::unexpected(in.error().With(p.string()));
    out.push_back(std::move(*in));
  }
  std::stable_sort(out.begin(), out.end(), [](const Incident& a, const Incident& b) {
    return a.fault.wall < b.fault.wall;
  });
  return out;
}

namespace {

std::string StepOrDash(int64_t step) { return step >= 0 ? "step " + std::to_string(step) : "-"; }

// A multi-node recovery: the generation, who opened it, the agreed step and
// each node's times, under the incident's row.
std::string FormatClusterView(const ClusterView& c) {
  std::string out = fmt::format(
      "  cluster: generation {} opened by {} ({}), {} node(s), agreed step {}", c.generation,
      c.fault_node.empty() ? "-" : c.fault_node, c.fault_class.empty() ? "-" : c.fault_class,
      c.nnodes, c.agreed_step >= 0 ? std::to_string(c.agreed_step) : "none (from scratch)");
  if (c.store_pauses > 0) out += fmt::format(", {} store pause(s)", c.store_pauses);
  out += "\n";
  for (const ClusterNodeTimes& n : c.nodes) {
    out += fmt::format("    {:<16} rank {:<3} ready {:7.2f}s  barrier {:6.2f}s  newest intact {}\n",
                       n.node, n.node_rank, n.ready_seconds, n.barrier_seconds,
                       StepOrDash(n.newest_verified));
  }
  return out;
}

// One incident's row: the phases in playbook order, seconds each.
std::string FormatIncidentRow(const Incident& in) {
  static constexpr const char* kPhases[] = {"stop_ranks",     "clear_device_memory", "reset_device",
                                            "wait_links_up",  "select_checkpoint",   "relaunch",
                                            "verify_progress"};
  std::map<std::string, double> secs;
  for (const StepRecord& s : in.steps) {
    if (s.result == "skipped") continue;
    const std::string phase = s.name == "abort_ranks" ? "stop_ranks"
                              : s.name == "rejoin"    ? "relaunch"
                                                      : s.name;
    secs[phase] += s.seconds();
  }
  std::string out =
      fmt::format("{:<28} {:<20} {:<5} {:<12}", in.id, in.fault.fault_class,
                  in.fault.rank >= 0 ? std::to_string(in.fault.rank) : "-", in.outcome);
  for (const char* p : kPhases) {
    auto it = secs.find(p);
    if (it == secs.end()) {
      out += fmt::format(" {:>7}", "-");
    } else {
      out += fmt::format(" {:7.2f}", it->second);
      secs.erase(it);
    }
  }
  // Steps of site playbooks (exec, notify) and escalation, together.
  double other = 0;
  for (const auto& [name, s] : secs) other += s;
  out += secs.empty() ? fmt::format(" {:>7}", "-") : fmt::format(" {:7.2f}", other);
  out += in.time_to_recovery_seconds >= 0 ? fmt::format(" {:8.2f}s", in.time_to_recovery_seconds)
                                          : fmt::format(" {:>9}", "-");
  out += fmt::format("  {}\n", StepOrDash(in.resumed_step));
  if (!in.recovery_path.empty() && in.recovery_path != "relaunch") {
    out += "  path: " + in.recovery_path;
    for (const StepRecord& s : in.steps) {
      if (s.name == "abort_ranks" || s.name == "rejoin") {
        out += fmt::format(", {} {:.3f}s ({})", s.name, s.seconds(), s.detail);
      }
    }
    out += "\n";
  }
  if (in.cluster) out += FormatClusterView(*in.cluster);
  return out;
}

}  // namespace

std::string FormatIncidentTable(const std::vector<Incident>& incidents) {
  if (incidents.empty()) return "";
  std::string out =
      fmt::format("{:<28} {:<20} {:<5} {:<12}", "INCIDENT", "FAULT", "RANK", "OUTCOME");
  for (const char* s : {"stop", "clear", "reset", "links", "ckpt", "launch", "verify", "other"}) {
    out += fmt::format(" {:>7}", s);
  }
  out += fmt::format(" {:>9}  {}\n", "RECOVERY", "RESUMED");
  for (const Incident& in : incidents) out += FormatIncidentRow(in);
  return out;
}

}  // namespace anxin::run
