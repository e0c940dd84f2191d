// `anxin doctor` as a user runs it: exit codes, the table, --json, --only,
// --env, --fix (dry run and --apply on a copy of the captured tree), bad
// input, and a smoke run on this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace anxin::doctor_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DoctorCli, HelpListsTheOptions) {
  auto r = Anxin({"doctor", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const char* flag :
       {"--root", "--only", "--fix", "--apply", "--dry-run", "--hosts", "--env", "--nodes"}) {
    EXPECT_THAT(r.stdout_text, HasSubstr(flag));
  }
}

TEST(DoctorCli, GoodTreeExitsZero) {
  auto r = Anxin({"doctor", "--root", kTree});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("16 checks: 16 ok, 0 warn, 0 fail, 0 skipped"));
}

TEST(DoctorCli, FailingCheckExitsOneWithJson) {
  TempDir tmp;
  std::string tree = tmp.CopyTree("bad");
  WriteFile(tree + "/proc/irq/203/smp_affinity_list", "30\n");
  auto r = Anxin({"doctor", "--root", tree, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  auto j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["worst"], "fail");
  bool found = false;
  for (const auto& f : j["findings"]) {
    if (f["id"] == "irq.nic_affinity") {
      found = true;
      EXPECT_EQ(f["status"], "fail");
      EXPECT_EQ(f["fix_commands"].size(), 9u);
    }
  }
  EXPECT_TRUE(found);
}

TEST(DoctorCli, FixDryRunThenApplyOnACopy) {
  TempDir tmp;
  std::string tree = tmp.CopyTree("fixme");
  WriteFile(tree + "/proc/irq/203/smp_affinity_list", "30\n");
  WriteFile(tree + "/proc/1311/comm", "irqbalance\n");
  auto dry = Anxin({"doctor", "--root", tree, "--only", "irq", "--fix"});
  EXPECT_EQ(dry.exit_code, 1);
  EXPECT_THAT(dry.stdout_text, HasSubstr("dry run: would apply 11 fix step(s)"));
  EXPECT_THAT(dry.stdout_text, HasSubstr("  systemctl stop irqbalance    # irq.irqbalance"));
  EXPECT_THAT(dry.stdout_text,
              HasSubstr("  echo 3 > /proc/irq/203/smp_affinity_list    # irq.nic_affinity"));
  EXPECT_EQ(ReadFile(tree + "/proc/irq/203/smp_affinity_list"), "30\n");

  auto applied =
      Anxin({"doctor", "--root", tree, "--only", "irq.nic_affinity", "--fix", "--apply"});
  EXPECT_EQ(applied.exit_code, 0) << applied.stdout_text;
  EXPECT_THAT(applied.stdout_text, HasSubstr("[done] echo 3 > /proc/irq/203/smp_affinity_list"));
  EXPECT_THAT(applied.stdout_text, HasSubstr("after the fixes: worst status ok"));
  EXPECT_EQ(ReadFile(tree + "/proc/irq/203/smp_affinity_list"), "3\n");
}

TEST(DoctorCli, PreflightEnvFile) {
  TempDir tmp;
  std::string tree = tmp.CopyTree("noranks");
  for (int p = 4101; p < 4109; ++p)
    std::filesystem::remove_all(tree + "/proc/" + std::to_string(p));
  WriteFile(tmp.path() + "/job.env", "HCCL_ALGO=level0:NA;level1:ring\nHCCL_EXEC_TIMEOUT=300\n");
  auto r = Anxin({"doctor", "--root", tree, "--only", "comm", "--env", tmp.path() + "/job.env",
                  "--nodes", "128", "-v"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;  // warnings only
  EXPECT_THAT(r.stdout_text, HasSubstr("comm.algo      warn"));
  EXPECT_THAT(r.stdout_text, HasSubstr("environment: --env " + tmp.path() + "/job.env"));
}

TEST(DoctorCli, BadInputIsAUsageError) {
  auto only = Anxin({"doctor", "--root", kTree, "--only", "irq.nope"});
  EXPECT_EQ(only.exit_code, 2);
  EXPECT_THAT(only.stderr_text, HasSubstr("unknown check 'irq.nope' (known: "));
  auto root = Anxin({"doctor", "--root", "/nonexistent/tree"});
  EXPECT_EQ(root.exit_code, 2);
  EXPECT_THAT(root.stderr_text, HasSubstr("neither proc/ nor sys/"));
  auto apply = Anxin({"doctor", "--root", kTree, "--apply"});
  EXPECT_EQ(apply.exit_code, 2);
  EXPECT_THAT(apply.stderr_text, HasSubstr("go with --fix"));
  auto env = Anxin({"doctor", "--root", kTree, "--env", "/nonexistent.env"});
  EXPECT_EQ(env.exit_code, 2);
  TempDir tmp;
  WriteFile(tmp.path() + "/hosts", "-oProxyCommand=touch_x\n");
  auto hosts = Anxin({"doctor", "--hosts", tmp.path() + "/hosts"});
  EXPECT_EQ(hosts.exit_code, 2);
  EXPECT_THAT(hosts.stderr_text, HasSubstr("may not start with '-'"));
}

TEST(DoctorCli, ThisMachineSmoke) {
  auto r = Anxin({"doctor"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.Describe() << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("16 checks:"));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("AddressSanitizer")));
  auto j = Anxin({"doctor", "--json"});
  EXPECT_NO_THROW(nlohmann::json::parse(j.stdout_text)) << j.stdout_text;
}

}  // namespace
}  // namespace anxin::doctor_test
