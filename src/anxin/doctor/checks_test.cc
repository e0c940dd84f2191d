// Every doctor check, firing and not firing, on copies of the captured host
// tree (tests/fixtures/doctor/host_a) with one thing broken at a time; the
// --fix path writing a real copy; and a smoke run on this machine's / .
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "anxin/base/testing.h"
#include "anxin/doctor/check_report.h"
#include "anxin/doctor/facts.h"
#include "anxin/doctor/fix.h"
#include "anxin/doctor/registry.h"
#include "anxin/doctor/tools.h"
#include "anxin/host/processes.h"

namespace anxin::doctor {
namespace {

namespace fs = std::filesystem;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::Contains;
using ::testing::HasSubstr;

const char* kTree = ANXIN_SOURCE_DIR "/tests/fixtures/doctor/host_a";
constexpr int kFirstRank = 4101;

// A private copy of the good host tree that a test may break.
class Tree {
 public:
  Tree() {
    // tmpfs when there is one: a thousand small files copy ten times faster there.
    fs::path base =
        ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "anxin-doctor-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    fs::copy(kTree, dir_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  ~Tree() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

  void Write(const std::string& host_path, const std::string& content) {
    fs::path p = dir_ + host_path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  std::string Read(const std::string& host_path) const {
    std::ifstream in(dir_ + host_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Remove(const std::string& host_path) { fs::remove_all(dir_ + host_path); }
  void Replace(const std::string& host_path, const std::string& from, const std::string& to) {
    std::string s = Read(host_path);
    size_t at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << host_path;
    s.replace(at, from.size(), to);
    Write(host_path, s);
  }
  // Sets (or with nullopt removes) a variable in the environ of rank pid, or of every rank.
  void SetEnv(const std::string& key, std::optional<std::string> value, int pid = 0) {
    for (int p = kFirstRank; p < kFirstRank + 8; ++p) {
      if (pid != 0 && p != pid) continue;
      std::string path = "/proc/" + std::to_string(p) + "/environ";
      host::Environment env = host::ParseEnviron(Read(path));
      if (value) {
        env[key] = *value;
      } else {
        env.erase(key);
      }
      std::string out;
      for (const auto& [k, v] : env) out += k + "=" + v + std::string(1, '\0');
      Write(path, out);
    }
  }

  Report Run(CollectOptions o = {}) const {
    o.root = dir_;
    auto tools = MakeToolSource(host::HostRoot(dir_), 5);
    HostFacts facts = CollectFacts(o, *tools);
    return RunChecks(facts, BuiltinChecks().Select("").value());
  }

 private:
  std::string dir_;
};

const Finding& Get(const Report& r, const std::string& id) {
  for (const Finding& f : r.findings) {
    if (f.check_id == id) return f;
  }
  ADD_FAILURE() << "no finding " << id;
  static Finding none;
  return none;
}

std::string Evidence(const Finding& f) {
  std::string s = f.summary + "\n";
  for (const auto& e : f.evidence) s += e + "\n";
  return s;
}

#define EXPECT_STATUS(report, id, sev)                                             \
  do {                                                                             \
    const Report r_ = (report);                                                    \
    const Finding& f_ = Get(r_, id);                                               \
    EXPECT_EQ(f_.severity, sev) << id << ": " << SeverityName(f_.severity) << "\n" \
                                << Evidence(f_);                                   \
  } while (0)

TEST(DoctorChecks, GoodTreePassesEveryCheck) {
  Tree t;
  Report r = t.Run();
  ASSERT_EQ(r.findings.size(), BuiltinChecks().checks().size());
  for (const Finding& f : r.findings) {
    EXPECT_EQ(f.severity, Severity::kOk) << f.check_id << "\n" << Evidence(f);
    EXPECT_FALSE(f.why.empty()) << f.check_id;
    EXPECT_FALSE(f.fix.empty()) << f.check_id;
  }
  EXPECT_EQ(r.Worst(), Severity::kOk);
  EXPECT_TRUE(CollectFixes(r).empty());
}

TEST(DoctorChecks, IrqbalanceRunning) {
  Tree t;
  t.Write("/proc/1311/comm", "irqbalance\n");
  Report r = t.Run();
  const Finding& f = Get(r, "irq.irqbalance");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(f.evidence, Contains(HasSubstr("pid 1311")));
  ASSERT_EQ(f.actions.size(), 2u);
  EXPECT_EQ(f.actions[0].Render(), "systemctl stop irqbalance");
}

TEST(DoctorChecks, NicIrqOnRemoteNode) {
  Tree t;
  t.Write("/proc/irq/203/smp_affinity_list", "30\n");  // eth0 sits on node 0 (CPUs 0-23)
  Report r = t.Run();
  const Finding& f = Get(r, "irq.nic_affinity");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("203->30"));
  ASSERT_EQ(f.actions.size(), 9u) << "all of eth0's IRQs are re-spread";
  for (const FixAction& a : f.actions) {
    int cpu = std::stoi(a.write_content);
    EXPECT_LT(cpu, 24) << a.Render();
  }
}

TEST(DoctorChecks, NicIrqsAllOnOneCore) {
  Tree t;
  for (int irq = 216; irq < 225; ++irq)
    t.Write("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list", "12\n");
  Report r = t.Run();
  const Finding& f = Get(r, "irq.nic_affinity");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("all pinned to CPU 12"));
}

TEST(DoctorChecks, NicIrqCountsOnOneCore) {
  Tree t;
  // Affinity says "any local core" but the counters show one core serving all.
  std::string text = t.Read("/proc/interrupts");
  std::stringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("@pci:0000:51:00.0") != std::string::npos) {
      size_t colon = line.find(':');
      std::string counts;
      for (int c = 0; c < 96; ++c) {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%11d", c == 24 ? 500000 : 0);
        counts += buf;
      }
      size_t desc = line.find("IR-PCI-MSIX");
      line = line.substr(0, colon + 1) + " " + counts + "  " + line.substr(desc);
    }
    out += line + "\n";
  }
  t.Write("/proc/interrupts", out);
  for (int irq = 232; irq < 241; ++irq)
    t.Write("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list", "24-47\n");
  Report r = t.Run();
  const Finding& f = Get(r, "irq.nic_affinity");
  EXPECT_EQ(f.severity, Severity::kFail) << Evidence(f);
  EXPECT_THAT(Evidence(f), HasSubstr("100% of interrupts served by CPU 24"));
}

TEST(DoctorChecks, RankBoundToRemoteNode) {
  Tree t;
  t.Replace("/proc/4104/status", "Cpus_allowed_list:\t24-47", "Cpus_allowed_list:\t0-23");
  Report r = t.Run();
  const Finding& f = Get(r, "numa.rank_binding");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("pid 4104 (python3) uses NPU 3 on node 1"));
}

TEST(DoctorChecks, RankUnboundWarnsAndRemoteMemoryFails) {
  Tree t;
  t.Replace("/proc/4102/status", "Cpus_allowed_list:\t0-23", "Cpus_allowed_list:\t0-95");
  Report r = t.Run();
  EXPECT_STATUS(r, "numa.rank_binding", Severity::kWarn);
  t.Replace("/proc/4102/status", "Cpus_allowed_list:\t0-95", "Cpus_allowed_list:\t0-23");
  t.Write("/proc/4102/numa_maps",
          "ffff80000000 default anon=2000 N0=100 N2=1900 kernelpagesize_kB=4\n");
  r = t.Run();
  const Finding& f = Get(r, "numa.rank_binding");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("95% of its resident pages"));
}

