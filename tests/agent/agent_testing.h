// Helpers for tests that run the real `anxin agent`: start it on a free port
// with its SDK socket in a scratch directory, read its /metrics, and pick
// series out of an exposition.
//
//   TempDir dir;
//   AgentProcess agent(dir, {"--scenario", "default"});
//   ASSERT_GT(agent.port(), 0);
//   std::string m;
//   ASSERT_TRUE(WaitFor([&] { return MetricValue(m = agent.Get("/metrics"),
//                                                "anxin_device_up{...}") == 1; }));
//
// Thread safety: an AgentProcess may be read from any thread.
#ifndef ANXIN_TESTS_AGENT_AGENT_TESTING_H_
#define ANXIN_TESTS_AGENT_AGENT_TESTING_H_

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::testing {

// The value of one series (name and labels exactly as exposed), if present.
inline std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

// Polls done() every 50 ms until it holds (true) or timeout passes (false).
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// A TCP port on 127.0.0.1 nobody listens on right now.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// `anxin agent --port 0` for node "node-a", its SDK socket at
// dir/run/agent.sock (the directory does not exist yet), stopped after 120 s
// unless `extra` says otherwise, and at the latest when the object goes.
// `env`: "NAME=VALUE" entries added to the agent's environment.
class AgentProcess {
 public:
  explicit AgentProcess(const TempDir& dir, std::vector<std::string> extra = {},
                        std::vector<std::string> env = {}) {
    socket_ = dir / "run/agent.sock";
    const std::string port_file = dir / "port";
    std::vector<std::string> argv = {AnxinBinary(), "agent",    "--port", "0",      "--port-file",
                                     port_file,     "--socket", socket_,  "--node", "node-a"};
    if (std::find(extra.begin(), extra.end(), "--duration") == extra.end())
      argv.insert(argv.end(), {"--duration", "120s"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    SubprocessOptions o;
    o.argv = argv;
    o.env = std::move(env);
    o.on_stderr = [this](const OutputLine& l) {
      std::lock_guard lock(mu_);
      stderr_ += l.text + "\n";
    };
    auto p = Subprocess::Start(std::move(o));
    EXPECT_THAT(p, IsOk());
    if (!p) return;
    process_ = std::move(*p);
    EXPECT_TRUE(WaitFor([&] {
      std::string text = ReadTextFile(port_file);
      if (text.empty() || text.back() != '\n') return false;
      port_ = std::stoi(text);
      return true;
    })) << Stderr();
  }
  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  std::string Stderr() {
    std::lock_guard lock(mu_);
    return stderr_;
  }
  // The body of GET path ("" when the request fails).
  std::string Get(const std::string& path, int* status = nullptr) {
    HttpClient c("127.0.0.1", port_, {.timeout = std::chrono::milliseconds(5000)});
    auto r = c.Get(path);
    if (!r) return "";
    if (status) *status = r->status;
    return r->body;
  }
  Result<ExitStatus> Stop() { return process_->Stop(std::chrono::seconds(10)); }

 private:
  std::unique_ptr<Subprocess> process_;
  std::mutex mu_;
  std::string stderr_;
  std::string socket_;
  int port_ = 0;
};

}  // namespace anxin::testing

#endif  // ANXIN_TESTS_AGENT_AGENT_TESTING_H_
