#include "anxin/doctor/multi_host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "anxin/base/strings.h"

namespace anxin::doctor {

Result<std::vector<HostEntry>> ParseHostsFile(std::string_view text) {
  std::vector<HostEntry> out;
  int n = 0;
  for (std::string_view raw : SplitLines(text)) {
    ++n;
    std::string_view line = Trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("hosts file line " + std::to_string(n) + ": " + why + " in '" +
                             std::string(line) + "' (expected [user@]host[:port])");
    };
    if (SplitWords(line).size() != 1) return bad("one host per line");
    if (line.front() == '-') return bad("a host may not start with '-'");
    for (char c : line) {
      if (!std::isalnum(static_cast<unsigned char>(c)) &&
          std::string_view("._@:[]-").find(c) == std::string_view::npos) {
        return bad(std::string("character '") + c + "' not allowed");
      }
    }
    HostEntry h;
    h.label = std::string(line);
    std::string_view rest = line;
    std::string user;
    if (size_t at = rest.find('@'); at != std::string_view::npos) {
      user = std::string(rest.substr(0, at + 1));
      rest = rest.substr(at + 1);
    }
    std::string hostpart;
    std::string_view port;
    if (!rest.empty() && rest.front() == '[') {
      size_t close = rest.find(']');
      if (close == std::string_view::npos) return bad("unclosed '['");
      hostpart = std::string(rest.substr(1, close - 1));
      if (close + 1 < rest.size()) {
        if (rest[close + 1] != ':') return bad("expected ':' after ']'");
        port = rest.substr(close + 2);
      }
    } else if (std::count(rest.begin(), rest.end(), ':') == 1) {
      size_t colon = rest.find(':');
      hostpart = std::string(rest.substr(0, colon));
      port = rest.substr(colon + 1);
    } else {
      hostpart = std::string(rest);
    }
    if (hostpart.empty() || hostpart.front() == '-') return bad("empty host name");
    if (!port.empty()) {
      auto p = ParseInt(port);
      if (!p || *p < 1 || *p > 65535) return bad("bad port '" + std::string(port) + "'");
      h.port = static_cast<int>(*p);
    }
    h.target = user + hostpart;
    out.push_back(std::move(h));
  }
  if (out.empty()) return InvalidArgument("hosts file lists no hosts");
  return out;
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::vector<std::string> SshArgv(const HostEntry& h, const RemoteOptions& o) {
  int connect = std::max(1, static_cast<int>(std::min(o.timeout_s, 30.0)));
  std::vector<std::string> a = {
      o.ssh, "-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(connect), "-T"};
  if (!o.ssh_config.empty()) {
    a.push_back("-F");
    a.push_back(o.ssh_config);
  }
  for (const std::string& opt : o.ssh_options) {
    a.push_back("-o");
    a.push_back(opt);
  }
  if (h.port > 0) {
    a.push_back("-p");
    a.push_back(std::to_string(h.port));
  }
  a.push_back("--");
  a.push_back(h.target);
  // ssh joins the remote words with spaces for the remote shell: quote each.
  std::string remote = ShellQuote(o.remote_anxin) + " doctor --json";
  for (const std::string& arg : o.remote_args) remote += " " + ShellQuote(arg);
  a.push_back(remote);
  return a;
}

namespace {
HostResult RunOne(const HostEntry& h, const RemoteOptions& o, const ProcessRunner& run) {
  HostResult r;
  r.host = h;
  auto start = std::chrono::steady_clock::now();
  auto out = run(SshArgv(h, o), o.timeout_s);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!out) {
    r.report = std::unexpected(std::move(out).error());
    return r;
  }
  // doctor exits 0 (all ok) or 1 (a check failed) with a report; anything else
  // (255 from ssh, 2/3 from anxin, 127 no such program) is a host-level failure.
  if (out->exit_code != 0 && out->exit_code != 1) {
    std::string err = out->stderr_text;
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    if (err.size() > 400) err = err.substr(err.size() - 400);
    std::string how = out->signal != 0 ? out->Describe() : "exit " + std::to_string(out->exit_code);
    r.report = Unavailable(how + (err.empty() ? "" : ": " + err));
    return r;
  }
  auto j = nlohmann::json::parse(out->stdout_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    r.report = DataLoss("remote output is not JSON (is the remote anxin the same version?)");
    return r;
  }
  r.report = ReportFromJson(j);
  if (r.report) r.report->host = h.label;
  return r;
}
}  // namespace

std::vector<HostResult> RunOnHosts(const std::vector<HostEntry>& hosts, const RemoteOptions& o,
                                   const ProcessRunner& run) {
  std::vector<HostResult> results(hosts.size());
  std::atomic<size_t> next{0};
  size_t workers = std::min<size_t>(hosts.size(), static_cast<size_t>(std::max(1, o.parallel)));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < hosts.size(); i = next++) results[i] = RunOne(hosts[i], o, run);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

namespace {
struct Matrix {
  std::vector<std::string> checks;
  // check -> host index -> status
  std::map<std::string, std::map<size_t, Severity>> cells;
  std::map<std::string, std::optional<Severity>> majority;  // nullopt: no strict majority
};

Matrix BuildMatrix(const std::vector<HostResult>& results) {
  Matrix m;
  std::set<std::string> seen;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].report) continue;
    for (const Finding& f : results[i].report->findings) {
      if (seen.insert(f.check_id).second) m.checks.push_back(f.check_id);
      m.cells[f.check_id][i] = f.severity;
    }
  }
  std::sort(m.checks.begin(), m.checks.end());
  for (const std::string& c : m.checks) {
    std::map<Severity, size_t> votes;
    for (const auto& [i, s] : m.cells[c]) ++votes[s];
    size_t total = m.cells[c].size();
    std::optional<Severity> maj;
    for (const auto& [s, n] : votes) {
      if (n * 2 > total) maj = s;
    }
    m.majority[c] = maj;
  }
  return m;
}