TEST(DoctorChecks, NoRanksSkipsBinding) {
  Tree t;
  for (int p = kFirstRank; p < kFirstRank + 8; ++p) t.Remove("/proc/" + std::to_string(p));
  Report r = t.Run();
  EXPECT_STATUS(r, "numa.rank_binding", Severity::kSkip);
  EXPECT_STATUS(r, "env.rank_consistency", Severity::kSkip);
}

TEST(DoctorChecks, NumaConfigFileDisagrees) {
  Tree t;
  t.Replace("/etc/ascend_numa.conf", "npu3 node=1 cpus=24-47", "npu3 node=0 cpus=0-23");
  Report r = t.Run();
  const Finding& f = Get(r, "numa.config_file");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f),
              HasSubstr("line 5: NPU 3 bound to node 0, but 0000:53:00.0 is on node 1"));
  EXPECT_THAT(Evidence(f), HasSubstr("cpus 0-23: 0-23 not on node 1"));
  EXPECT_THAT(Evidence(f), HasSubstr("from npu-smi info"));
}

TEST(DoctorChecks, NumaConfigFileMissingOrBroken) {
  Tree t;
  t.Write("/etc/ascend_numa.conf", "npu9 node=0\nnpu0 nodes 0\n");
  EXPECT_STATUS(t.Run(), "numa.config_file", Severity::kFail);
  t.Write("/etc/ascend_numa.conf", "npu9 node=0\n");
  EXPECT_THAT(Evidence(Get(t.Run(), "numa.config_file")), HasSubstr("no such NPU"));
  t.Remove("/etc/ascend_numa.conf");
  EXPECT_STATUS(t.Run(), "numa.config_file", Severity::kSkip);
}

