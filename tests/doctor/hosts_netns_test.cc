// `anxin doctor --hosts` against real sshd instances, each in its own network
// namespace joined to the root namespace by a veth pair on a private /30 that
// exists only between them. Every sshd runs the same anxin binary for the
// remote side (the file system is shared); sshd's SetEnv points each host's
// ANXIN_DOCTOR_ROOT at its own captured tree, so one host can drift.
//
// Needs root (network namespaces) and /usr/sbin/sshd (openssh-server in
// scripts/install-deps); without either the test is skipped with the reason.
// Namespaces, links and sshd processes are removed on success and failure.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_util.h"

namespace anxin::doctor_test {
namespace {

using ::testing::HasSubstr;

constexpr int kHosts = 3;

CommandOutput Sh(std::vector<std::string> argv) {
  RunOptions o;
  o.timeout = std::chrono::seconds(20);
  auto r = RunCommand(std::move(argv), std::move(o));
  if (!r) {
    CommandOutput failed;
    failed.stderr_text = r.error().ToString();
    return failed;
  }
  return *r;
}

bool CanConnect(const std::string& addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  ::close(fd);
  return ok;
}

class SshHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (::access("/usr/sbin/sshd", X_OK) != 0) {
      GTEST_SKIP() << "/usr/sbin/sshd missing: run scripts/install-deps (openssh-server)";
    }
    tag_ = std::to_string(::getpid() % 100000);
    // 10.213.N.0/24 split into /30s, N from the pid so parallel runs differ.
    subnet_ = "10.213." + std::to_string(::getpid() % 250);
    std::string probe = "anxdp" + tag_;
    auto add = Sh({"ip", "netns", "add", probe});
    if (add.exit_code != 0)
      GTEST_SKIP() << "cannot create a network namespace: " << add.stderr_text;
    Sh({"ip", "netns", "del", probe});

    if (::access("/run/sshd", F_OK) != 0) {
      std::filesystem::create_directories("/run/sshd");  // sshd's privilege-separation directory
      made_run_sshd_ = true;
    }
    dir_ = std::make_unique<TempDir>();
    const std::string& d = dir_->path();
    ASSERT_EQ(Sh({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d + "/host_key"}).exit_code,
              0);
    ASSERT_EQ(
        Sh({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d + "/client_key"}).exit_code, 0);
    std::filesystem::copy_file(d + "/client_key.pub", d + "/authorized_keys");
    WriteFile(d + "/ssh_config",
              "Host *\n  User root\n  IdentityFile " + d +
                  "/client_key\n  IdentitiesOnly yes\n"
                  "  UserKnownHostsFile /dev/null\n  GlobalKnownHostsFile /dev/null\n"
                  "  StrictHostKeyChecking no\n  LogLevel ERROR\n");
    for (int i = 0; i < kHosts; ++i) StartHost(i);
  }

