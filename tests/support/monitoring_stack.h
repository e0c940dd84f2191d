// The monitoring stack on loopback for end-to-end tests: `anxin agent` as a
// child process, a real Prometheus and a real Alertmanager (Debian's
// `prometheus` and `prometheus-alertmanager`) on ports picked at run time,
// and the small helpers the tests around them share. Every process is a
// Subprocess with a time limit, killed (SIGKILL to its group) when its object
// goes, so an assertion that returns early leaves nothing running.
//
//   TempDir dir;
//   AgentProcess agent(dir, {"--scenario", "faults", "--interval", "500ms"});
//   PrometheusProcess prom(dir, "scrape_configs: [...]");
//   ASSERT_TRUE(WaitFor([&] { return prom.Query("anxin_device_up").size() == 8; }, 25s));
//
// Thread safety: one test thread per object.
#ifndef ANXIN_TESTS_SUPPORT_MONITORING_STACK_H_
#define ANXIN_TESTS_SUPPORT_MONITORING_STACK_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::testing {

inline constexpr const char* kPromtool = "/usr/bin/promtool";
inline constexpr const char* kPrometheus = "/usr/bin/prometheus";
inline constexpr const char* kAlertmanager = "/usr/bin/prometheus-alertmanager";

inline std::string UrlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A child process whose standard error is kept for failure messages.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv, stopped after limit whatever happens.
  bool Start(std::vector<std::string> argv, std::chrono::seconds limit,
             std::vector<std::string> env = {}) {
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.env = std::move(env);
    o.timeout = limit;
    o.on_stderr = [this](const OutputLine& l) {
      std::lock_guard lock(mu_);
      stderr_ += l.text + "\n";
    };
    auto p = Subprocess::Start(std::move(o));
    EXPECT_THAT(p, IsOk());
    if (!p) return false;
    process_ = std::move(*p);
    return true;
  }
  bool Running() const { return process_ && process_->Running(); }
  std::string Stderr() {
    std::lock_guard lock(mu_);
    return stderr_;
  }
  // SIGTERM, then SIGKILL after grace; how it ended.
  Result<ExitStatus> Stop(std::chrono::seconds grace = std::chrono::seconds(10)) {
    if (!process_) return std::unexpected(Error(ErrorCode::kFailedPrecondition, "not started"));
    return process_->Stop(grace);
  }

 private:
  std::unique_ptr<Subprocess> process_;
  std::mutex mu_;
  std::string stderr_;
};

// `anxin agent` serving on 127.0.0.1 (port from --port-file), its socket in
// dir/run/, for at most two minutes; extra arguments go last.
class AgentProcess {
 public:
  // extra may name its own --socket (e.g. "" for none) and --duration; env:
  // "NAME=VALUE" entries added to the agent's environment.
  explicit AgentProcess(const TempDir& dir, std::vector<std::string> extra = {},
                        std::string node = "node-a", std::vector<std::string> env = {}) {
    const auto has = [&](const char* flag) {
      return std::find(extra.begin(), extra.end(), flag) != extra.end();
    };
    const std::string port_file = dir / "agent.port";
    std::vector<std::string> argv = {AnxinBinary(), "agent",   "--port", "0",
                                     "--port-file", port_file, "--node", node};
    if (auto at = std::find(extra.begin(), extra.end(), "--socket");
        at != extra.end() && at + 1 != extra.end()) {
      socket_ = *(at + 1);
    } else {
      socket_ = dir / "run/agent.sock";  // the directory does not exist yet
      argv.insert(argv.end(), {"--socket", socket_});
    }
    if (!has("--duration")) argv.insert(argv.end(), {"--duration", "120s"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    // The agent stops itself (--duration); this limit only bounds a hang.
    if (!child_.Start(std::move(argv), std::chrono::seconds(900), std::move(env))) return;
    EXPECT_TRUE(WaitFor([&] {
      std::string text = ReadTextFile(port_file);
      if (text.empty() || text.back() != '\n') return false;
      port_ = std::stoi(text);
      return true;
    })) << Stderr();
    // The agent prints its serving line before it writes the port file, but
    // the line reaches Stderr() through a pipe that another thread reads.
    if (port_ > 0) {
      EXPECT_TRUE(WaitFor([&] {
        return Stderr().find("anxin agent: serving") != std::string::npos;
      })) << Stderr();
    }
  }
  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  std::string Stderr() { return child_.Stderr(); }
  std::string Get(const std::string& path, int* status = nullptr) {
    HttpClient c("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(5000)});
    auto r = c.Get(path);
    if (!r) return "";
    if (status) *status = r->status;
    return r->body;
  }
  Result<ExitStatus> Stop() { return child_.Stop(); }

 private:
  ChildProcess child_;
  std::string socket_;
  int port_ = 0;
};

// A real Prometheus with config_yaml (written to dir/prometheus.yml; relative
// rule_files resolve against dir) and its TSDB in dir/prometheus-data.
class PrometheusProcess {
 public:
  PrometheusProcess(const TempDir& dir, const std::string& config_yaml,
                    std::vector<std::string> extra = {}) {
    const std::string config = dir.Write("prometheus.yml", config_yaml);
    port_ = FreePort();
    EXPECT_GT(port_, 0);
    std::vector<std::string> argv = {kPrometheus, "--config.file=" + config,
                                     "--storage.tsdb.path=" + dir.Mkdir("prometheus-data"),
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                     "--log.level=warn"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_.Start(std::move(argv), std::chrono::seconds(180));
  }
  int port() const { return port_; }
  std::string Stderr() { return child_.Stderr(); }
  // The result vector of an instant query; [] on any failure.
  nlohmann::json Query(const std::string& q) {
    HttpClient c("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(5000)});
    auto r = c.Get("/api/v1/query?query=" + UrlEncode(q));
    if (!r || !r->ok()) return nlohmann::json::array();
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j["status"] != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }
  Result<ExitStatus> Stop() { return child_.Stop(std::chrono::seconds(5)); }

 private:
  ChildProcess child_;
  int port_ = 0;
};

// A real Alertmanager with config_yaml, clustering off, state in
// dir/alertmanager-data.
class AlertmanagerProcess {
 public:
  AlertmanagerProcess(const TempDir& dir, const std::string& config_yaml) {
    const std::string config = dir.Write("alertmanager.yml", config_yaml);
    port_ = FreePort();
    EXPECT_GT(port_, 0);
    child_.Start({kAlertmanager, "--config.file=" + config,
                  "--storage.path=" + dir.Mkdir("alertmanager-data"),
                  "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                  "--cluster.listen-address=", "--log.level=warn"},
                 std::chrono::seconds(180));
  }
  int port() const { return port_; }
  std::string Stderr() { return child_.Stderr(); }
  bool Ready() {
    HttpClient c("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(2000)});
    auto r = c.Get("/-/ready");
    return r && r->ok();
  }
  // GET /api/v2/alerts: the alerts it holds; [] on any failure.
  nlohmann::json Alerts() {
    HttpClient c("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(5000)});
    auto r = c.Get("/api/v2/alerts");
    if (!r || !r->ok()) return nlohmann::json::array();
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    return j.is_discarded() ? nlohmann::json::array() : j;
  }
  Result<ExitStatus> Stop() { return child_.Stop(std::chrono::seconds(5)); }

 private:
  ChildProcess child_;
  int port_ = 0;
};

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_SUPPORT_MONITORING_STACK_H_
