#include "anxin/base/url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::testing::HasSubstr;

TEST(ParseHttpUrl, SchemesDefaultPortsAndPaths) {
  auto a = ParseHttpUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->scheme, "http");
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8000);
  EXPECT_EQ(a->path, "");
  EXPECT_EQ(a->Origin(), "http://127.0.0.1:8000");

  auto b = ParseHttpUrl("https://example.com/hooks/x");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->scheme, "https");
  EXPECT_EQ(b->port, 443);
  EXPECT_EQ(b->path, "/hooks/x");
  EXPECT_EQ(ParseHttpUrl("HTTP://h").value().port, 80);
  EXPECT_EQ(ParseHttpUrl("http://h:1/").value().path, "/");
}

TEST(ParseHttpUrl, BareHostPortIsPlainHttp) {
  auto u = ParseHttpUrl("127.0.0.1:9000/v1");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->path, "/v1");
  EXPECT_EQ(ParseHttpUrl("localhost:8000").value().Origin(), "http://localhost:8000");
  EXPECT_EQ(ParseHttpUrl("127.0.0.1").value().Origin(), "http://127.0.0.1:80");
}

TEST(ParseHttpUrl, Ipv6InBrackets) {
  auto u = ParseHttpUrl("http://[::1]:8000/x");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->Origin(), "http://[::1]:8000");
  EXPECT_EQ(ParseHttpUrl("[::1]:1").value().port, 1);
  EXPECT_THAT(ParseHttpUrl("::1:80"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("brackets")));
}

TEST(ParseHttpUrl, RefusesWhatIsNotAnHttpAddress) {
  EXPECT_THAT(ParseHttpUrl("ftp://h:21"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("scheme 'ftp' is not HTTP")));
  EXPECT_THAT(ParseHttpUrl("http://h:0"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("not a number from 1 to 65535")));
  EXPECT_THAT(ParseHttpUrl("h:70000"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseHttpUrl("h:80x"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseHttpUrl("http://:80"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no host")));
  EXPECT_THAT(ParseHttpUrl("h:"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseHttpUrl(""), HasCode(ErrorCode::kInvalidArgument, HasSubstr("no host")));
}

}  // namespace
}  // namespace anxin
