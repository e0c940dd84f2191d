// `anxin run` against an etcd that wants TLS client certificates and one
// that has authentication on, both real etcd members started by the test:
// certificates made with openssl (MakeTestCertificates), users
// added and auth enabled with etcdctl. Each case runs a one-node job and
// reads its exit status and message: a job that got through leaves its
// generation record in etcd; one that did not names the endpoint and the
// TLS or auth error and exits 3, and never prints the password.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "../support/etcd_cluster.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::run {
namespace {

using ::anxin::testing::EtcdCluster;
using ::anxin::testing::EtcdTls;
using ::anxin::testing::FixturePath;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::RunAnxinOptions;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr const char* kPassword = "s3cret-pw";

// The flags of a one-node job through etcd at endpoint; extra flags go
// before the command.
std::vector<std::string> RunArgs(const TempDir& dir, const std::string& endpoint,
                                 const std::string& job, std::vector<std::string> extra) {
  std::vector<std::string> a = {"run",
                                "--nnodes",
                                "1",
                                "--rdzv-endpoint",
                                endpoint,
                                "--rdzv-id",
                                job,
                                "--master-addr",
                                "127.0.0.1",
                                "--nproc-per-node",
                                "1",
                                "--state-dir",
                                dir / ("state-" + job),
                                "--stop-grace",
                                "1s",
                                "--scenario",
                                FixturePath("run/fast-reset.yaml")};
  a.insert(a.end(), extra.begin(), extra.end());
  for (const std::string x : {"--", "/bin/sh", "-c", "echo the job ran"}) a.push_back(x);
  return a;
}

// etcdctl with the given flags; its stdout, or "" after a test failure.
std::string Etcdctl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/etcdctl");
  auto r = RunCommand(std::move(args), {.timeout = 30s, .env = {"ETCDCTL_API=3"}});
  EXPECT_TRUE(r && r->ok()) << (r ? r->stdout_text + r->stderr_text : r.error().ToString());
  return r ? r->stdout_text : "";
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(made_certs_);
    ASSERT_TRUE(etcd_.Start());
  }
  std::string Cert(const std::string& name) const { return certs_ + "/" + name; }
  std::string Endpoint() const { return "https://" + etcd_.Endpoint(0); }
  std::vector<std::string> ClientFlags(const std::string& cert = "client") const {
    return {"--etcd-cacert",     Cert("ca.crt"), "--etcd-cert",
            Cert(cert + ".crt"), "--etcd-key",   Cert(cert + ".key")};
  }
  // The job's generation record, read with etcdctl over TLS.
  std::string Generation(const std::string& job) {
    return Etcdctl({"--endpoints", Endpoint(), "--cacert", Cert("ca.crt"), "--cert",
                    Cert("client.crt"), "--key", Cert("client.key"), "get", "--print-value-only",
                    "/anxin/run/" + job + "/generation"});
  }

  TempDir dir_{"anxin-etcd-tls"};
  TempDir pki_{"anxin-etcd-pki"};
  bool made_certs_ = ::anxin::testing::MakeTestCertificates(pki_);
  std::string certs_ = pki_.path();
  EtcdCluster etcd_{dir_, 1,
                    EtcdTls{.ca = certs_ + "/ca.crt",
                            .cert = certs_ + "/server.crt",
                            .key = certs_ + "/server.key",
                            .client_cert = certs_ + "/client.crt",
                            .client_key = certs_ + "/client.key"}};
};

TEST_F(EtcdTlsTest, AClientCertificateFromTheRightCaRunsTheJob) {
  auto out = RunAnxin(RunArgs(dir_, Endpoint(), "tls-ok", ClientFlags()));
  EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stdout_text + out.stderr_text, HasSubstr("the job ran"));
  EXPECT_THAT(Generation("tls-ok"), HasSubstr("\"generation\":0"));
}

TEST_F(EtcdTlsTest, AHostPortEndpointSpeaksTlsWhenACaIsGiven) {
  auto out = RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "tls-plain-spelling", ClientFlags()));
  EXPECT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(Generation("tls-plain-spelling"), HasSubstr("\"generation\":0"));
}