bool IsDrift(const Matrix& m, const std::string& check, Severity s) {
  auto it = m.majority.find(check);
  // Without a strict majority every differing host is drift relative to the others.
  if (it == m.majority.end()) return false;
  if (!it->second) return m.cells.at(check).size() > 1;
  return s != *it->second;
}
}  // namespace

std::string RenderMatrix(const std::vector<HostResult>& results) {
  Matrix m = BuildMatrix(results);
  size_t w = 5;
  for (const auto& c : m.checks) w = std::max(w, c.size());
  std::vector<size_t> cw;
  for (const HostResult& r : results) cw.push_back(std::max<size_t>(6, r.host.label.size()));
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s.append(n - s.size(), ' ');
    return s;
  };
  std::string out = pad("CHECK", w);
  for (size_t i = 0; i < results.size(); ++i) out += "  " + pad(results[i].host.label, cw[i]);
  out += "\n";
  size_t drift_cells = 0;
  for (const std::string& c : m.checks) {
    out += pad(c, w);
    for (size_t i = 0; i < results.size(); ++i) {
      std::string cell;
      if (!results[i].report) {
        cell = "n/a";
      } else if (auto it = m.cells[c].find(i); it == m.cells[c].end()) {
        cell = "-";
      } else {
        cell = std::string(SeverityName(it->second));
        if (IsDrift(m, c, it->second)) {
          cell += "*";
          ++drift_cells;
        }
      }
      out += "  " + pad(cell, cw[i]);
    }
    out += "\n";
  }
  out += "\n";
  size_t down = 0;
  for (const HostResult& r : results) {
    if (!r.report) {
      ++down;
      out += "unreachable: " + r.host.label + ": " + r.report.error().Describe() + "\n";
    }
  }
  out += std::to_string(results.size() - down) + " of " + std::to_string(results.size()) +
         " hosts answered; " + std::to_string(drift_cells) +
         " cells (marked *) differ from the majority of hosts\n";
  // Name what drifted, so nobody has to read the grid to find it.
  for (const std::string& c : m.checks) {
    for (size_t i = 0; i < results.size(); ++i) {
      auto it = m.cells[c].find(i);
      if (it == m.cells[c].end() || !IsDrift(m, c, it->second)) continue;
      std::string summary;
      for (const Finding& f : results[i].report->findings) {
        if (f.check_id == c) summary = f.summary;
      }
      out += "  drift: " + results[i].host.label + " " + c + " = " +
             std::string(SeverityName(it->second)) + ": " + summary + "\n";
    }
  }
  return out;
}

nlohmann::json MatrixJson(const std::vector<HostResult>& results) {
  Matrix m = BuildMatrix(results);
  nlohmann::json j;
  j["hosts"] = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    nlohmann::json h;
    h["host"] = results[i].host.label;
    h["seconds"] = results[i].seconds;
    if (results[i].report) {
      h["report"] = ToJson(*results[i].report);
      h["report"]["host"] = results[i].host.label;
    } else {
      h["error"] = results[i].report.error().Describe();
    }
    j["hosts"].push_back(h);
  }
  j["matrix"] = nlohmann::json::object();
  for (const std::string& c : m.checks) {
    nlohmann::json row;
    auto maj = m.majority[c];
    row["majority"] =
        maj ? nlohmann::json(std::string(SeverityName(*maj))) : nlohmann::json(nullptr);
    row["cells"] = nlohmann::json::object();
    row["drift"] = nlohmann::json::array();
    for (const auto& [i, s] : m.cells[c]) {
      row["cells"][results[i].host.label] = std::string(SeverityName(s));
      if (IsDrift(m, c, s)) row["drift"].push_back(results[i].host.label);
    }
    j["matrix"][c] = row;
  }
  j["worst"] = std::string(SeverityName(WorstOverHosts(results)));
  return j;
}

Severity WorstOverHosts(const std::vector<HostResult>& results) {
  Severity w = Severity::kOk;
  for (const HostResult& r : results) {
    w = std::max(w, r.report ? r.report->Worst() : Severity::kFail);
  }
  return w;
}

}  // namespace anxin::doctor
