#include "anxin/agent/web_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"

namespace anxin::agent {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::MakeTestCertificates;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Base64(std::string_view s) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    out += {kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63],
            kAlphabet[v & 63]};
  }
  if (i + 1 == s.size()) {
    const unsigned v = static_cast<unsigned char>(s[i]) << 16;
    out += {kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    const unsigned v =
        (static_cast<unsigned char>(s[i]) << 16) | (static_cast<unsigned char>(s[i + 1]) << 8);
    out += {kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

HttpRequest WithAuth(std::string_view user_password) {
  HttpRequest r;
  r.path = "/metrics";
  r.headers.emplace_back("Authorization", "Basic " + Base64(user_password));
  return r;
}

TEST(WebConfigTest, HashesAndChecksBcryptPasswords) {
  auto hash = HashPassword("s3cret", 4);
  ASSERT_THAT(hash, IsOk());
  EXPECT_THAT(*hash, StartsWith("$2b$04$"));
  EXPECT_EQ(hash->size(), 60u);
  EXPECT_TRUE(CheckPassword("s3cret", *hash));
  EXPECT_FALSE(CheckPassword("s3cret ", *hash));
  EXPECT_FALSE(CheckPassword("", *hash));
  EXPECT_FALSE(CheckPassword("s3cret", "plain"));
  // Another salt each time.
  EXPECT_NE(*hash, HashPassword("s3cret", 4).value());
  EXPECT_THAT(HashPassword("x", 3), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(HashPassword(""), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(HashPassword(std::string(73, 'a'), 4), HasCode(ErrorCode::kInvalidArgument));
}

TEST(WebConfigTest, GuardAnswers401UnlessTheCredentialsMatch) {
  const std::string hash = HashPassword("s3cret", 4).value();
  HttpGuard guard = MakeBasicAuthGuard({{"prometheus", hash}});
  ASSERT_TRUE(guard);
  HttpRequest none;
  auto denied = guard(none);
  ASSERT_TRUE(denied.has_value());
  EXPECT_EQ(denied->status, 401);
  EXPECT_THAT(denied->Header("WWW-Authenticate").value_or(""), StartsWith("Basic realm="));
  EXPECT_FALSE(guard(WithAuth("prometheus:s3cret")).has_value());
  // The second time comes from the cache; the answer is the same.
  EXPECT_FALSE(guard(WithAuth("prometheus:s3cret")).has_value());
  EXPECT_EQ(guard(WithAuth("prometheus:wrong"))->status, 401);
  EXPECT_EQ(guard(WithAuth("grafana:s3cret"))->status, 401);
  EXPECT_EQ(guard(WithAuth("prometheus"))->status, 401);  // no colon
  HttpRequest garbage;
  garbage.headers.emplace_back("Authorization", "Basic !!!not-base64");
  EXPECT_EQ(guard(garbage)->status, 401);
  HttpRequest bearer;
  bearer.headers.emplace_back("Authorization", "Bearer abc");
  EXPECT_EQ(guard(bearer)->status, 401);
  EXPECT_FALSE(MakeBasicAuthGuard({}));
}

TEST(WebConfigTest, LoadsTheToolkitFormatWithPathsRelativeToTheFile) {
  TempDir dir;
  dir.Write("tls/agent.crt", "x");
  dir.Write("tls/agent.key", "x");
  dir.Write("tls/ca.crt", "x");
  const std::string hash = HashPassword("pw", 4).value();
  const std::string path = dir.Write("web.yml",
                                     "tls_server_config:\n"
                                     "  cert_file: tls/agent.crt\n"
                                     "  key_file: " +
                                         (dir / "tls/agent.key") +
                                         "\n"
                                         "  client_auth_type: RequireAndVerifyClientCert\n"
                                         "  client_ca_file: tls/ca.crt\n"
                                         "  min_version: TLS13\n"
                                         "basic_auth_users:\n"
                                         "  prometheus: " +
                                         hash + "\n");
  auto web = LoadWebConfig(path);
  ASSERT_THAT(web, IsOk());
  ASSERT_TRUE(web->tls.has_value());
  EXPECT_EQ(web->tls->cert_file, dir / "tls/agent.crt");
  EXPECT_EQ(web->tls->key_file, dir / "tls/agent.key");
  EXPECT_EQ(web->tls->client_ca_file, dir / "tls/ca.crt");
  EXPECT_TRUE(web->tls->tls13_only);
  ASSERT_EQ(web->users.size(), 1u);
  EXPECT_EQ(web->users.at("prometheus"), hash);

  const std::string auth_only = dir.Write("auth.yml", "basic_auth_users:\n  a: " + hash + "\n");
  auto plain = LoadWebConfig(auth_only);
  ASSERT_THAT(plain, IsOk());
  EXPECT_FALSE(plain->tls.has_value());
}

TEST(WebConfigTest, ErrorsNameTheirPlace) {
  TempDir dir;
  dir.Write("a.crt", "x");
  auto load = [&](std::string_view text) { return LoadWebConfig(dir.Write("web.yml", text)); };
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n  keyfile: a.key\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("web.yml:3:3: tls_server_config: "
                                                             "unknown key 'keyfile'")));
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n  key_file: missing.key\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no such file: ")));
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("missing required key 'key_file'")));
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n  key_file: a.crt\n"
                   "  client_auth_type: VerifyClientCertIfGiven\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("is not supported")));
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n  key_file: a.crt\n"
                   "  min_version: TLS10\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("min_version 'TLS10'")));
  EXPECT_THAT(load("tls_server_config:\n  cert_file: a.crt\n  key_file: a.crt\n"
                   "  client_ca_file: a.crt\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("RequireAndVerifyClientCert")));
  EXPECT_THAT(load("basic_auth_users:\n  prometheus: plaintext\n"),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("web.yml:2:15: basic_auth_users.prometheus: the password of "
                                "'prometheus' must be a bcrypt hash")));
  EXPECT_THAT(load("http_server_config:\n  http2: true\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("unknown key 'http2'")));
  EXPECT_THAT(LoadWebConfig(dir / "absent.yml"), HasCode(ErrorCode::kNotFound));
}

TEST(WebConfigTest, HttpsServerWithAndWithoutClientCertificates) {
  TempDir dir;
  ASSERT_TRUE(MakeTestCertificates(dir));
  HttpTlsOptions tls{.cert_file = dir / "server.crt", .key_file = dir / "server.key"};
  HttpServer server({.tls = tls});
  server.Get("/metrics", [](const HttpRequest&) { return HttpResponse::Text(200, "up 1\n"); });
  ASSERT_THAT(server.Start(), IsOk());
  EXPECT_EQ(server.scheme(), "https");
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());

  auto trusted = HttpClient::ForUrl(url, {.ca_file = dir / "ca.crt"});
  ASSERT_THAT(trusted, IsOk());
  auto ok = trusted->Get("/metrics");
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "up 1\n");
  // The system's CAs do not know the test CA.
  auto untrusted = HttpClient::ForUrl(url, {});
  EXPECT_THAT(untrusted->Get("/metrics"),
              HasCode(ErrorCode::kUnavailable, HasSubstr("is not trusted")));
  // Plain HTTP to an HTTPS port is no response.
  HttpClient plain("127.0.0.1", server.port(), {.timeout = 2000ms});
  EXPECT_FALSE(plain.Get("/metrics").has_value());
  server.Stop();

  // Mutual TLS: no client certificate, no handshake.
  tls.client_ca_file = dir / "ca.crt";
  HttpServer mutual({.tls = tls});
  mutual.Get("/metrics", [](const HttpRequest&) { return HttpResponse::Text(200, "up 1\n"); });
  ASSERT_THAT(mutual.Start(), IsOk());
  const std::string murl = "https://127.0.0.1:" + std::to_string(mutual.port());
  auto anonymous = HttpClient::ForUrl(murl, {.ca_file = dir / "ca.crt"});
  EXPECT_FALSE(anonymous->Get("/metrics").has_value());
  auto with_cert = HttpClient::ForUrl(murl, {.ca_file = dir / "ca.crt",
                                             .client_cert_file = dir / "client.crt",
                                             .client_key_file = dir / "client.key"});
  auto got = with_cert->Get("/metrics");
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->status, 200);
}

TEST(WebConfigTest, BadCertificatesFailStartWithTheFileNamed) {
  TempDir dir;
  ASSERT_TRUE(MakeTestCertificates(dir));
  HttpServer garbage({.tls = HttpTlsOptions{.cert_file = dir.Write("bad.crt", "not a cert\n"),
                                            .key_file = dir / "server.key"}});
  EXPECT_THAT(garbage.Start(),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("cannot load the TLS certificate " + (dir / "bad.crt"))));
  HttpServer mismatch(
      {.tls = HttpTlsOptions{.cert_file = dir / "server.crt", .key_file = dir / "client.key"}});
  EXPECT_THAT(mismatch.Start(), HasCode(ErrorCode::kInvalidArgument,
                                        HasSubstr("does not belong to the certificate")));
}

}  // namespace
}  // namespace anxin::agent
