// `anxin agent --web.config.file` with real clients: curl and a real
// Prometheus scrape the agent over TLS with basic auth (and, with a client CA,
// only with a client certificate); wrong or missing credentials get 401; a
// bad web configuration file stops the agent with its place named. Also the
// doctor checks the agent runs on a host tree, as Prometheus sees them.
#include <anxin/sdk.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "tests/support/monitoring_stack.h"

namespace anxin {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::anxin::testing::AgentProcess;
using ::anxin::testing::AnxinBinary;
using ::anxin::testing::FreePort;
using ::anxin::testing::IsOk;
using ::anxin::testing::kPrometheus;
using ::anxin::testing::MakeTestCertificates;
using ::anxin::testing::PrometheusProcess;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kCurl = "/usr/bin/curl";
constexpr const char* kPassword = "correct horse battery staple";

// The bcrypt hash through the agent's own helper, as docs/agent.md shows.
std::string Hash(const TempDir& dir) {
  const std::string input = dir.Write("password.txt", std::string(kPassword) + "\n");
  auto out = RunCommand({AnxinBinary(), "agent", "--hash-password"},
                        {.timeout = 30s, .stdin_path = input});
  EXPECT_THAT(out, IsOk());
  if (!out) return "";
  EXPECT_EQ(out->exit_code, 0) << out->stderr_text;
  EXPECT_THAT(out->stdout_text, StartsWith("$2b$10$"));
  std::string hash = out->stdout_text;
  while (!hash.empty() && hash.back() == '\n') hash.pop_back();
  return hash;
}

// An agent for node "node-s", without an SDK socket unless extra names one.
AgentProcess Agent(const TempDir& dir, std::vector<std::string> extra) {
  if (std::find(extra.begin(), extra.end(), "--socket") == extra.end()) {
    extra.insert(extra.end(), {"--socket", ""});
  }
  return AgentProcess(dir, std::move(extra), "node-s");
}

struct Curl {
  int http_code = 0;  // 0: no HTTP response (TLS refused, say)
  int exit_code = -1;
  std::string body;
};

Curl RunCurl(const TempDir& dir, std::vector<std::string> args) {
  const std::string body = dir / "curl.out";
  std::vector<std::string> argv = {kCurl, "-sS", "--max-time", "20",
                                   "-o",  body,  "-w",         "%{http_code}"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = RunCommand(argv, {.timeout = 30s});
  Curl c;
  if (!out) return c;
  c.exit_code = out->exit_code;
  c.http_code = std::atoi(out->stdout_text.c_str());
  c.body = ::anxin::testing::ReadTextFile(body);
  return c;
}

TEST(AgentSecurityTest, TlsAndBasicAuthWithCurlAndPrometheus) {
  ASSERT_TRUE(fs::exists(kCurl)) << kCurl << ": run scripts/install-deps";
  ASSERT_TRUE(fs::exists(kPrometheus)) << kPrometheus << ": run scripts/install-deps";
  TempDir dir;
  ASSERT_TRUE(MakeTestCertificates(dir));
  const std::string hash = Hash(dir);
  ASSERT_FALSE(hash.empty());
  // Paths relative to the web configuration file, as the toolkit reads them.
  const std::string web = dir.Write("web.yml",
                                    "tls_server_config:\n"
                                    "  cert_file: server.crt\n"
                                    "  key_file: server.key\n"
                                    "basic_auth_users:\n"
                                    "  prometheus: " +
                                        hash + "\n");
  AgentProcess agent =
      Agent(dir, {"--scenario", "faults", "--doctor-interval", "0", "--web.config.file", web});
  ASSERT_GT(agent.port(), 0) << agent.Stderr();
  EXPECT_THAT(agent.Stderr(), HasSubstr("serving https://127.0.0.1:"));
  EXPECT_THAT(agent.Stderr(), HasSubstr("basic auth on"));
  const std::string url = "https://127.0.0.1:" + std::to_string(agent.port());

  Curl good = RunCurl(dir, {"--cacert", dir / "ca.crt", "-u",
                            std::string("prometheus:") + kPassword, url + "/metrics"});
  EXPECT_EQ(good.http_code, 200);
  EXPECT_THAT(good.body, HasSubstr("anxin_device_up{node=\"node-s\",device=\"0\""));
  Curl none = RunCurl(dir, {"--cacert", dir / "ca.crt", url + "/metrics"});
  EXPECT_EQ(none.http_code, 401);
  EXPECT_THAT(none.body, Not(HasSubstr("anxin_device_up")));
  Curl wrong =
      RunCurl(dir, {"--cacert", dir / "ca.crt", "-u", "prometheus:guess", url + "/healthz"});
  EXPECT_EQ(wrong.http_code, 401);
  // Without the CA, curl refuses the certificate; over plain HTTP there is no answer.
  Curl untrusted = RunCurl(dir, {"-u", std::string("prometheus:") + kPassword, url + "/metrics"});
  EXPECT_EQ(untrusted.http_code, 0);
  EXPECT_NE(untrusted.exit_code, 0);
  Curl plain = RunCurl(dir, {"http://127.0.0.1:" + std::to_string(agent.port()) + "/metrics"});
  EXPECT_NE(plain.http_code, 200);

  // A real Prometheus scrapes it with the same CA and password.
  const std::string password_file = dir.Write("prom-password", kPassword);
  PrometheusProcess prom(dir,
                         "global:\n  scrape_interval: 1s\n"
                         "scrape_configs:\n  - job_name: anxin-agent\n    honor_labels: true\n"
                         "    scheme: https\n"
                         "    tls_config:\n      ca_file: " +
                             (dir / "ca.crt") +
                             "\n"
                             "    basic_auth:\n      username: prometheus\n      password_file: " +
                             password_file +
                             "\n"
                             "    static_configs:\n      - targets: ['127.0.0.1:" +
                             std::to_string(agent.port()) + "']\n");
  nlohmann::json result;
  ASSERT_TRUE(WaitFor([&] { return (result = prom.Query("anxin_device_up")).size() == 8; }, 30s))
      << result.dump() << prom.Stderr();
  EXPECT_EQ(result[0]["metric"]["node"], "node-s");
}

TEST(AgentSecurityTest, MutualTlsNeedsAClientCertificate) {
  ASSERT_TRUE(fs::exists(kCurl)) << kCurl << ": run scripts/install-deps";
  TempDir dir;
  ASSERT_TRUE(MakeTestCertificates(dir));
  const std::string web = dir.Write("web.yml",
                                    "tls_server_config:\n"
                                    "  cert_file: server.crt\n"
                                    "  key_file: server.key\n"
                                    "  client_auth_type: RequireAndVerifyClientCert\n"
                                    "  client_ca_file: ca.crt\n"
                                    "  min_version: TLS13\n");
  AgentProcess agent =
      Agent(dir, {"--scenario", "default", "--doctor-interval", "0", "--web.config.file", web});
  ASSERT_GT(agent.port(), 0) << agent.Stderr();
  const std::string url = "https://127.0.0.1:" + std::to_string(agent.port()) + "/metrics";
  Curl anonymous = RunCurl(dir, {"--cacert", dir / "ca.crt", url});
  EXPECT_NE(anonymous.http_code, 200);
  Curl with_cert = RunCurl(dir, {"--cacert", dir / "ca.crt", "--cert", dir / "client.crt", "--key",
                                 dir / "client.key", url});
  EXPECT_EQ(with_cert.http_code, 200);
  EXPECT_THAT(with_cert.body, HasSubstr("anxin_device_up"));
  // TLS 1.2 is refused when the file says TLS13.
  Curl old = RunCurl(dir, {"--cacert", dir / "ca.crt", "--cert", dir / "client.crt", "--key",
                           dir / "client.key", "--tlsv1.2", "--tls-max", "1.2", url});
  EXPECT_EQ(old.http_code, 0);
}

TEST(AgentSecurityTest, BadWebConfigStopsTheAgentWithItsPlace) {
  TempDir dir;
  const std::string web = dir.Write("web.yml", "basic_auth_users:\n  prometheus: secret\n");
  auto out = RunAnxin(
      {"agent", "--port", "0", "--socket", "", "--web.config.file", web, "--duration", "5s"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_THAT(out.stderr_text, HasSubstr("web.yml:2:15: basic_auth_users.prometheus: the "
                                         "password of 'prometheus' must be a bcrypt hash"));
  EXPECT_THAT(out.stderr_text, HasSubstr("anxin agent --hash-password"));
  auto missing = RunAnxin({"agent", "--once", "--web.config.file", dir / "absent.yml"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.stderr_text, HasSubstr("absent.yml"));
  // Standard input is /dev/null: no password.
  auto empty = RunCommand({AnxinBinary(), "agent", "--hash-password"}, {.timeout = 30s});
  ASSERT_THAT(empty, IsOk());
  EXPECT_EQ(empty->exit_code, 2);
  EXPECT_THAT(empty->stderr_text, HasSubstr("reads the password from standard input"));
}

TEST(AgentSecurityTest, DoctorChecksOfAHostTreeAreExported) {
  TempDir dir;
  fs::copy(ANXIN_SOURCE_DIR "/tests/fixtures/doctor/host_a", dir.path(),
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  dir.Write("proc/1311/comm", "irqbalance\n");
  auto out = RunAnxin({"agent", "--once", "--node", "node-d", "--doctor-root", dir.path()});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text,
              HasSubstr("anxin_doctor_check_status{node=\"node-d\",check=\"irq.irqbalance\","
                        "state=\"fail\"} 1\n"));
  EXPECT_THAT(out.stdout_text, HasSubstr("anxin_doctor_runs_total{node=\"node-d\"} 1\n"));
  // ANXIN_DOCTOR_ROOT, as the DaemonSet sets it.
  auto env = RunAnxin({"agent", "--once", "--node", "node-d"},
                      {.env = {"ANXIN_DOCTOR_ROOT=" + dir.path()}});
  ASSERT_EQ(env.exit_code, 0) << env.stderr_text;
  EXPECT_THAT(env.stdout_text,
              HasSubstr("anxin_doctor_check_status{node=\"node-d\",check=\"irq.irqbalance\","
                        "state=\"fail\"} 1\n"));
  auto off = RunAnxin({"agent", "--once", "--doctor-interval", "0"});
  ASSERT_EQ(off.exit_code, 0);
  EXPECT_THAT(off.stdout_text, Not(HasSubstr("anxin_doctor_check_status")));
  auto bad = RunAnxin({"agent", "--once", "--doctor-interval", "100ms"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, StartsWith("error: --doctor-interval: "));
}

// deploy/metrics.txt is the contract of the rules and the dashboard: the
// agent exports every name on it (devices on the faults scenario once it has
// gone wrong; jobs and the SDK receiver once a client has reported and a
// malformed datagram has been refused).
TEST(AgentSecurityTest, ExportsEveryNameOfDeployMetricsTxt) {
  const std::string list = ::anxin::testing::ReadTextFile(ANXIN_SOURCE_DIR "/deploy/metrics.txt");
  std::vector<std::string> names;
  for (std::string_view line : SplitLines(list)) {
    if (!line.empty() && line[0] != '#') names.emplace_back(Trim(line));
  }
  ASSERT_GT(names.size(), 40u);
  auto once = RunAnxin({"agent", "--once", "--scenario", "faults", "--at", "75s"});
  ASSERT_EQ(once.exit_code, 0) << once.stderr_text;

  TempDir dir;
  const std::string socket = dir / "agent.sock";
  AgentProcess agent =
      Agent(dir, {"--scenario", "default", "--doctor-interval", "0", "--socket", socket});
  ASSERT_GT(agent.port(), 0) << agent.Stderr();
  auto client = RunCommand(
      {std::string(ANXIN_BINARY_DIR) + "/tests/monitor/sdk_c_client", "20"},
      {.timeout = 60s,
       .env = {"ANXIN_AGENT_SOCKET=" + socket, "ANXIN_JOB_ID=names", "RANK=0", "WORLD_SIZE=2"}});
  ASSERT_THAT(client, IsOk());
  ASSERT_EQ(client->exit_code, 0) << client->stdout_text;
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socket.c_str());
  ASSERT_EQ(::sendto(fd, "junk", 4, 0, reinterpret_cast<sockaddr*>(&a), sizeof a), 4);
  ::close(fd);
  // A supervisor's recovery counts, as `anxin run` sends them.
  ASSERT_EQ(anxin_sdk_set_socket(socket.c_str()), 0);
  ASSERT_EQ(anxin_sdk_set_identity("names", 0, 2), 0);
  anxin_report_recovery("hang", 1, 1, 2'000'000'000);
  ASSERT_EQ(anxin_sdk_flush(5000), 0);
  HttpClient http("127.0.0.1", agent.port(), {.timeout = 5000ms});
  std::string text;
  auto has = [&](const std::string& name) {
    return text.starts_with(name + "{") || text.starts_with(name + " ") ||
           text.find("\n" + name + "{") != std::string::npos ||
           text.find("\n" + name + " ") != std::string::npos;
  };
  ASSERT_TRUE(WaitFor([&] {
    auto r = http.Get("/metrics");
    text = r && r->ok() ? r->body : "";
    return has("anxin_sdk_datagrams_rejected_total") && has("anxin_job_allocator_ooms_total") &&
           has("anxin_job_restarts_total");
  })) << text;
  text = once.stdout_text + text;
  for (const std::string& name : names) EXPECT_TRUE(has(name)) << name;
}

}  // namespace
}  // namespace anxin