  void StartHost(int i) {
    const std::string& d = dir_->path();
    std::string ns = "anxd" + tag_ + "_" + std::to_string(i);
    std::string outer = "axo" + tag_ + "_" + std::to_string(i);
    std::string inner = "axi" + tag_ + "_" + std::to_string(i);
    std::string root_addr = subnet_ + "." + std::to_string(4 * i + 1);
    std::string host_addr = subnet_ + "." + std::to_string(4 * i + 2);
    namespaces_.push_back(ns);
    auto must = [&](std::vector<std::string> argv) {
      auto r = Sh(argv);
      ASSERT_EQ(r.exit_code, 0) << argv[0] << " " << argv[1] << ": " << r.stderr_text;
    };
    must({"ip", "netns", "add", ns});
    must({"ip", "link", "add", outer, "type", "veth", "peer", "name", inner});
    links_.push_back(outer);
    must({"ip", "link", "set", inner, "netns", ns});
    must({"ip", "addr", "add", root_addr + "/30", "dev", outer});
    must({"ip", "link", "set", outer, "up"});
    must({"ip", "netns", "exec", ns, "ip", "addr", "add", host_addr + "/30", "dev", inner});
    must({"ip", "netns", "exec", ns, "ip", "link", "set", inner, "up"});
    must({"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"});

    // Host 2 drifts: irqbalance runs there.
    std::string tree = kTree;
    if (i == 2) {
      tree = dir_->CopyTree("host2");
      WriteFile(tree + "/proc/1311/comm", "irqbalance\n");
    }
    int port = 20000 + (::getpid() % 20000) + i;
    std::string cfg = d + "/sshd_" + std::to_string(i) + ".conf";
    WriteFile(cfg, "Port " + std::to_string(port) + "\nListenAddress " + host_addr + "\nHostKey " +
                       d + "/host_key\nAuthorizedKeysFile " + d +
                       "/authorized_keys\n"
                       "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                       "PermitRootLogin prohibit-password\nStrictModes no\nPidFile none\n"
                       "LogLevel ERROR\nSetEnv ANXIN_DOCTOR_ROOT=" +
                       tree + "\n");
    SubprocessOptions so;
    so.argv = {"ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f", cfg};
    auto child = Subprocess::Start(std::move(so));
    ASSERT_TRUE(child.has_value()) << child.error().ToString();
    sshd_.push_back(std::move(*child));
    ASSERT_TRUE(::anxin::testing::WaitFor([&] { return CanConnect(host_addr, port); },
                                          std::chrono::seconds(15)))
        << "sshd in " << ns << " never listened";
    hosts_ += "root@" + host_addr + ":" + std::to_string(port) + "\n";
    labels_.push_back("root@" + host_addr + ":" + std::to_string(port));
    if (i == 0) refused_ = "root@" + host_addr + ":" + std::to_string(port + 100);
  }

  void TearDown() override {
    for (auto& s : sshd_) {
      auto st = s->Stop(std::chrono::seconds(2));
      (void)st;
    }
    sshd_.clear();
    for (const auto& l : links_) Sh({"ip", "link", "del", l});
    for (const auto& ns : namespaces_) Sh({"ip", "netns", "del", ns});
    if (made_run_sshd_) std::filesystem::remove("/run/sshd");
    dir_.reset();
  }

  std::vector<std::string> HostsArgs(const std::string& hosts_text) {
    std::string file = dir_->path() + "/hosts";
    WriteFile(file, hosts_text);
    return {
        "doctor", "--hosts",   file, "--ssh-config", dir_->path() + "/ssh_config", "--remote-anxin",
        kAnxin,   "--timeout", "60"};
  }

  std::string tag_, subnet_, hosts_, refused_;
  std::vector<std::string> labels_, namespaces_, links_;
  std::vector<std::unique_ptr<Subprocess>> sshd_;
  std::unique_ptr<TempDir> dir_;
  bool made_run_sshd_ = false;
};

TEST_F(SshHosts, MatrixMarksTheDriftingHostAndTheUnreachableOne) {
  auto r = Anxin(HostsArgs("# three hosts and one without sshd\n" + hosts_ + refused_ + "\n"));
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  const std::string& out = r.stdout_text;
  EXPECT_THAT(out, HasSubstr("3 of 4 hosts answered"));
  EXPECT_THAT(out, HasSubstr("drift: " + labels_[2] + " irq.irqbalance = fail"));
  EXPECT_THAT(out, HasSubstr("unreachable: " + refused_ + ": exit 255"));
  // The irqbalance row reads ok, ok, fail*, n/a.
  std::string row = out.substr(out.find("irq.irqbalance"));
  row = row.substr(0, row.find('\n'));
  EXPECT_THAT(row, ::testing::MatchesRegex("irq.irqbalance +ok +ok +fail\\* +n/a *"));
}

TEST_F(SshHosts, JsonMatrix) {
  auto args = HostsArgs(hosts_);
  args.push_back("--json");
  auto r = Anxin(args);
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["hosts"].size(), 3u);
  EXPECT_EQ(j["matrix"]["irq.irqbalance"]["majority"], "ok");
  EXPECT_EQ(j["matrix"]["irq.irqbalance"]["drift"], nlohmann::json::array({labels_[2]}));
  EXPECT_EQ(j["matrix"]["qos.dscp_pfc"]["drift"], nlohmann::json::array());
  EXPECT_EQ(j["hosts"][0]["report"]["root"], kTree);
}

}  // namespace
}  // namespace anxin::doctor_test