TEST_F(EtcdTlsTest, TheFilesComeFromRdzvConfTheRunSectionOrTheEnvironment) {
  const std::string conf =
      "cacert=" + Cert("ca.crt") + ",cert=" + Cert("client.crt") + ",key=" + Cert("client.key");
  auto a = RunAnxin(RunArgs(dir_, Endpoint(), "tls-conf", {"--rdzv-conf", conf}));
  EXPECT_EQ(a.exit_code, 0) << a.stderr_text;

  const std::string cfg = dir_.Write("anxin.yaml", "run:\n  etcd:\n    cacert: " + Cert("ca.crt") +
                                                       "\n    cert: " + Cert("client.crt") +
                                                       "\n    key: " + Cert("client.key") + "\n");
  std::vector<std::string> args = RunArgs(dir_, Endpoint(), "tls-config", {});
  args.insert(args.begin(), {"--config", cfg});
  auto b = RunAnxin(args);
  EXPECT_EQ(b.exit_code, 0) << b.stderr_text;

  auto c = RunAnxin(RunArgs(dir_, Endpoint(), "tls-env", {}),
                    RunAnxinOptions{.env = {"ANXIN_ETCD_CACERT=" + Cert("ca.crt"),
                                            "ETCDCTL_CERT=" + Cert("client.crt"),
                                            "ETCDCTL_KEY=" + Cert("client.key")}});
  EXPECT_EQ(c.exit_code, 0) << c.stderr_text;
  for (const std::string job : {"tls-conf", "tls-config", "tls-env"}) {
    EXPECT_THAT(Generation(job), HasSubstr("\"generation\":0")) << job;
  }
}

TEST_F(EtcdTlsTest, AWrongCaIsExit3NamingTheEndpointAndTheCertificate) {
  std::vector<std::string> flags = ClientFlags();
  flags[1] = Cert("other-ca.crt");
  auto out = RunAnxin(RunArgs(dir_, Endpoint(), "tls-wrong-ca", flags));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(etcd_.Endpoint(0)));
  EXPECT_THAT(out.stderr_text, HasSubstr("is not trusted"));
  EXPECT_THAT(out.stderr_text, HasSubstr("--etcd-cacert"));
}

TEST_F(EtcdTlsTest, NoClientCertificateIsExit3SayingTheMemberWantsOne) {
  auto out = RunAnxin(RunArgs(dir_, Endpoint(), "tls-no-cert", {"--etcd-cacert", Cert("ca.crt")}));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(etcd_.Endpoint(0)));
  EXPECT_THAT(out.stderr_text, HasSubstr("requires a client certificate"));
  EXPECT_THAT(out.stderr_text, HasSubstr("--etcd-cert"));
}

TEST_F(EtcdTlsTest, AnExpiredCertificateIsExit3SayingWhenItExpired) {
  auto out = RunAnxin(RunArgs(dir_, Endpoint(), "tls-expired", ClientFlags("expired")));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(etcd_.Endpoint(0)));
  EXPECT_THAT(out.stderr_text, HasSubstr("expired on 2020-01-02T00:00:00Z"));
}

TEST_F(EtcdTlsTest, TheServerNameIsCheckedAgainstTheMembersCertificate) {
  std::vector<std::string> flags = ClientFlags();
  flags.insert(flags.end(), {"--etcd-server-name", "etcd.anxin.test"});
  auto ok = RunAnxin(RunArgs(dir_, Endpoint(), "tls-name", flags));
  EXPECT_EQ(ok.exit_code, 0) << ok.stderr_text;
  flags.back() = "other.anxin.test";
  auto bad = RunAnxin(RunArgs(dir_, Endpoint(), "tls-wrong-name", flags));
  EXPECT_EQ(bad.exit_code, 3) << bad.stderr_text;
  EXPECT_THAT(bad.stderr_text, HasSubstr("is not trusted"));
}

