// Parsing of the cluster flags and the client's errors without a store;
// tests/coord/ runs the protocol against a real 3-member etcd cluster.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/coord/etcd_client.h"
#include "anxin/coord/etcd_coordinator.h"
#include "anxin/run/launch.h"

namespace anxin::coord {
namespace {

using ::anxin::testing::HasCode;
using ::testing::HasSubstr;

TEST(CoordTest, ParseEndpointsTakesTorchrunSpelling) {
  auto e = ParseEndpoints("127.0.0.1:2379, http://10.0.0.2:2381");
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(*e, ::testing::ElementsAre("127.0.0.1:2379", "10.0.0.2:2381"));
  EXPECT_THAT(ParseEndpoints(""), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseEndpoints("etcd"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--rdzv-endpoint")));
  EXPECT_THAT(ParseEndpoints("a:1,,b:2"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseEndpoints("a:99999"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(CoordTest, ParseNnodesTakesNOrMinMax) {
  EXPECT_EQ(ParseNnodes("4"), (std::pair<int, int>(4, 4)));
  EXPECT_EQ(ParseNnodes("2:8"), (std::pair<int, int>(2, 8)));
  EXPECT_THAT(ParseNnodes("0"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--nnodes")));
  EXPECT_THAT(ParseNnodes("3:2"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseNnodes("two"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseNnodes("2:"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(CoordTest, AStoreNobodyServesIsUnavailableNamingTheEndpoint) {
  auto port = run::PickFreePort();
  ASSERT_TRUE(port.has_value());
  const std::string where = "127.0.0.1:" + std::to_string(*port);
  ClusterOptions o;
  o.endpoints = where;
  o.job = "j1";
  auto c = EtcdCoordinator::Create(o);
  EXPECT_THAT(c, HasCode(ErrorCode::kUnavailable, HasSubstr(where)));
}

TEST(CoordTest, CreateChecksTheJobId) {
  ClusterOptions o;
  o.endpoints = "127.0.0.1:1";
  EXPECT_THAT(EtcdCoordinator::Create(o),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--rdzv-id")));
  o.job = "a/b";
  EXPECT_THAT(EtcdCoordinator::Create(o), HasCode(ErrorCode::kInvalidArgument, HasSubstr("a/b")));
}

}  // namespace
}  // namespace anxin::coord
