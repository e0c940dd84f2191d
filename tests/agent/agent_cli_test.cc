// `anxin agent` as users run it: its exposition passes `promtool check
// metrics`, a real Prometheus scrapes it and answers queries for its series,
// the C SDK client's steps and collectives appear in /metrics, malformed
// datagrams are counted, and errors follow docs/exit-codes.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/strings.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/monitor/sdk_wire.h"
#include "tests/agent/agent_testing.h"

namespace anxin {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::AgentProcess;
using ::anxin::testing::AnxinBinary;
using ::anxin::testing::FreePort;
using ::anxin::testing::IsOk;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kPromtool = "/usr/bin/promtool";
constexpr const char* kPrometheus = "/usr/bin/prometheus";

std::string ClientBinary() { return std::string(ANXIN_BINARY_DIR) + "/tests/monitor/sdk_c_client"; }

std::optional<double> Value(const std::string& text, const std::string& series) {
  return ::anxin::testing::MetricValue(text, series);
}

// promtool's verdict on an exposition: "" when it has nothing to say.
std::string Promtool(const TempDir& dir, const std::string& exposition) {
  const std::string file = dir.Write("exposition.txt", exposition);
  auto out = RunCommand({kPromtool, "check", "metrics"}, {.timeout = 30s, .stdin_path = file});
  if (!out) return out.error().ToString();
  // The DCGM compatibility names are DCGM's own (upper case), which promtool's
  // lint (exit 3, one line per series) flags; anything else is a finding.
  std::string findings;
  const std::string text = out->stdout_text + out->stderr_text;
  for (std::string_view line : SplitLines(text)) {
    if (line.empty()) continue;
    if (out->exit_code == 3 && line.starts_with("DCGM_FI_") &&
        line.ends_with("label names should be written in 'snake_case' not 'camelCase'")) {
      continue;
    }
    findings += std::string(line) + "\n";
  }
  if ((out->exit_code != 0 && out->exit_code != 3) || !findings.empty())
    return "exit " + std::to_string(out->exit_code) + ": " + findings;
  return "";
}

void SendDatagram(const std::string& path, std::span<const uint8_t> bytes) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  EXPECT_EQ(::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

std::string UrlEncode(std::string_view s) {
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

TEST(AgentCliTest, OnceOnTheFaultsScenarioPassesPromtool) {
  ASSERT_TRUE(std::filesystem::exists(kPromtool)) << kPromtool << ": run scripts/install-deps";
  TempDir dir;
  for (const char* compat : {"none", "npu-exporter", "dcgm"}) {
    auto out = RunAnxin({"agent", "--once", "--scenario", "faults", "--at", "75s", "--node",
                         "node-a", "--compat", compat});
    ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
    const std::string& t = out.stdout_text;
    EXPECT_EQ(Promtool(dir, t), "") << compat;
    EXPECT_THAT(t, HasSubstr("# TYPE anxin_device_up gauge\n"));
    // NPU 7 fell off the bus at 70 s: down, and no readings.
    EXPECT_THAT(t, HasSubstr(R"(anxin_device_up{node="node-a",device="7",)"));
    EXPECT_THAT(t, Not(HasSubstr(R"(anxin_device_temperature_celsius{node="node-a",device="7",)")));
    EXPECT_THAT(t, HasSubstr(R"(anxin_agent_build_info{node="node-a",version=")"));
    EXPECT_THAT(t, HasSubstr("anxin_agent_resident_memory_bytes{node=\"node-a\"} "));
    if (std::string(compat) == "npu-exporter") {
      EXPECT_THAT(t, HasSubstr("npu_chip_info_hbm_used_memory{id=\"0\""));
    }
    if (std::string(compat) == "dcgm") {
      EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_FB_USED{gpu=\"0\""));
    }
  }
}

TEST(AgentCliTest, ErrorsFollowTheExitCodes) {
  TempDir dir;
  auto bad_compat = RunAnxin({"agent", "--once", "--compat", "prometheus"});
  EXPECT_EQ(bad_compat.exit_code, 2);
  EXPECT_THAT(bad_compat.stderr_text,
              StartsWith("error: --compat: unknown compatibility mode 'prometheus': use "
                         "npu-exporter, dcgm or none\n"));
  auto bad_interval = RunAnxin({"agent", "--once", "--interval", "0s"});
  EXPECT_EQ(bad_interval.exit_code, 2);
  EXPECT_THAT(bad_interval.stderr_text, StartsWith("error: --interval: "));
  auto at_alone = RunAnxin({"agent", "--at", "10s", "--duration", "1s"});
  EXPECT_EQ(at_alone.exit_code, 2);
  EXPECT_THAT(at_alone.stderr_text, HasSubstr("--at needs --once"));
  auto bad_listen = RunAnxin({"agent", "--listen", "localhost", "--duration", "1s"});
  EXPECT_EQ(bad_listen.exit_code, 2);
  EXPECT_THAT(bad_listen.stderr_text, StartsWith("error: --listen: no port"));
  // A socket directory that cannot be made is the environment's problem.
  dir.Write("file", "x");
  auto socket = RunAnxin(
      {"agent", "--port", "0", "--socket", dir / "file/sub/agent.sock", "--duration", "1s"});
  EXPECT_EQ(socket.exit_code, 3);
  EXPECT_THAT(socket.stderr_text, StartsWith("error: cannot create the directory "));
  EXPECT_THAT(socket.stderr_text, HasSubstr("--socket or ANXIN_AGENT_SOCKET"));
  // A bad agent: section in the configuration file names its place.
  const std::string config = dir.Write("anxin.yaml", "agent:\n  compat: nvidia\n");
  auto bad_config = RunAnxin({"--config", config, "agent", "--once"});
  EXPECT_EQ(bad_config.exit_code, 2);
  EXPECT_THAT(bad_config.stderr_text, HasSubstr("anxin.yaml:2:11: agent.compat: unknown "
                                                "compatibility mode 'nvidia'"));
}

TEST(AgentCliTest, ServesTheSdkClientsTelemetryAndCountsBadDatagrams) {
  TempDir dir;
  AgentProcess agent(dir, {"--scenario", "default"});
  ASSERT_GT(agent.port(), 0);
  EXPECT_THAT(agent.Stderr(), HasSubstr("anxin agent: serving http://127.0.0.1:"));
  int status = 0;
  EXPECT_EQ(agent.Get("/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  auto devices = nlohmann::json::parse(agent.Get("/api/v1/devices"), nullptr, false);
  ASSERT_FALSE(devices.is_discarded());
  EXPECT_EQ(devices["node"], "node-a");
  ASSERT_EQ(devices["devices"].size(), 8u);
  EXPECT_EQ(devices["devices"][0]["model"], "Ascend910C");

  // 50 steps of the C client: each with one 1 ms kernel (the last one 4 ms)
  // and a 256 MiB all_reduce in 10 ms, on rank 2 of 8.
  auto client = RunCommand({ClientBinary(), "50"},
                           {.timeout = 60s,
                            .env = {"ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=e2e",
                                    "RANK=2", "WORLD_SIZE=8", "ANXIN_SDK_RETRY_MS=100"}});
  ASSERT_THAT(client, IsOk());
  ASSERT_EQ(client->exit_code, 0) << client->stdout_text << client->stderr_text;

  // One datagram that is not ours, one cut short.
  const std::string garbage = "hello, agent";
  SendDatagram(agent.socket(),
               std::span(reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size()));
  monitor::SdkDatagram d;
  d.sender.job = "e2e";
  d.events.push_back({.time_ns = 1, .body = monitor::SdkHeartbeat{}});
  auto encoded = monitor::EncodeSdkDatagram(d);
  ASSERT_THAT(encoded, IsOk());
  SendDatagram(agent.socket(), std::span(encoded->data(), encoded->size() - 4));

  const std::string l = R"({node="node-a",job="e2e",rank="2")";
  std::string m;
  ASSERT_TRUE(WaitFor([&] {
    m = agent.Get("/metrics");
    return Value(m, "anxin_job_step_seconds_count" + l + "}") == 50 &&
           Value(m, R"(anxin_sdk_datagrams_rejected_total{node="node-a",reason="truncated"})") == 1;
  })) << m;
  EXPECT_EQ(Value(m, "anxin_job_last_step" + l + "}"), 49);
  const double algbw = 256.0 * 1024 * 1024 / 0.01;
  EXPECT_DOUBLE_EQ(
      *Value(m, "anxin_job_collective_algbw_bytes_per_second" + l + R"(,op="all_reduce"})"), algbw);
  EXPECT_DOUBLE_EQ(
      *Value(m, "anxin_job_collective_busbw_bytes_per_second" + l + R"(,op="all_reduce"})"),
      algbw * 2 * 7 / 8);
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_kernel_jitter_ratio" + l + R"(,kernel="gemm_bf16"})"), 4);
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_kernel_seconds_median" + l + R"(,kernel="gemm_bf16"})"),
                   0.001);
  EXPECT_EQ(Value(m, "anxin_job_allocator_reserved_bytes" + l + "}"), 8.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*Value(m, "anxin_job_allocator_fragmentation_ratio" + l + "}"), 0.125);
  EXPECT_EQ(Value(m, "anxin_job_last_checkpoint_step" + l + "}"), 50);
  EXPECT_EQ(Value(m, R"(anxin_sdk_datagrams_rejected_total{node="node-a",reason="malformed"})"), 1);
  if (std::filesystem::exists(kPromtool)) {
    TempDir lint;
    EXPECT_EQ(Promtool(lint, m), "");
  }
  // SIGTERM ends it cleanly, and it takes its socket with it.
  auto end = agent.Stop();
  ASSERT_THAT(end, IsOk());
  EXPECT_EQ(end->exit_code, 0) << agent.Stderr();
  EXPECT_FALSE(std::filesystem::exists(agent.socket()));
}

TEST(AgentCliTest, PrometheusScrapesTheAgent) {
  ASSERT_TRUE(std::filesystem::exists(kPrometheus)) << kPrometheus << ": run scripts/install-deps";
  TempDir dir;
  AgentProcess agent(dir, {"--scenario", "faults", "--interval", "500ms"});
  ASSERT_GT(agent.port(), 0);
  // The agent's series carry a `job` label of their own (the training
  // job): honor_labels keeps it instead of renaming it exported_job.
  const std::string config =
      dir.Write("prometheus.yml",
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: anxin-agent\n    honor_labels: true\n"
                "    static_configs:\n      - targets: ['127.0.0.1:" +
                    std::to_string(agent.port()) + "']\n");
  const int port = FreePort();
  ASSERT_GT(port, 0);
  SubprocessOptions o;
  o.argv = {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir.Mkdir("data"),
            "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"};
  auto prom = Subprocess::Start(std::move(o));
  ASSERT_THAT(prom, IsOk());
  HttpClient c("127.0.0.1", port, {.timeout = 5000ms});
  auto query = [&](const std::string& q) -> nlohmann::json {
    auto r = c.Get("/api/v1/query?query=" + UrlEncode(q));
    if (!r || !r->ok()) return nlohmann::json::array();
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j["status"] != "success") return nlohmann::json::array();
    return j["data"]["result"];
  };
  nlohmann::json up;
  ASSERT_TRUE(WaitFor([&] { return (up = query("anxin_device_up")).size() == 8; }, 25s))
      << up.dump();
  for (const auto& s : up) {
    EXPECT_EQ(s["metric"]["node"], "node-a");
    EXPECT_EQ(s["metric"]["job"], "anxin-agent");
    EXPECT_EQ(s["metric"]["model"], "Ascend910C");
  }
  nlohmann::json target = query(R"(up{job="anxin-agent"})");
  ASSERT_EQ(target.size(), 1u);
  EXPECT_EQ(target[0]["value"][1], "1");
  nlohmann::json temp = query(R"(anxin_device_temperature_celsius{device="0"})");
  ASSERT_EQ(temp.size(), 1u);
  EXPECT_GT(std::stod(temp[0]["value"][1].get<std::string>()), 30);

  // The SDK's telemetry keeps the training job's label.
  auto client = RunCommand({ClientBinary(), "20"},
                           {.timeout = 60s,
                            .env = {"ANXIN_AGENT_SOCKET=" + agent.socket(), "ANXIN_JOB_ID=e2e",
                                    "RANK=0", "WORLD_SIZE=4", "ANXIN_SDK_RETRY_MS=100"}});
  ASSERT_THAT(client, IsOk());
  ASSERT_EQ(client->exit_code, 0) << client->stdout_text;
  nlohmann::json steps;
  ASSERT_TRUE(WaitFor(
      [&] {
        steps = query(R"(anxin_job_step_seconds_count{job="e2e",rank="0"})");
        return steps.size() == 1 && steps[0]["value"][1] == "20";
      },
      20s))
      << steps.dump();
  (void)(*prom)->Stop(5s);
  EXPECT_EQ(agent.Stop().value().exit_code, 0);
}

}  // namespace
}  // namespace anxin
