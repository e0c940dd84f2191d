// Parsing of the cluster flags and the client's errors without a store;
// tests/coord/ runs the protocol against a real 3-member etcd cluster.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "anxin/base/testing.h"
#include "anxin/coord/etcd_client.h"
#include "anxin/coord/etcd_coordinator.h"
#include "anxin/run/journal.h"
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
  auto tls = ParseEndpoints("https://10.0.0.2:2379,https://etcd-1:2379");
  ASSERT_TRUE(tls.has_value());
  EXPECT_THAT(*tls, ::testing::ElementsAre("https://10.0.0.2:2379", "https://etcd-1:2379"));
  EXPECT_THAT(ParseEndpoints("https://"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseEndpoints("https://etcd"), HasCode(ErrorCode::kInvalidArgument));
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

TEST(CoordTest, RanksOfANodeFollowItsNodeRank) {
  run::LaunchPlanOptions o;
  o.nproc_per_node = 2;
  o.node_rank = 1;
  o.nnodes = 3;
  o.master_addr = "10.0.0.1";
  o.master_port = 29400;
  o.numa_bind = false;
  device::DeviceInfo d;
  d.vendor = "nvidia";
  d.index = 0;
  device::DeviceInfo e = d;
  e.index = 1;
  auto plan = run::PlanRanks(o, {d, e}, {});
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[1].rank, 3);
  EXPECT_THAT((*plan)[1].env,
              ::testing::IsSupersetOf({"RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=6", "GROUP_RANK=1",
                                       "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29400"}));
}

TEST(CoordTest, TheJournalKeepsTheClusterView) {
  run::Incident in;
  in.id = "x";
  run::ClusterView v;
  v.fault_node = "node-1";
  v.fault_class = "process_exit";
  v.generation = 3;
  v.agreed_step = 10;
  v.nnodes = 2;
  v.store_pauses = 1;
  v.nodes = {{.node = "node-0",
              .node_rank = 0,
              .ready_seconds = 0.5,
              .barrier_seconds = 0.25,
              .newest_verified = 15},
             {.node = "node-1",
              .node_rank = 1,
              .ready_seconds = 0.75,
              .barrier_seconds = 0,
              .newest_verified = 10}};
  in.cluster = v;
  auto back = run::IncidentFromJson(run::IncidentToJson(in));
  ASSERT_TRUE(back.has_value());
  ASSERT_TRUE(back->cluster.has_value());
  EXPECT_EQ(back->cluster->fault_node, "node-1");
  EXPECT_EQ(back->cluster->generation, 3);
  EXPECT_EQ(back->cluster->agreed_step, 10);
  EXPECT_EQ(back->cluster->store_pauses, 1);
  ASSERT_EQ(back->cluster->nodes.size(), 2u);
  EXPECT_EQ(back->cluster->nodes[0].newest_verified, 15);
  EXPECT_DOUBLE_EQ(back->cluster->nodes[1].ready_seconds, 0.75);
  in.cluster.reset();
  EXPECT_FALSE(run::IncidentToJson(in).contains("cluster")) << "one node: no cluster view";
}

}  // namespace
}  // namespace anxin::coord
