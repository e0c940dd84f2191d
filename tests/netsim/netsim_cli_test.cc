// `anxin sim net` with a node's settings in one step: `anxin doctor --json`
// on the captured host tree (tests/fixtures/doctor/host_a), saved, then a
// scenario whose switch.qos_from names the saved report. The run must use the
// host's PFC priority and DSCP map, and a report that cannot be used must
// stop the run with exit 2 and the file named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "anxin/base/testing.h"

namespace anxin::netsim_test {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::ReadTextFile;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::anxin::testing::WriteTextFile;
using ::testing::HasSubstr;

const std::string kHostTree = FixturePath("doctor/host_a");

// An incast of 1 MiB from 6 hosts on the job's DSCP, and control messages on
// DSCP 48, on 8 hosts under one switch.
constexpr const char* kScenario = R"(topology: {kind: star, hosts: 8, link_gbps: 100}
switch:
  buffer: 4MiB
  qos_from: {file: host.json, ports: npu}
traffic:
  incast: {senders: 6, dst: 0, bytes: 1MiB, dscp: job}
  control: [{bytes: 256, interval: 5us, dscp: 48, count: 20}]
)";

// `anxin doctor --root TREE --json` saved as dir/host.json (doctor's exit
// status is not the point here: 0 or 1).
void SaveDoctorReport(const std::string& tree, const TempDir& dir) {
  auto doctor = RunAnxin({"doctor", "--root", tree, "--json"});
  ASSERT_TRUE(doctor.exit_code == 0 || doctor.exit_code == 1) << doctor.stderr_text;
  WriteTextFile(dir / "host.json", doctor.stdout_text);
}

nlohmann::json SimJson(const std::string& scenario) {
  auto sim = RunAnxin({"sim", "net", scenario, "--json"});
  EXPECT_EQ(sim.exit_code, 0) << sim.stderr_text;
  return sim.exit_code == 0 ? nlohmann::json::parse(sim.stdout_text) : nlohmann::json();
}

TEST(NetsimCli, HostQosFromDoctorInOneStep) {
  TempDir dir("anxin-netsim-e2e");
  SaveDoctorReport(kHostTree, dir);
  // The committed report of host_a (tests/fixtures/netsim/host_a_doctor.json)
  // is what doctor says today.
  auto saved = nlohmann::json::parse(ReadTextFile(dir / "host.json"));
  auto fixture = nlohmann::json::parse(ReadTextFile(FixturePath("netsim/host_a_doctor.json")));
  EXPECT_EQ(saved["qos"], fixture["qos"]);

  const std::string scenario = dir.Write("what_if.yaml", kScenario);
  nlohmann::json j = SimJson(scenario);
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["qos_from"]["file"], dir / "host.json");
  EXPECT_EQ(j["qos_from"]["pfc"], nlohmann::json::array({4}));  // hccn_tool -pfc -g
  EXPECT_EQ(j["qos_from"]["job_dscp"], 33);                     // HCCL_RDMA_TC=132
  EXPECT_EQ(j["qos_from"]["ports"].size(), 8u);
  // The job's traffic (DSCP 33 -> TC 4) is paused on the host's PFC priority
  // and loses nothing; without the host's settings priority 4 is lossy.
  EXPECT_GT(j["queues"][4]["pauses_sent"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["lossless_drops"], 0);
  EXPECT_EQ(j["drops"], 0);
  EXPECT_EQ(j["queues"][3]["pauses_sent"], 0);

  // A host whose NPU ports map DSCP 48 to TC 5: the control messages move
  // to priority 5 (48 >> 3 would be 6).
  const std::string tree = dir.CopyTree(kHostTree, "host_c");
  for (int npu = 0; npu < 8; ++npu) {
    WriteTextFile(tree + "/anxin-captures/hccn_tool/" + std::to_string(npu) + ".dscp_to_tc.txt",
                  "dscp:33 tc:4\ndscp:48 tc:5\n");
  }
  TempDir dir_c("anxin-netsim-e2e");
  SaveDoctorReport(tree, dir_c);
  nlohmann::json c = SimJson(dir_c.Write("what_if.yaml", kScenario));
  ASSERT_FALSE(c.is_null());
  EXPECT_GT(c["queues"][5]["bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(c["queues"][6]["bytes"], 0);
  EXPECT_EQ(c["qos_from"]["dscp_to_priority"], (nlohmann::json{{"33", 4}, {"48", 5}}));

  // The text report says where the settings came from.
  auto text = RunAnxin({"sim", "net", dir_c / "what_if.yaml"});
  EXPECT_EQ(text.exit_code, 0) << text.stderr_text;
  EXPECT_THAT(text.stdout_text,
              HasSubstr("# QoS from " + (dir_c / "host.json") + " (host " + tree +
                        ", 8 npu ports): PFC on priority 4; DSCP -> priority 4 <- 33; 5 <- 48"));
}

TEST(NetsimCli, UnusableHostReportsAreExitTwoWithTheFileNamed) {
  TempDir dir("anxin-netsim-e2e");
  const std::string scenario = dir.Write("what_if.yaml", kScenario);
  auto missing = RunAnxin({"sim", "net", scenario});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.stderr_text, HasSubstr(scenario + ":4:13: switch.qos_from: open " +
                                             (dir / "host.json") + ": No such file or directory"));

  // A report without the qos section (an older anxin's).
  SaveDoctorReport(kHostTree, dir);
  auto report = nlohmann::json::parse(dir.Read("host.json"));
  report.erase("qos");
  dir.Write("host.json", report.dump());
  auto old = RunAnxin({"sim", "net", scenario});
  EXPECT_EQ(old.exit_code, 2);
  EXPECT_THAT(old.stderr_text, HasSubstr(dir / "host.json"));
  EXPECT_THAT(old.stderr_text, HasSubstr("without a qos section"));

  // NICs that disagree: eth5 has PFC on priorities 3 and 4.
  const std::string tree = dir.CopyTree(kHostTree, "drift");
  std::string qos = ReadTextFile(tree + "/anxin-captures/mlnx_qos/eth5.txt");
  const std::string pfc = "enabled  0 0 0 1 0 0 0 0";
  ASSERT_NE(qos.find(pfc), std::string::npos);
  WriteTextFile(tree + "/anxin-captures/mlnx_qos/eth5.txt",
                qos.replace(qos.find(pfc), pfc.size(), "enabled  0 0 0 1 1 0 0 0"));
  SaveDoctorReport(tree, dir);
  dir.Write("nic.yaml", std::string(kScenario).replace(std::string(kScenario).find("ports: npu"),
                                                       10, "ports: nic"));
  auto drift = RunAnxin({"sim", "net", dir / "nic.yaml"});
  EXPECT_EQ(drift.exit_code, 2);
  EXPECT_THAT(drift.stderr_text, HasSubstr(dir / "host.json"));
  EXPECT_THAT(drift.stderr_text, HasSubstr("ports eth0 and eth5 disagree (PFC on 3 vs 3,4)"));
}

}  // namespace
}  // namespace anxin::netsim_test
