// --hosts pieces without a network: the hosts file, the ssh argv (quoting,
// batch mode, timeouts), the parallel runner with a fake transport, the drift
// matrix, and the process runner over base's RunCommand. The real-ssh test is in
// tests/doctor (sshd in network namespaces).
#include "anxin/doctor/multi_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "anxin/base/testing.h"

namespace anxin::doctor {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HostsFile, ParsesForms) {
  auto h =
      ParseHostsFile("# rack 1\nnode01\nroot@node02:2222  # spare\n\n[fe80::1]:22\nops@[::1]\n");
  ASSERT_THAT(h, IsOk());
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].target, "node01");
  EXPECT_EQ((*h)[0].port, 0);
  EXPECT_EQ((*h)[1].target, "root@node02");
  EXPECT_EQ((*h)[1].port, 2222);
  EXPECT_EQ((*h)[1].label, "root@node02:2222");
  EXPECT_EQ((*h)[2].target, "fe80::1");
  EXPECT_EQ((*h)[3].target, "ops@::1");
}

TEST(HostsFile, RefusesOptionInjectionAndJunk) {
  EXPECT_THAT(ParseHostsFile("-oProxyCommand=x\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("line 1")));
  EXPECT_THAT(ParseHostsFile("a;b\n"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("';'")));
  EXPECT_THAT(ParseHostsFile("a b\n"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseHostsFile("node:99999\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("port")));
  EXPECT_THAT(ParseHostsFile("# nothing\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no hosts")));
}

TEST(SshArgv, BatchModeTimeoutsAndQuotedRemoteCommand) {
  RemoteOptions o;
  o.ssh_config = "/tmp/cfg";
  o.timeout_s = 7;
  o.remote_anxin = "/opt/anxin it's";
  o.remote_args = {"--only", "irq,qos"};
  auto a = SshArgv(HostEntry{"root@n1", 2222, "n1"}, o);
  EXPECT_THAT(a, ElementsAre("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=7", "-T", "-F",
                             "/tmp/cfg", "-p", "2222", "--", "root@n1",
                             "'/opt/anxin it'\\''s' doctor --json '--only' 'irq,qos'"));
}

std::string ReportJson(const std::string& host, Severity irq, Severity qos) {
  Report r;
  r.host = host;
  Finding a;
  a.check_id = "irq.irqbalance";
  a.severity = irq;
  a.summary = "irq " + std::string(SeverityName(irq));
  Finding b;
  b.check_id = "qos.trust";
  b.severity = qos;
  b.summary = "trust " + std::string(SeverityName(qos));
  r.findings = {a, b};
  return ToJson(r).dump();
}

TEST(RunOnHosts, ParallelMatrixMarksDriftAndUnreachableHosts) {
  std::vector<HostEntry> hosts = {{"a", 0, "a"}, {"b", 0, "b"}, {"c", 0, "c"}, {"d", 0, "d"}};
  std::atomic<int> in_flight{0}, max_in_flight{0};
  ProcessRunner fake = [&](const std::vector<std::string>& argv, double) -> Result<CommandOutput> {
    int now = ++in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    // Hold every call until two run at once (or a deadline), so parallelism is observed, not timed.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (max_in_flight.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    --in_flight;
    const std::string& host = argv[argv.size() - 2];
    CommandOutput out;
    if (host == "d") {
      out.exit_code = 255;
      out.stderr_text = "ssh: connect to host d port 22: Connection refused\n";
      return out;
    }
    Severity irq = host == "c" ? Severity::kFail : Severity::kOk;
    out.exit_code = irq == Severity::kFail ? 1 : 0;
    out.stdout_text = ReportJson(host, irq, Severity::kOk);
    return out;
  };
  RemoteOptions o;
  o.parallel = 4;
  auto results = RunOnHosts(hosts, o, fake);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_GE(max_in_flight.load(), 2);
  EXPECT_THAT(results[0].report, IsOk());
  EXPECT_THAT(results[3].report, HasCode(ErrorCode::kUnavailable, HasSubstr("Connection refused")));
  std::string m = RenderMatrix(results);
  EXPECT_THAT(m, HasSubstr("irq.irqbalance  ok      ok      fail*   n/a"));
  EXPECT_THAT(
      m, HasSubstr("unreachable: d: exit 255: ssh: connect to host d port 22: Connection refused"));
  EXPECT_THAT(m, HasSubstr("drift: c irq.irqbalance = fail: irq fail"));
  EXPECT_THAT(m, HasSubstr("3 of 4 hosts answered; 1 cells"));
  auto j = MatrixJson(results);
  EXPECT_EQ(j["matrix"]["irq.irqbalance"]["majority"], "ok");
  EXPECT_EQ(j["matrix"]["irq.irqbalance"]["drift"], nlohmann::json::array({"c"}));
  EXPECT_EQ(j["worst"], "fail");
  EXPECT_EQ(WorstOverHosts(results), Severity::kFail);
}

TEST(RunOnHosts, GarbageOutputIsAHostError) {
  ProcessRunner fake = [](const std::vector<std::string>&, double) -> Result<CommandOutput> {
    CommandOutput out;
    out.exit_code = 0;
    out.stdout_text = "bash: anxin: command not found";
    return out;
  };
  auto r = RunOnHosts({{"x", 0, "x"}}, RemoteOptions{}, fake);
  EXPECT_THAT(r[0].report, HasCode(ErrorCode::kDataLoss, HasSubstr("not JSON")));
}

TEST(RunOnHosts, AHostKilledByASignalSaysSo) {
  ProcessRunner fake = [](const std::vector<std::string>&, double) -> Result<CommandOutput> {
    CommandOutput out;
    out.signal = 9;
    return out;
  };
  auto r = RunOnHosts({{"x", 0, "x"}}, RemoteOptions{}, fake);
  EXPECT_THAT(r[0].report, HasCode(ErrorCode::kUnavailable, HasSubstr("killed by SIGKILL")));
}

TEST(ProcessRunner, CapturesOutputExitCodeAndKillsOnTimeout) {
  auto ok = RunProcess({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->stdout_text, "out\n");
  EXPECT_EQ(ok->stderr_text, "err\n");
  EXPECT_EQ(ok->exit_code, 3);
  // The grandchild keeps the pipe open: the whole process group must die.
  auto start = std::chrono::steady_clock::now();
  auto slow = RunProcess({"sh", "-c", "sleep 30 & sleep 30"}, 0.3);
  EXPECT_THAT(slow, HasCode(ErrorCode::kDeadlineExceeded, HasSubstr("within 0.3 s")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_THAT(RunProcess({"anxin-no-such-program"}, 1),
              HasCode(ErrorCode::kNotFound, HasSubstr("anxin-no-such-program is not installed")));
}

TEST(ProcessRunner, ExtraDirectoriesAreSearchedAfterPath) {
  // A link to echo (a script could not run from a noexec /dev/shm).
  ::anxin::testing::TempDir dir;
  std::filesystem::create_symlink("/bin/echo", dir.path() + "/anxin-vendor-tool");
  EXPECT_THAT(RunProcess({"anxin-vendor-tool"}, 5), HasCode(ErrorCode::kNotFound));
  auto found = RunTool(ProcessRunnerAlsoIn({dir.path()}), {"anxin-vendor-tool", "-i", "3"}, 5);
  ASSERT_THAT(found, IsOk());
  EXPECT_EQ(*found, "-i 3\n");
  EXPECT_THAT(RunTool(ProcessRunnerAlsoIn({"/nonexistent"}), {"anxin-vendor-tool"}, 5),
              HasCode(ErrorCode::kNotFound, HasSubstr("not found on PATH or in /nonexistent")));
}

TEST(ProcessRunner, RunToolTurnsAFailedExitIntoItsMessage) {
  EXPECT_THAT(RunTool(RunProcess, {"sh", "-c", "echo 'no such device' >&2; exit 3"}, 5),
              HasCode(ErrorCode::kUnavailable, HasSubstr("sh exited 3: no such device")));
  EXPECT_THAT(RunTool(RunProcess, {"sh", "-c", "kill -SEGV $$"}, 5),
              HasCode(ErrorCode::kUnavailable, HasSubstr("killed by SIGSEGV")));
  EXPECT_THAT(RunTool(RunProcess, {"sleep", "5"}, 0.2), HasCode(ErrorCode::kDeadlineExceeded));
  EXPECT_EQ(RunTool(RunProcess, {"echo", "hi"}, 5).value(), "hi\n");
}

}  // namespace
}  // namespace anxin::doctor