TEST(DoctorChecks, DeviceWithoutNumaNode) {
  Tree t;
  t.Write("/sys/bus/pci/devices/0000:99:00.0/numa_node", "-1\n");
  Report r = t.Run();
  EXPECT_STATUS(r, "numa.device_node", Severity::kWarn);
  EXPECT_THAT(Evidence(Get(r, "numa.device_node")), HasSubstr("npu 0000:99:00.0: numa_node -1"));
}

TEST(DoctorChecks, TrustPcp) {
  Tree t;
  t.Replace("/anxin-captures/mlnx_qos/eth2.txt", "trust state: dscp", "trust state: pcp");
  Report r = t.Run();
  const Finding& f = Get(r, "qos.trust");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(f.evidence, Contains("eth2: trust pcp"));
  EXPECT_THAT(f.fix, HasSubstr("mlnx_qos -i eth2 --trust dscp"));
}

TEST(DoctorChecks, NcclDscpOnLossyPriority) {
  Tree t;
  t.SetEnv("NCCL_IB_TC", "138");  // DSCP 34 -> priority 4, PFC only on 3
  Report r = t.Run();
  const Finding& f = Get(r, "qos.dscp_pfc");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f),
              HasSubstr("eth0: DSCP 34 (NCCL_IB_TC=138) -> priority 4, PFC off (PFC on: 3)"));
  EXPECT_THAT(f.fix, HasSubstr("mlnx_qos -i eth0 --pfc 0,0,0,0,1,0,0,0"));
}

TEST(DoctorChecks, HcclDscpUnmappedOrMalformed) {
  Tree t;
  t.SetEnv("HCCL_RDMA_TC", "100");  // DSCP 25: no dscp_to_tc entry on the NPU ports
  EXPECT_STATUS(t.Run(), "qos.dscp_pfc", Severity::kWarn);
  t.SetEnv("HCCL_RDMA_TC", "130");  // not a multiple of 4
  Report r = t.Run();
  EXPECT_STATUS(r, "qos.dscp_pfc", Severity::kFail);
  EXPECT_THAT(Evidence(Get(r, "qos.dscp_pfc")), HasSubstr("HCCL_RDMA_TC=130 is not DSCP x 4"));
  t.SetEnv("HCCL_RDMA_TC", "192");  // DSCP 48 -> TC 6, PFC only on 4
  t.SetEnv("HCCL_RDMA_SL", "6");
  r = t.Run();
  EXPECT_THAT(Evidence(Get(r, "qos.dscp_pfc")),
              HasSubstr("NPU 0: DSCP 48 (HCCL_RDMA_TC=192) -> TC 6, PFC off"));
}

