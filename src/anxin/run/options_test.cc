#include "anxin/run/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "anxin/base/testing.h"

namespace anxin::run {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;

RunFlags Flags() {
  RunFlags f;
  f.command = {"python3", "train.py"};
  f.nproc_per_node = 2;
  return f;
}

GlobalConfig Config(std::string_view yaml) {
  auto c = ParseGlobalConfig(yaml, "g.yaml");
  EXPECT_THAT(c, IsOk());
  return c.value_or(GlobalConfig{});
}

TEST(RunOptionsTest, DefaultsWithoutFlagsOrConfiguration) {
  auto o = LoadSupervisorOptions(Flags(), GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(o->launch.nproc_per_node, 2);
  EXPECT_TRUE(o->pick_port);
  EXPECT_TRUE(o->launch.numa_bind);
  EXPECT_EQ(o->max_restarts, 3);
  EXPECT_EQ(o->storm_limit, 3);
  EXPECT_EQ(o->reset_retries, 3);
  EXPECT_EQ(o->stop_grace_seconds, 5);
  EXPECT_EQ(o->link_timeout_seconds, 60);
  EXPECT_EQ(o->verify_timeout_seconds, 300);
  EXPECT_EQ(o->hang_timeout_seconds, 0);
  EXPECT_EQ(o->escalate_faults, 3);
  EXPECT_EQ(o->escalate_window_seconds, 3600);
  EXPECT_EQ(o->min_nproc, 0);
  EXPECT_EQ(o->state_dir, ".anxin/run");
  EXPECT_THAT(o->sdk_socket, HasSubstr(".anxin/run/sdk-"));
  ASSERT_TRUE(o->playbooks);
  EXPECT_EQ(o->playbooks->For("hang").steps[0].timeout_seconds, 5);  // stop grace
}

TEST(RunOptionsTest, InProcessRestartAndWarmSpares) {
  auto o = LoadSupervisorOptions(Flags(), GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->in_process);
  EXPECT_EQ(o->abort_timeout_seconds, 5);
  EXPECT_EQ(o->warm_spares, 0);
  RunFlags f = Flags();
  f.abort_timeout = "1500ms";
  f.warm_spares = 2;
  o = LoadSupervisorOptions(f, GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->abort_timeout_seconds, 1.5);
  EXPECT_EQ(o->warm_spares, 2);
  f.no_in_process = true;
  EXPECT_THAT(LoadSupervisorOptions(f, GlobalConfig{}), HasCode(ErrorCode::kInvalidArgument));
  f.warm_spares = 0;
  o = LoadSupervisorOptions(f, GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  EXPECT_FALSE(o->in_process);
  f.abort_timeout = "0s";
  auto bad = LoadSupervisorOptions(f, GlobalConfig{});
  ASSERT_THAT(bad, HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("--abort-timeout"));
}

TEST(RunOptionsTest, StateDirComesFromTheFlagThenTheRunSectionThenTheDefault) {
  GlobalConfig config = Config("run:\n  state_dir: /var/lib/anxin\n");
  auto flag = ResolveStateDir("/tmp/s", config);
  ASSERT_THAT(flag, IsOk());
  EXPECT_EQ(flag->dir, "/tmp/s");
  EXPECT_EQ(flag->origin, "--state-dir");
  auto key = ResolveStateDir("", config);
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->dir, "/var/lib/anxin");
  EXPECT_EQ(key->origin, "run.state_dir");
  auto def = ResolveStateDir("", GlobalConfig{});
  ASSERT_THAT(def, IsOk());
  EXPECT_EQ(def->dir, ".anxin/run");
  EXPECT_EQ(def->origin, "the default state directory");
  EXPECT_THAT(ResolveStateDir("", Config("run:\n  state_dri: /x\n")),
              HasCode(ErrorCode::kInvalidArgument));
}

TEST(RunOptionsTest, FlagsWinOverTheRunSectionWhichWinsOverDefaults) {
  GlobalConfig config = Config(R"(run:
  max_restarts: 7
  storm_limit: 0
  stop_grace: 2s
  link_timeout: 30s
  state_dir: /tmp/anxin-state
  escalation: {faults: 2, window: 10m, min_nproc: 1}
)");
  RunFlags f = Flags();
  f.stop_grace = "500ms";
  f.master_port = 29500;
  f.numa_bind = "off";
  f.min_nproc = 2;
  auto o = LoadSupervisorOptions(f, config);
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_restarts, 7);
  EXPECT_EQ(o->storm_limit, 1);  // at least one
  EXPECT_EQ(o->stop_grace_seconds, 0.5);
  EXPECT_EQ(o->link_timeout_seconds, 30);
  EXPECT_EQ(o->state_dir, "/tmp/anxin-state");
  EXPECT_EQ(o->escalate_faults, 2);
  EXPECT_EQ(o->escalate_window_seconds, 600);
  EXPECT_EQ(o->min_nproc, 2);
  EXPECT_FALSE(o->pick_port);
  EXPECT_FALSE(o->launch.numa_bind);
  ASSERT_TRUE(o->run_section);
  // The playbooks take the merged values.
  EXPECT_EQ(o->playbooks->For("hang").steps[0].timeout_seconds, 0.5);
}

TEST(RunOptionsTest, PlaybookFileMapsFaultClassesOverTheSection) {
  TempDir dir;
  const std::string file = dir.Write("p.yaml", R"(playbooks:
  quick:
    - {step: stop_ranks}
    - {step: relaunch}
faults:
  hang: quick
)");
  RunFlags f = Flags();
  f.playbook = file;
  auto o = LoadSupervisorOptions(f, GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->playbooks->For("hang").name, "quick");
  f.playbook = dir.path() + "/none.yaml";
  EXPECT_THAT(LoadSupervisorOptions(f, GlobalConfig{}),
              HasCode(ErrorCode::kNotFound, HasSubstr("--playbook")));
}

TEST(RunOptionsTest, ParseNnodesTakesNOrMinMax) {
  EXPECT_EQ(ParseNnodes("4"), (std::pair<int, int>(4, 4)));
  EXPECT_EQ(ParseNnodes("2:8"), (std::pair<int, int>(2, 8)));
  EXPECT_THAT(ParseNnodes("0"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("--nnodes")));
  EXPECT_THAT(ParseNnodes("3:2"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseNnodes("two"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseNnodes("2:"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(RunOptionsTest, ClusterRequestOnlyForSeveralNodes) {
  RunFlags f = Flags();
  auto o = LoadSupervisorOptions(f, GlobalConfig{});
  ASSERT_THAT(o, IsOk());
  auto none = LoadClusterRequest(f, *o);
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->has_value());
  f.nnodes = "2:4";
  f.rdzv_endpoint = "127.0.0.1:2379";
  f.rdzv_id = "job7";
  f.node_rank = 1;
  f.rdzv_timeout = "5s";
  auto r = LoadClusterRequest(f, *o);
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->min_nodes, 2);
  EXPECT_EQ((*r)->max_nodes, 4);
  EXPECT_EQ((*r)->job, "job7");
  EXPECT_EQ((*r)->node_rank, 1);
  EXPECT_EQ((*r)->address, "") << "no --master-addr: the host name";
  EXPECT_EQ((*r)->barrier_timeout_seconds, 5);
  f.rdzv_timeout = "0s";
  EXPECT_THAT(LoadClusterRequest(f, *o),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--rdzv-timeout: must be above 0")));
}

struct BadCase {
  std::string what;
  std::function<void(RunFlags&)> change;
  std::string yaml;
  std::string message;
};

class RunOptionsErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(RunOptionsErrorTest, NamesTheFlagOrThePlace) {
  RunFlags f = Flags();
  if (GetParam().change) GetParam().change(f);
  GlobalConfig config = GetParam().yaml.empty() ? GlobalConfig{} : Config(GetParam().yaml);
  EXPECT_THAT(LoadSupervisorOptions(f, config),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RunOptionsErrorTest,
    ::testing::Values(
        BadCase{"no_command", [](RunFlags& f) { f.command.clear(); }, "", "no command to run"},
        BadCase{"nnodes", [](RunFlags& f) { f.nnodes = "2"; }, "",
                "--nnodes 2: a job over several nodes needs --rdzv-endpoint"},
        BadCase{"nnodes_range", [](RunFlags& f) { f.nnodes = "3:2"; }, "",
                "--nnodes: expected N or MIN:MAX"},
        BadCase{"numa", [](RunFlags& f) { f.numa_bind = "on"; }, "", "--numa-bind: expected"},
        BadCase{"env", [](RunFlags& f) { f.env = {"=x"}; }, "", "--env: expected NAME=VALUE"},
        BadCase{"grace", [](RunFlags& f) { f.stop_grace = "soon"; }, "",
                "--stop-grace: expected a duration like 5s"},
        BadCase{"hang", [](RunFlags& f) { f.hang_timeout = "0s"; }, "",
                "--hang-timeout: must be above 0"},
        BadCase{"min_nproc", [](RunFlags& f) { f.min_nproc = 3; }, "",
                "--min-nproc 3 is above --nproc-per-node 2"},
        BadCase{"unknown_key", nullptr, "run:\n  max_restart: 2\n", "unknown key 'max_restart'"},
        BadCase{"escalation_key", nullptr, "run:\n  escalation:\n    fault: 2\n",
                "unknown key 'fault'"},
        BadCase{"count_range", nullptr, "run:\n  max_restarts: -1\n", "g.yaml:2:"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.what; });

}  // namespace
}  // namespace anxin::run
