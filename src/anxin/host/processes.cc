#include "anxin/host/processes.h"

#include <algorithm>

#include "anxin/base/strings.h"
#include "anxin/host/cpu_list.h"

namespace anxin::host {

Result<std::vector<int>> ListPids(const HostRoot& root) {
  ANXIN_ASSIGN_OR_RETURN(auto names, root.ListDir("/proc"));
  std::vector<int> pids;
  for (const std::string& n : names) {
    if (auto v = ParseInt(n);
        v && *v > 0 && n.find_first_not_of("0123456789") == std::string::npos) {
      pids.push_back(static_cast<int>(*v));
    }
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::vector<int> FindProcessesByName(const HostRoot& root, std::string_view name) {
  std::vector<int> out;
  auto pids = ListPids(root);
  if (!pids) return out;
  for (int pid : *pids) {
    auto comm = root.ReadAttr("/proc/" + std::to_string(pid) + "/comm");
    if (comm && *comm == name) out.push_back(pid);
  }
  return out;
}

std::optional<AcceleratorRef> ParseAcceleratorPath(std::string_view target) {
  auto tail = [&](std::string_view prefix) -> std::optional<int> {
    if (!target.starts_with(prefix)) return std::nullopt;
    auto v = ParseInt(target.substr(prefix.size()));
    if (!v ||
        target.substr(prefix.size()).find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    return static_cast<int>(*v);
  };
  if (auto n = tail("/dev/davinci")) return AcceleratorRef{std::string(target), true, *n};
  if (auto n = tail("/dev/nvidia")) return AcceleratorRef{std::string(target), false, *n};
  return std::nullopt;
}

std::map<int, int64_t> ParseNumaMaps(std::string_view text) {
  std::map<int, int64_t> pages;
  for (std::string_view line : SplitLines(text)) {
    for (std::string_view w : SplitWords(line)) {
      if (w.size() < 4 || w[0] != 'N') continue;
      size_t eq = w.find('=');
      if (eq == std::string_view::npos) continue;
      auto node = ParseInt(w.substr(1, eq - 1));
      auto n = ParseInt(w.substr(eq + 1));
      if (node && n) pages[static_cast<int>(*node)] += *n;
    }
  }
  return pages;
}

Environment ParseEnviron(std::string_view text) {
  Environment env;
  for (std::string_view kv : Split(text, '\0')) {
    size_t eq = kv.find('=');
    if (kv.empty() || eq == std::string_view::npos || eq == 0) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return env;
}

Result<Environment> ParseEnvFile(std::string_view text) {
  Environment env;
  int n = 0;
  for (std::string_view line : SplitLines(text)) {
    ++n;
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.starts_with("export ")) line = Trim(line.substr(7));
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("line " + std::to_string(n) + ": expected KEY=VALUE, got '" +
                             std::string(line) + "'");
    }
    std::string_view value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env[std::string(Trim(line.substr(0, eq)))] = std::string(value);
  }
  return env;
}

namespace {
void ReadStatus(const HostRoot& root, ProcessInfo& p) {
  std::string base = "/proc/" + std::to_string(p.pid);
  auto status = root.ReadFile(base + "/status");
  if (!status) {
    p.unreadable.push_back(status.error().Describe());
    return;
  }
  for (std::string_view line : SplitLines(*status)) {
    auto take = [&](std::string_view key, std::vector<int>& out) {
      if (!line.starts_with(key)) return;
      if (auto l = ParseCpuList(line.substr(key.size()))) out = *l;
    };
    take("Cpus_allowed_list:", p.cpus_allowed);
    take("Mems_allowed_list:", p.mems_allowed);
  }
}
}  // namespace

Result<std::vector<ProcessInfo>> ReadAcceleratorProcesses(const HostRoot& root) {
  ANXIN_ASSIGN_OR_RETURN(auto pids, ListPids(root));
  std::vector<ProcessInfo> out;
  for (int pid : pids) {
    std::string base = "/proc/" + std::to_string(pid);
    auto fds = root.ListDir(base + "/fd");
    if (!fds) continue;
    ProcessInfo p;
    p.pid = pid;
    for (const std::string& fd : *fds) {
      auto target = root.ReadLink(base + "/fd/" + fd);
      if (!target) continue;
      auto ref = ParseAcceleratorPath(*target);
      if (!ref) continue;
      bool seen = false;
      for (const auto& a : p.accelerators) seen |= a.path == ref->path;
      if (!seen) p.accelerators.push_back(*ref);
    }
    if (p.accelerators.empty()) continue;
    if (auto comm = root.ReadAttr(base + "/comm")) p.name = *comm;
    ReadStatus(root, p);
    if (auto maps = root.ReadFile(base + "/numa_maps")) {
      p.pages_per_node = ParseNumaMaps(*maps);
    } else {
      p.unreadable.push_back(maps.error().Describe());
    }
    if (auto env = root.ReadFile(base + "/environ")) {
      p.env = ParseEnviron(*env);
    } else {
      p.unreadable.push_back(env.error().Describe());
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace anxin::host