TEST(DoctorChecks, HcclSlIsNotThePfcPriority) {
  Tree t;
  t.SetEnv("HCCL_RDMA_SL", "3");
  Report r = t.Run();
  const Finding& f = Get(r, "qos.rdma_sl");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("NPU 0: HCCL_RDMA_SL=3 but PFC is on priority 4"));
  t.SetEnv("HCCL_RDMA_SL", std::nullopt);  // the default, 4, is the PFC priority
  EXPECT_STATUS(t.Run(), "qos.rdma_sl", Severity::kOk);
}

TEST(DoctorChecks, ControlAndCnpShareTheDataPriority) {
  Tree t;
  t.Replace("/anxin-captures/mlnx_qos/eth1.txt", "dscp:31,", "dscp:0,31,");
  t.Write("/sys/class/net/eth4/ecn/roce_np/cnp_dscp", "26\n");
  Report r = t.Run();
  const Finding& f = Get(r, "qos.control_separation");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("eth1: control traffic (DSCP 0) shares data priority 3"));
  EXPECT_THAT(Evidence(f), HasSubstr("eth4: CNP DSCP 26 shares data priority 3"));
}

TEST(DoctorChecks, EcnOffOnRocePriority) {
  Tree t;
  t.Write("/sys/class/net/eth5/ecn/roce_np/enable/3", "0\n");
  Report r = t.Run();
  const Finding& f = Get(r, "qos.ecn");
  EXPECT_EQ(f.severity, Severity::kFail);
  EXPECT_THAT(Evidence(f), HasSubstr("eth5: ECN off on the RoCE priority (roce_np/enable/3 = 0)"));
  EXPECT_THAT(f.fix, HasSubstr("echo 1 > /sys/class/net/eth5/ecn/roce_np/enable/3"));
}

TEST(DoctorChecks, RingAtScale) {
  Tree t;
  t.SetEnv("HCCL_ALGO", "level0:NA;level1:ring");
  Report r = t.Run();  // WORLD_SIZE 1024 / LOCAL_WORLD_SIZE 8 = 128 nodes
  EXPECT_STATUS(r, "comm.algo", Severity::kWarn);
  EXPECT_THAT(Get(r, "comm.algo").summary, HasSubstr("at 128 nodes"));
  t.SetEnv("WORLD_SIZE", "256");  // 32 nodes: ring is fine
  EXPECT_STATUS(t.Run(), "comm.algo", Severity::kOk);
  CollectOptions o;
  o.job_nodes = 64;
  EXPECT_STATUS(t.Run(o), "comm.algo", Severity::kWarn);
  t.SetEnv("WORLD_SIZE", std::nullopt);
  EXPECT_STATUS(t.Run(), "comm.algo", Severity::kSkip);
  t.SetEnv("HCCL_ALGO", std::nullopt);
  t.SetEnv("NCCL_ALGO", "Ring");
  EXPECT_STATUS(t.Run(o), "comm.algo", Severity::kWarn);
  t.SetEnv("NCCL_ALGO", "Tree,Ring");
  EXPECT_STATUS(t.Run(o), "comm.algo", Severity::kOk);
}

TEST(DoctorChecks, TimeoutsThatHideHangs) {
  Tree t;
  t.SetEnv("HCCL_EXEC_TIMEOUT", std::nullopt);
  Report r = t.Run();
  EXPECT_STATUS(r, "comm.timeouts", Severity::kWarn);
  EXPECT_THAT(Evidence(Get(r, "comm.timeouts")),
              HasSubstr("HCCL_EXEC_TIMEOUT unset: default 1836 s"));
  t.SetEnv("HCCL_EXEC_TIMEOUT", "soon");
  EXPECT_STATUS(t.Run(), "comm.timeouts", Severity::kFail);
  t.SetEnv("HCCL_EXEC_TIMEOUT", "600");
  t.SetEnv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0");
  EXPECT_STATUS(t.Run(), "comm.timeouts", Severity::kWarn);
}

