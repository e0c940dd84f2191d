// Finding and stopping a lab's processes (procs.h).
#include "anxin/lab/procs.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::lab {
namespace {

namespace fs = std::filesystem;

bool Alive(pid_t pid, uint64_t start) {
  return pid > 0 && start != 0 && ProcessStartTicks(pid) == start;
}

bool PortListening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct Recorded {
  pid_t pid = 0;
  uint64_t start = 0;
  int port = 0;
};

struct Record {
  std::optional<Recorded> lab;
  std::vector<Recorded> children;
};

Record ReadRecord(const std::string& dir) {
  Record r;
  auto text = ReadFile(dir + "/processes.json", 1 << 20);
  if (!text) return r;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return r;
  auto one = [](const nlohmann::json& x) {
    return Recorded{x.value("pid", 0), x.value("start", uint64_t{0}), x.value("port", 0)};
  };
  if (j.contains("lab") && j["lab"].is_object()) r.lab = one(j["lab"]);
  for (const auto& c : j.value("children", nlohmann::json::array())) r.children.push_back(one(c));
  return r;
}

// Waits until none of pids is alive (by start time), at most `seconds`.
bool WaitGone(const std::vector<std::pair<pid_t, uint64_t>>& pids, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    bool any = false;
    for (const auto& [pid, start] : pids) any = any || Alive(pid, start);
    if (!any) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

uint64_t ProcessStartTicks(pid_t pid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!text) return 0;
  // The command name (field 2) may hold spaces and parentheses: fields after
  // the last ')' are plain.
  const size_t close = text->rfind(')');
  if (close == std::string::npos) return 0;
  const auto fields = SplitWords(std::string_view(*text).substr(close + 1));
  // fields[0] is field 3 (state); the start time is field 22.
  if (fields.size() < 20) return 0;
  if (fields[0] == "Z" || fields[0] == "X") return 0;  // a zombie runs nothing
  return static_cast<uint64_t>(ParseInt(fields[19]).value_or(0));
}

std::vector<pid_t> ProcessesUnder(const std::string& dir) {
  std::vector<pid_t> out;
  const std::string needle = dir + "/";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    const auto pid = ParseInt(name);
    if (!pid || *pid == ::getpid()) continue;
    auto cmd = ReadFile(e.path().string() + "/cmdline", 1 << 20);
    if (!cmd || cmd->empty()) continue;
    if (cmd->find(needle) != std::string::npos) out.push_back(static_cast<pid_t>(*pid));
  }
  return out;
}

std::optional<pid_t> RunningLab(const std::string& dir) {
  const Record r = ReadRecord(dir);
  if (r.lab && r.lab->pid != ::getpid() && Alive(r.lab->pid, r.lab->start)) return r.lab->pid;
  return std::nullopt;
}

Status StopLab(const std::string& dir, DownSummary* summary) {
  DownSummary s;
  const Record r = ReadRecord(dir);
  // `lab up` stops what it started, in order (supervisors before etcd).
  if (r.lab && r.lab->pid != ::getpid() && Alive(r.lab->pid, r.lab->start)) {
    ::kill(r.lab->pid, SIGTERM);
    ++s.stopped;
    if (!WaitGone({{r.lab->pid, r.lab->start}}, 45)) {
      ::kill(r.lab->pid, SIGKILL);
      WaitGone({{r.lab->pid, r.lab->start}}, 5);
    }
  }
  // What is left: the recorded children (each leads its process group) ...
  std::vector<std::pair<pid_t, uint64_t>> left;
  for (const Recorded& c : r.children) {
    if (!Alive(c.pid, c.start)) continue;
    ::kill(-c.pid, SIGTERM);
    ::kill(c.pid, SIGTERM);
    left.emplace_back(c.pid, c.start);
    ++s.stopped;
  }
  if (!WaitGone(left, 5)) {
    for (const auto& [pid, start] : left) {
      if (!Alive(pid, start)) continue;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
    WaitGone(left, 5);
  }
  // ... and anything else that names the directory (ranks of a supervisor
  // that died without taking them along).
  std::vector<std::pair<pid_t, uint64_t>> strays;
  for (pid_t pid : ProcessesUnder(dir)) {
    const uint64_t start = ProcessStartTicks(pid);
    if (start == 0) continue;
    ::kill(pid, SIGKILL);
    strays.emplace_back(pid, start);
    ++s.stopped;
  }
  WaitGone(strays, 5);
  for (const auto& [pid, start] : left) s.left += Alive(pid, start);
  for (const auto& [pid, start] : strays) s.left += Alive(pid, start);
  // Listening sockets go with their processes; give the kernel a moment.
  std::set<int> ports;
  if (r.lab && r.lab->port > 0) ports.insert(r.lab->port);
  for (const Recorded& c : r.children) {
    if (c.port > 0) ports.insert(c.port);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int port : ports) {
    while (PortListening(port) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (PortListening(port)) s.ports_in_use.push_back(port);
  }
  if (summary != nullptr) *summary = s;
  return Ok();
}

}  // namespace anxin::lab