TEST_F(EtcdTlsTest, AnUnreadableFileIsAUsageError) {
  std::vector<std::string> flags = ClientFlags();
  flags[3] = Cert("missing.crt");
  auto out = RunAnxin(RunArgs(dir_, Endpoint(), "tls-missing", flags));
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("missing.crt"));
}

class EtcdAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start());
    const std::string ep = "--endpoints=" + etcd_.Endpoint(0);
    Etcdctl({ep, "user", "add", std::string("root:") + kPassword});
    Etcdctl({ep, "user", "add", "reader:readpw"});
    Etcdctl({ep, "role", "add", "readonly"});
    Etcdctl({ep, "role", "grant-permission", "readonly", "--prefix=true", "read", "/anxin/"});
    Etcdctl({ep, "user", "grant-role", "reader", "readonly"});
    Etcdctl({ep, "auth", "enable"});
  }
  std::string Generation(const std::string& job) {
    return Etcdctl({"--endpoints=" + etcd_.Endpoint(0), "--user", std::string("root:") + kPassword,
                    "get", "--print-value-only", "/anxin/run/" + job + "/generation"});
  }
  static void NoPassword(const CommandOutput& out) {
    EXPECT_THAT(out.stdout_text + out.stderr_text, Not(HasSubstr(kPassword)));
  }

  TempDir dir_{"anxin-etcd-auth"};
  EtcdCluster etcd_{dir_, 1};
};

TEST_F(EtcdAuthTest, TheRightPasswordRunsTheJobFromAFlagTheEnvironmentOrAFile) {
  auto a = RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-flag",
                            {"--etcd-user", std::string("root:") + kPassword}));
  EXPECT_EQ(a.exit_code, 0) << a.stderr_text;
  NoPassword(a);

  auto b = RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-env", {"--etcd-user", "root"}),
                    RunAnxinOptions{.env = {std::string("ANXIN_ETCD_PASSWORD=") + kPassword}});
  EXPECT_EQ(b.exit_code, 0) << b.stderr_text;

  const std::string pw = dir_.Write("etcd-password", std::string(kPassword) + "\n");
  const std::string cfg =
      dir_.Write("anxin.yaml", "run:\n  etcd:\n    user: root\n    password_file: " + pw + "\n");
  std::vector<std::string> args = RunArgs(dir_, etcd_.Endpoint(0), "auth-file", {});
  args.insert(args.begin(), {"--config", cfg});
  auto c = RunAnxin(args);
  EXPECT_EQ(c.exit_code, 0) << c.stderr_text;
  NoPassword(c);

  auto d = RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-conf",
                            {"--rdzv-conf", std::string("user=root,password=") + kPassword}));
  EXPECT_EQ(d.exit_code, 0) << d.stderr_text;
  NoPassword(d);
  for (const std::string job : {"auth-flag", "auth-env", "auth-file", "auth-conf"}) {
    EXPECT_THAT(Generation(job), HasSubstr("\"generation\":0")) << job;
  }
}

TEST_F(EtcdAuthTest, ABadPasswordIsExit3NamingTheEndpointAndTheUser) {
  auto out =
      RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-bad", {"--etcd-user", "root:wrong-pw"}));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(etcd_.Endpoint(0)));
  EXPECT_THAT(out.stderr_text, HasSubstr("refused user 'root'"));
  EXPECT_THAT(out.stderr_text, HasSubstr("authentication failed"));
  EXPECT_THAT(out.stderr_text, Not(HasSubstr("wrong-pw")));
}

TEST_F(EtcdAuthTest, NoUserIsExit3SayingTheClusterWantsOne) {
  auto out = RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-none", {}));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(etcd_.Endpoint(0)));
  EXPECT_THAT(out.stderr_text, HasSubstr("--etcd-user"));
}

TEST_F(EtcdAuthTest, AUserWithoutWriteRightsIsExit3NamingTheUser) {
  auto out =
      RunAnxin(RunArgs(dir_, etcd_.Endpoint(0), "auth-reader", {"--etcd-user", "reader:readpw"}));
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("permission denied"));
  EXPECT_THAT(out.stderr_text, HasSubstr("user 'reader'"));
}

}  // namespace
}  // namespace anxin::run