TEST(DoctorChecks, AllocatorOptions) {
  Tree t;
  t.SetEnv("PYTORCH_NPU_ALLOC_CONF", "expandable_segment:True");
  EXPECT_STATUS(t.Run(), "mem.alloc_conf", Severity::kWarn);
  t.SetEnv("PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:10,garbage_collection_threshold:1.5");
  Report r = t.Run();
  EXPECT_STATUS(r, "mem.alloc_conf", Severity::kFail);
  EXPECT_THAT(Evidence(Get(r, "mem.alloc_conf")),
              HasSubstr("max_split_size_mb: must be an integer > 20"));
  EXPECT_THAT(Evidence(Get(r, "mem.alloc_conf")),
              HasSubstr("garbage_collection_threshold: must be in (0, 1)"));
  t.SetEnv(
      "PYTORCH_NPU_ALLOC_CONF",
      "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4],max_split_size_mb:512");
  EXPECT_STATUS(t.Run(), "mem.alloc_conf", Severity::kOk);
}

TEST(DoctorChecks, RanksDisagree) {
  Tree t;
  t.SetEnv("NCCL_IB_TC", "98", 4107);
  Report r = t.Run();
  EXPECT_STATUS(r, "env.rank_consistency", Severity::kFail);
  EXPECT_THAT(Evidence(Get(r, "env.rank_consistency")),
              HasSubstr("pid 4107: NCCL_IB_TC=98 but pid 4101 has 106"));
}

