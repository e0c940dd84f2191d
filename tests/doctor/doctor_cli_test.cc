// `anxin doctor` as a user runs it: exit codes, the table, --json, --only,
// --env, --fix (dry run and --apply on a copy of the captured tree), bad
// input, and a smoke run on this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

// What a user asked for with --fix is the plan: it comes first and alone
// (docs/doctor.md "Fixes"), followed by the checks' summary and the failing
// checks that --fix does not touch; the full report is `anxin doctor`'s.
TEST(DoctorCli, FixPrintsThePlanNotTheReport) {
  TempDir tmp;
  std::string tree = tmp.CopyTree("plan");
  WriteFile(tree + "/proc/irq/203/smp_affinity_list", "30\n");
  std::string qos = ReadFile(tree + "/anxin-captures/mlnx_qos/eth2.txt");
  size_t at = qos.find("trust state: dscp");
  ASSERT_NE(at, std::string::npos);
  WriteFile(tree + "/anxin-captures/mlnx_qos/eth2.txt", qos.replace(at, 17, "trust state: pcp"));
  auto dry = Anxin({"doctor", "--root", tree, "--fix"});
  EXPECT_EQ(dry.exit_code, 1) << dry.stderr_text;
  EXPECT_TRUE(dry.stdout_text.starts_with("dry run: would apply 9 fix step(s)")) << dry.stdout_text;
  EXPECT_THAT(dry.stdout_text, Not(HasSubstr("CHECK ")));
  EXPECT_THAT(dry.stdout_text, Not(HasSubstr("why:")));
  EXPECT_THAT(dry.stdout_text,
              HasSubstr("\n\n16 checks: 14 ok, 0 warn, 2 fail, 0 skipped (" + tree +
                        ")\n"
                        "not fixed by --fix: qos.trust (anxin doctor without --fix shows their "
                        "findings)\n"));
  // The report and the plan together stay available as JSON.
  auto json = Anxin({"doctor", "--root", tree, "--fix", "--json"});
  EXPECT_EQ(json.exit_code, 1) << json.stderr_text;
  auto j = nlohmann::json::parse(json.stdout_text);
  EXPECT_EQ(j["findings"].size(), 16u);
  EXPECT_EQ(j["fixes"].size(), 9u);
  EXPECT_EQ(j["applied"], false);

  auto applied = Anxin({"doctor", "--root", tree, "--fix", "--apply"});
  EXPECT_EQ(applied.exit_code, 1) << applied.stdout_text;  // qos.trust still fails
  EXPECT_TRUE(applied.stdout_text.starts_with("applying 9 fix step(s):\n")) << applied.stdout_text;
  EXPECT_THAT(applied.stdout_text,
              HasSubstr("not fixed by --fix: qos.trust (anxin doctor without --fix shows their "
                        "findings)\nafter the fixes: worst status fail\n"));
}

// Every file-taking flag refuses what cannot be the file the user meant, with
// exit 2 and the flag's name (docs/exit-codes.md).
TEST(DoctorCli, InputFilesThatCannotBeMeantAreUsageErrors) {
  TempDir tmp;
  WriteFile(tmp.path() + "/empty", "");
  for (const std::string flag : {"--env", "--hosts", "--ssh-config"}) {
    std::vector<std::string> base = {"doctor", "--root", kTree, "--only", "cpu"};
    if (flag == "--ssh-config") {
      WriteFile(tmp.path() + "/hosts", "node01\n");
      base = {"doctor", "--hosts", tmp.path() + "/hosts"};
    }
    auto with = [&](const std::string& value) {
      std::vector<std::string> args = base;
      args.push_back(flag);
      args.push_back(value);
      return Anxin(args);
    };
    auto dir = with(tmp.path());
    EXPECT_EQ(dir.exit_code, 2) << flag << ": " << dir.stdout_text;
    EXPECT_THAT(dir.stderr_text,
                HasSubstr("error: " + flag + " " + tmp.path() + ": is a directory, not a file"));
    auto missing = with(tmp.path() + "/nope");
    EXPECT_EQ(missing.exit_code, 2) << flag;
    EXPECT_THAT(missing.stderr_text, HasSubstr(flag));
    EXPECT_THAT(missing.stderr_text, HasSubstr("No such file"));
    if (flag == "--ssh-config") continue;  // an empty ssh configuration is valid (below)
    auto empty = with(tmp.path() + "/empty");
    EXPECT_EQ(empty.exit_code, 2) << flag;
    EXPECT_THAT(empty.stderr_text,
                HasSubstr(flag + " " + tmp.path() + "/empty: the file is empty"));
  }
  // ssh -F /dev/null is the usual way to say "no configuration".
  auto devnull = Anxin({"doctor", "--root", kTree, "--only", "cpu", "--ssh-config", "/dev/null"});
  EXPECT_EQ(devnull.exit_code, 0) << devnull.stderr_text;
}

TEST(DoctorCli, UnreadableInputFileIsAUsageError) {
  TempDir tmp;
  std::string path = tmp.path() + "/secret";
  WriteFile(path, "HCCL_ALGO=ring\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  if (::access(path.c_str(), R_OK) == 0) {
    GTEST_SKIP() << "this process can read a mode 000 file (root with CAP_DAC_OVERRIDE), so "
                    "the unreadable case cannot be made here";
  }
  for (const std::string flag : {"--env", "--hosts"}) {
    auto r = Anxin({"doctor", "--root", kTree, flag, path});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.stderr_text, HasSubstr("error: " + flag + ": "));
    EXPECT_THAT(r.stderr_text, HasSubstr("Permission denied"));
  }
}

TEST(DoctorCli, RootFromTheEnvironmentIsNamedInErrors) {
  auto bad = Anxin({"doctor"}, {"ANXIN_DOCTOR_ROOT=/nonexistent/tree"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.stderr_text, HasSubstr("error: ANXIN_DOCTOR_ROOT=/nonexistent/tree: neither "
                                         "proc/ nor sys/ under it"));
  EXPECT_THAT(bad.stderr_text, Not(HasSubstr("--root")));
  auto good = Anxin({"doctor", "--only", "cpu"}, {"ANXIN_DOCTOR_ROOT=" + kTree});
  EXPECT_EQ(good.exit_code, 0) << good.stderr_text;
  EXPECT_THAT(good.stdout_text, HasSubstr("(" + kTree + ")"));
  // The flag wins over the variable, and then the flag is what is named.
  auto flag = Anxin({"doctor", "--root", "/nonexistent/flag"}, {"ANXIN_DOCTOR_ROOT=" + kTree});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.stderr_text, HasSubstr("error: --root /nonexistent/flag: neither"));
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