TEST(DoctorChecks, HugePages) {
  Tree t;
  t.Replace("/proc/meminfo", "HugePages_Total:       0", "HugePages_Total:  760000");
  Report r = t.Run();
  EXPECT_STATUS(r, "mem.hugepages", Severity::kFail);
  EXPECT_THAT(Evidence(Get(r, "mem.hugepages")), HasSubstr("reserve 98% of memory"));
  Tree t2;
  t2.Write("/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
  EXPECT_STATUS(t2.Run(), "mem.hugepages", Severity::kWarn);
}

TEST(DoctorChecks, Governor) {
  Tree t;
  t.Write("/sys/devices/system/cpu/cpu5/cpufreq/scaling_governor", "powersave\n");
  Report r = t.Run();
  EXPECT_STATUS(r, "cpu.governor", Severity::kWarn);
  EXPECT_THAT(Get(r, "cpu.governor").evidence, Contains("1 CPUs powersave (5)"));
  for (int c = 0; c < 96; ++c)
    t.Remove("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpufreq");
  EXPECT_STATUS(t.Run(), "cpu.governor", Severity::kSkip);
}

TEST(DoctorChecks, PreflightEnvFileWhenNoRanksRun) {
  Tree t;
  for (int p = kFirstRank; p < kFirstRank + 8; ++p) t.Remove("/proc/" + std::to_string(p));
  CollectOptions o;
  o.env = host::ParseEnvFile("HCCL_ALGO=level0:NA;level1:ring\nNNODES=128\n").value();
  o.env_source = "--env job.env";
  Report r = t.Run(o);
  EXPECT_STATUS(r, "comm.algo", Severity::kWarn);
  EXPECT_THAT(Evidence(Get(r, "comm.algo")), HasSubstr("environment: --env job.env"));
  EXPECT_STATUS(r, "comm.timeouts", Severity::kWarn);  // HCCL_EXEC_TIMEOUT at its 1836 s default
}

TEST(DoctorFix, DryRunListsExactCommandsAndApplyWritesTheTree) {
  Tree t;
  t.Write("/proc/1311/comm", "irqbalance\n");
  t.Write("/proc/irq/203/smp_affinity_list", "30\n");
  Report r = t.Run();
  auto fixes = CollectFixes(r);
  ASSERT_EQ(fixes.size(), 11u);
  auto dry = ApplyFixes(fixes, host::HostRoot(t.dir()), /*apply=*/false, nullptr);
  std::string text = RenderFixes(dry, false);
  EXPECT_THAT(text, HasSubstr("dry run"));
  EXPECT_THAT(text, HasSubstr("  systemctl stop irqbalance    # irq.irqbalance"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "  echo 3 > /proc/irq/203/smp_affinity_list    # irq.nic_affinity: IRQ 203 -> CPU 3"));
  EXPECT_EQ(t.Read("/proc/irq/203/smp_affinity_list"), "30\n") << "a dry run writes nothing";

  auto applied = ApplyFixes(fixes, host::HostRoot(t.dir()), /*apply=*/true, nullptr);
  EXPECT_EQ(applied[0].state, FixOutcome::State::kSkipped) << "no systemctl under --root";
  for (size_t i = 2; i < applied.size(); ++i) {
    EXPECT_EQ(applied[i].state, FixOutcome::State::kApplied) << applied[i].detail;
  }
  EXPECT_EQ(t.Read("/proc/irq/203/smp_affinity_list"), "3\n");
  EXPECT_STATUS(t.Run(), "irq.nic_affinity", Severity::kOk);
}

TEST(DoctorFix, WriteFailureIsReportedAndTheRestContinue) {
  Tree t;
  std::vector<PlannedFix> fixes = {
      {"irq.nic_affinity", FixAction::Write("/proc/irq/9999/smp_affinity_list", "1")},
      {"irq.nic_affinity", FixAction::Write("/proc/irq/201/smp_affinity_list", "5")}};
  auto out = ApplyFixes(fixes, host::HostRoot(t.dir()), true, nullptr);
  EXPECT_EQ(out[0].state, FixOutcome::State::kFailed);
  EXPECT_THAT(out[0].detail, HasSubstr("/proc/irq/9999/smp_affinity_list"));
  EXPECT_EQ(out[1].state, FixOutcome::State::kApplied);
  EXPECT_THAT(RenderFixes(out, true), HasSubstr("[FAILED]"));
}

TEST(DoctorRegistry, SelectByIdOrPrefix) {
  auto irq = BuiltinChecks().Select("irq");
  ASSERT_THAT(irq, IsOk());
  EXPECT_EQ(irq->size(), 2u);
  auto two = BuiltinChecks().Select("qos.ecn, cpu.governor");
  ASSERT_THAT(two, IsOk());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_THAT(BuiltinChecks().Select("qos.nope"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("known: comm.algo")));
  EXPECT_THAT(BuiltinChecks().Select("ir"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(DoctorRegistry, RefusesADuplicateIdAndKeepsTheFirst) {
  CheckRegistry r;
  auto check = [](std::string id, std::string title) {
    return Check{std::move(id), std::move(title), "why", "fix",
                 [](const HostFacts&) { return Finding{}; }};
  };
  ASSERT_THAT(r.Add(check("irq.irqbalance", "first")), IsOk());
  EXPECT_THAT(r.Add(check("irq.irqbalance", "second")),
              HasCode(ErrorCode::kInvalidArgument,
                      HasSubstr("doctor check 'irq.irqbalance' is registered twice")));
  ASSERT_EQ(r.checks().size(), 1u);
  EXPECT_EQ(r.checks()[0].title, "first");
  EXPECT_THAT(r.Add(check("", "no id")), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(r.Add(Check{"cpu.governor", "no run", "", "", nullptr}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no run function")));
  // Every group's registration refuses a second run over the same registry.
  CheckRegistry all;
  ASSERT_THAT(RegisterCpuChecks(all), IsOk());
  EXPECT_THAT(RegisterCpuChecks(all),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("'cpu.governor'")));
}

TEST(DoctorRegistry, BuiltinIdsAreUniqueAndEachGroupHasItsFile) {
  std::set<std::string> ids;
  for (const Check& c : BuiltinChecks().checks()) {
    EXPECT_TRUE(ids.insert(c.id).second) << c.id;
    std::string group = c.id.substr(0, c.id.find('.'));
    EXPECT_TRUE(fs::exists(ANXIN_SOURCE_DIR "/src/anxin/doctor/checks_" + group + ".cc"))
        << c.id << " has no checks_" << group << ".cc";
  }
  EXPECT_EQ(ids.size(), 16u);
}

TEST(DoctorReport, JsonRoundTripAndTable) {
  Tree t;
  t.SetEnv("HCCL_RDMA_SL", "3");
  Report r = t.Run();
  auto back = ReportFromJson(ToJson(r));
  ASSERT_THAT(back, IsOk());
  ASSERT_EQ(back->findings.size(), r.findings.size());
  EXPECT_EQ(back->Worst(), Severity::kFail);
  std::string table = RenderTable(r);
  EXPECT_THAT(table, HasSubstr("qos.rdma_sl"));
  EXPECT_THAT(table, HasSubstr("  why: HCCL sends on priority HCCL_RDMA_SL"));
  EXPECT_THAT(ReportFromJson(nlohmann::json::parse("{\"x\":1}")), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ReportFromJson(nlohmann::json::parse(R"({"findings":[{"id":"a","status":"meh"}]})")),
              HasCode(ErrorCode::kDataLoss));
}

// The qos section of --json (docs/doctor.md, "JSON output"): every port with
// the same keys, the values the captures hold, and what could not be read.
TEST(DoctorReport, QosSectionCarriesEveryPortAndTheJobsDscp) {
  Tree t;
  Report r = t.Run();
  const nlohmann::json& q = r.qos;
  ASSERT_TRUE(q.is_object()) << q.dump();
  EXPECT_EQ(q["version"], 1);
  ASSERT_EQ(q["traffic"].size(), 2u);
  EXPECT_EQ(q["traffic"][0], (nlohmann::json{{"library", "hccl"},
                                             {"in_use", true},
                                             {"variable", "HCCL_RDMA_TC"},
                                             {"source", "HCCL_RDMA_TC=132"},
                                             {"dscp", 33},
                                             {"error", ""}}));
  EXPECT_EQ(q["traffic"][1]["library"], "nccl");
  EXPECT_EQ(q["traffic"][1]["dscp"], 26);  // NCCL_IB_TC=106
  ASSERT_EQ(q["ports"].size(), 16u);
  const std::set<std::string> keys = {"kind",          "name",     "pci",
                                      "trust",         "pfc",      "dscp_to_priority",
                                      "unlisted_dscp", "cnp_dscp", "error"};
  for (const auto& p : q["ports"]) {
    std::set<std::string> have;
    for (const auto& [k, v] : p.items()) have.insert(k);
    EXPECT_EQ(have, keys) << p.dump();
  }
  const nlohmann::json& eth0 = q["ports"][0];
  EXPECT_EQ(eth0["kind"], "nic");
  EXPECT_EQ(eth0["name"], "eth0");
  EXPECT_EQ(eth0["pci"], "0000:18:00.0");
  EXPECT_EQ(eth0["trust"], "dscp");
  EXPECT_EQ(eth0["pfc"], nlohmann::json::array({3}));
  EXPECT_EQ(eth0["dscp_to_priority"].size(), 8u);
  EXPECT_EQ(eth0["dscp_to_priority"]["26"], 3);
  EXPECT_EQ(eth0["unlisted_dscp"], "dscp>>3");
  EXPECT_EQ(eth0["cnp_dscp"], 48);
  EXPECT_EQ(eth0["error"], "");
  const nlohmann::json& npu0 = q["ports"][8];
  EXPECT_EQ(npu0["kind"], "npu");
  EXPECT_EQ(npu0["name"], "npu0");
  EXPECT_EQ(npu0["pfc"], nlohmann::json::array({4}));
  EXPECT_EQ(npu0["dscp_to_priority"], (nlohmann::json{{"33", 4}, {"48", 6}}));
  EXPECT_EQ(npu0["unlisted_dscp"], "unknown");
  EXPECT_TRUE(npu0["trust"].is_null());

  // Read back from --json as --hosts does.
  auto back = ReportFromJson(ToJson(r));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->qos, r.qos);

  // What could not be read is null, with the reason.
  Tree broken;
  broken.Remove("/anxin-captures/mlnx_qos/eth3.txt");
  broken.Remove("/anxin-captures/hccn_tool/2.dscp_to_tc.txt");
  broken.SetEnv("HCCL_RDMA_TC", "131");
  const nlohmann::json b = broken.Run().qos;
  EXPECT_TRUE(b["traffic"][0]["dscp"].is_null());
  EXPECT_THAT(b["traffic"][0]["error"].get<std::string>(), HasSubstr("HCCL_RDMA_TC=131"));
  const nlohmann::json& eth3 = b["ports"][3];
  EXPECT_EQ(eth3["name"], "eth3");
  EXPECT_TRUE(eth3["pfc"].is_null());
  EXPECT_THAT(eth3["error"].get<std::string>(), HasSubstr("not captured"));
  const nlohmann::json& npu2 = b["ports"][10];
  EXPECT_EQ(npu2["name"], "npu2");
  EXPECT_EQ(npu2["pfc"], nlohmann::json::array({4}));
  EXPECT_TRUE(npu2["dscp_to_priority"].is_null());
  EXPECT_THAT(npu2["error"].get<std::string>(), HasSubstr("-dscp_to_tc"));
}

TEST(DoctorSmoke, ThisMachineNoCrashAndPlainSkips) {
  CollectOptions o;  // the real "/"
  auto tools = MakeToolSource(host::HostRoot("/"), 5);
  HostFacts facts = CollectFacts(o, *tools);
  Report r = RunChecks(facts, BuiltinChecks().Select("").value());
  ASSERT_EQ(r.findings.size(), BuiltinChecks().checks().size());
  for (const Finding& f : r.findings) {
    EXPECT_FALSE(f.summary.empty()) << f.check_id;
    if (f.severity == Severity::kSkip) {
      EXPECT_GT(f.summary.size(), 10u) << f.check_id << " must say why";
    }
  }
  std::string table = RenderTable(r);
  EXPECT_THAT(table, HasSubstr("checks:"));
}

TEST(DoctorTools, CapturePathsAndMissingCaptures) {
  EXPECT_EQ(CapturePath({"mlnx_qos", "-i", "eth2"}), "/anxin-captures/mlnx_qos/eth2.txt");
  EXPECT_EQ(CapturePath({"hccn_tool", "-i", "3", "-dscp_to_tc", "-g"}),
            "/anxin-captures/hccn_tool/3.dscp_to_tc.txt");
  EXPECT_EQ(CapturePath({"rm", "-rf"}), "");
  Tree t;
  auto tools = MakeToolSource(host::HostRoot(t.dir()), 5);
  EXPECT_THAT(tools->Run({"mlnx_qos", "-i", "eth42"}),
              HasCode(ErrorCode::kNotFound, HasSubstr("not captured")));
  t.Remove("/anxin-captures/mlnx_qos");
  Report r = t.Run();
  EXPECT_STATUS(r, "qos.trust", Severity::kSkip);
  EXPECT_THAT(Get(r, "qos.trust").summary, HasSubstr("mlnx_qos output not captured"));
}

}  // namespace
}  // namespace anxin::doctor
