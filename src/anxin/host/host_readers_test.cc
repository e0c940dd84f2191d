// Readers of /sys, /proc, /etc and vendor-tool output, run on the captured
// host tree (tests/fixtures/doctor/host_a) and on the real tool samples.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "anxin/base/testing.h"
#include "anxin/host/ascend_numa_conf.h"
#include "anxin/host/cpu_list.h"
#include "anxin/host/interrupts.h"
#include "anxin/host/processes.h"
#include "anxin/host/qos.h"
#include "anxin/host/root_fs.h"
#include "anxin/host/system.h"
#include "anxin/host/topology.h"

namespace anxin::host {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* kTree = ANXIN_SOURCE_DIR "/tests/fixtures/doctor/host_a";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SharedSample(const std::string& name) {
  std::string text = Slurp(std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/ascend/" + name);
  EXPECT_FALSE(text.empty()) << name;
  return text;
}

TEST(CpuList, ParsesAndFormats) {
  EXPECT_THAT(ParseCpuList("0-3,8,10-11\n").value(), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_THAT(ParseCpuList("").value(), ElementsAre());
  EXPECT_EQ(FormatCpuList({11, 0, 1, 2, 3, 8, 10}), "0-3,8,10-11");
  EXPECT_THAT(ParseCpuList("3-1"), HasCode(ErrorCode::kInvalidArgument, HasSubstr("3-1")));
  EXPECT_THAT(ParseCpuList("a"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Topology, ReadsFourNodesEightNpusEightNics) {
  HostRoot root(kTree);
  auto nodes = ReadNumaNodes(root);
  ASSERT_THAT(nodes, IsOk());
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ(FormatCpuList((*nodes)[1].cpus), "24-47");
  EXPECT_EQ(NodeOfCpu(*nodes, 50), 2);
  auto pci = ReadPciDevices(root);
  ASSERT_THAT(pci, IsOk());
  int npus = 0, nics = 0;
  for (const PciDevice& d : *pci) {
    if (d.kind == DeviceKind::kHuaweiNpu) ++npus;
    if (d.kind == DeviceKind::kMellanoxNic) {
      ++nics;
      EXPECT_EQ(d.msi_irqs.size(), 9u) << d.address;
      EXPECT_EQ(d.net_interfaces.size(), 1u) << d.address;
    }
    if (d.address == "0000:00:00.0") {
      EXPECT_EQ(d.kind, DeviceKind::kOther) << "a Huawei root port is no NPU";
    }
  }
  EXPECT_EQ(npus, 8);
  EXPECT_EQ(nics, 8);
}

TEST(Topology, ClassifiesByVendorAndClass) {
  EXPECT_EQ(ClassifyPci(0x19e5, 0xd802, 0x120000), DeviceKind::kHuaweiNpu);
  EXPECT_EQ(ClassifyPci(0x19e5, 0xd801, 0x0b4000), DeviceKind::kHuaweiNpu);
  EXPECT_EQ(ClassifyPci(0x19e5, 0x1822, 0x020000), DeviceKind::kOtherNic);  // hinic
  EXPECT_EQ(ClassifyPci(0x10de, 0x2330, 0x030200), DeviceKind::kNvidiaGpu);
  EXPECT_EQ(ClassifyPci(0x15b3, 0x101d, 0x020000), DeviceKind::kMellanoxNic);
}

TEST(Topology, NpuSmiBusIdsFromRealOutput) {
  auto ids = ParseNpuSmiBusIds(SharedSample("npu-smi-info-16x910B2C-busy.txt"));
  ASSERT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids[0], "0000:66:00.0");
  EXPECT_EQ(ids[3], "0000:3f:00.0");
  EXPECT_EQ(ids[15], "0000:d0:00.0");
  auto one = ParseNpuSmiBusIds(SharedSample("npu-smi-info-1x910B4-idle.txt"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[5], "0000:41:00.0");
}

TEST(Interrupts, ParsesManyCoreTable) {
  HostRoot root(kTree);
  auto text = root.ReadFile("/proc/interrupts");
  ASSERT_THAT(text, IsOk());
  auto t = ParseInterrupts(*text);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->cpu_ids.size(), 96u);
  const IrqLine* l = t->Find(201);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->counts.size(), 96u);
  EXPECT_THAT(l->description, HasSubstr("mlx5_comp0@pci:0000:18:00.0"));
  EXPECT_EQ(t->Find(-1), nullptr);
  EXPECT_THAT(ReadIrqAffinity(root, 201).value(), ElementsAre(1));
}

TEST(Interrupts, ShortRowsAndBadHeader) {
  auto t = ParseInterrupts(
      "           CPU0       CPU1\n  0:         44          0   IO-APIC   2-edge      timer\n"
      " 27:          5   PCI-MSI 1-edge  ahci\nERR:  0\n");
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->irqs.size(), 2u);
  EXPECT_THAT(t->irqs[1].counts, ElementsAre(5));
  EXPECT_EQ(t->irqs[1].description, "PCI-MSI 1-edge  ahci");
  EXPECT_THAT(ParseInterrupts("garbage\n"), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ParseInterrupts(""), HasCode(ErrorCode::kDataLoss));
}

TEST(Processes, FindsRanksWithDevicesBindingsAndEnvironment) {
  HostRoot root(kTree);
  auto ranks = ReadAcceleratorProcesses(root);
  ASSERT_THAT(ranks, IsOk());
  ASSERT_EQ(ranks->size(), 8u);
  const ProcessInfo& p = (*ranks)[3];
  EXPECT_EQ(p.pid, 4104);
  EXPECT_EQ(p.name, "python3");
  ASSERT_EQ(p.accelerators.size(), 1u) << "davinci_manager is a control node, not a device";
  EXPECT_EQ(p.accelerators[0].index, 3);
  EXPECT_TRUE(p.accelerators[0].is_npu);
  EXPECT_EQ(FormatCpuList(p.cpus_allowed), "24-47");
  EXPECT_EQ(p.pages_per_node.at(1), 512 + 2097152 + 1024);
  EXPECT_EQ(p.env.at("HCCL_RDMA_TC"), "132");
  EXPECT_EQ(p.env.at("RANK"), "3");
  EXPECT_TRUE(FindProcessesByName(root, "irqbalance").empty());
  EXPECT_THAT(FindProcessesByName(root, "sshd"), ElementsAre(877));
}

TEST(Processes, AcceleratorPathsAndEnvFiles) {
  EXPECT_FALSE(ParseAcceleratorPath("/dev/davinci_manager"));
  EXPECT_FALSE(ParseAcceleratorPath("/dev/nvidiactl"));
  EXPECT_FALSE(ParseAcceleratorPath("/dev/nvidia-uvm"));
  EXPECT_EQ(ParseAcceleratorPath("/dev/nvidia7")->index, 7);
  auto env = ParseEnvFile("# job\nexport HCCL_ALGO=\"level0:NA;level1:ring\"\nNCCL_IB_TC=106\n");
  ASSERT_THAT(env, IsOk());
  EXPECT_EQ(env->at("HCCL_ALGO"), "level0:NA;level1:ring");
  EXPECT_EQ(env->at("NCCL_IB_TC"), "106");
  EXPECT_THAT(ParseEnvFile("JUSTAWORD\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("line 1")));
  EXPECT_EQ(ParseEnviron(std::string("A=1\0B=x=y\0", 10)).at("B"), "x=y");
}

TEST(System, HugePagesAndGovernors) {
  HostRoot root(kTree);
  auto h = ReadHugePages(root);
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->mem_total_kb, 1584395240);
  EXPECT_EQ(h->page_size_kb, 2048);
  EXPECT_EQ(h->thp_enabled, "madvise");
  auto g = ReadGovernors(root);
  ASSERT_THAT(g, IsOk());
  EXPECT_EQ(g->size(), 96u);
  EXPECT_EQ(g->at(95), "performance");
  EXPECT_THAT(ParseMeminfo("Foo: 1 kB\n"), HasCode(ErrorCode::kDataLoss));
}

TEST(Qos, RealMlnxQosSample) {
  auto q = ParseMlnxQos(SharedSample("mlnx-qos-sample.txt"));
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(q->trust, "dscp");
  EXPECT_EQ(q->PriorityOfDscp(26), 3);
  EXPECT_EQ(q->PriorityOfDscp(24), 3);
  EXPECT_EQ(q->PriorityOfDscp(48), 6) << "unlisted DSCPs take the mlx5 default dscp >> 3";
  EXPECT_TRUE(q->has_pfc);
  EXPECT_TRUE(q->pfc_enabled[3]);
  EXPECT_FALSE(q->pfc_enabled[4]);
  EXPECT_THAT(ParseMlnxQos("command not found\n"), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ParseMlnxQos("prio:9 dscp:1,\n"), HasCode(ErrorCode::kDataLoss));
}

TEST(Qos, RealHccnToolPfcSample) {
  std::string all = SharedSample("hccn-tool-samples.txt");
  auto pfc = ParsePfcTable(all.substr(all.find("$ hccn_tool -i 0 -pfc -g")));
  ASSERT_THAT(pfc, IsOk());
  EXPECT_TRUE((*pfc)[4]);
  EXPECT_FALSE((*pfc)[3]);
  EXPECT_THAT(ParsePfcTable("link status: UP\n"), HasCode(ErrorCode::kDataLoss));
}

TEST(Qos, HccnDscpToTcForms) {
  auto m = ParseHccnDscpToTc("dscp:33 tc:4\nDSCP 48 -> TC 6\nnoise\n");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->at(33), 4);
  EXPECT_EQ(m->at(48), 6);
  EXPECT_THAT(ParseHccnDscpToTc("dscp:70 tc:1\n"), HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(ParseHccnDscpToTc("nothing here\n"), HasCode(ErrorCode::kDataLoss));
}

TEST(Qos, SysfsEcn) {
  HostRoot root(kTree);
  RoceEcn e = ReadRoceEcn(root, "eth0");
  ASSERT_TRUE(e.present);
  EXPECT_EQ(e.np_enabled[3], true);
  EXPECT_EQ(e.rp_enabled[0], false);
  EXPECT_EQ(e.cnp_dscp, 48);
  EXPECT_FALSE(ReadRoceEcn(root, "eth9").present);
}

TEST(AscendNumaConf, AcceptedForms) {
  auto b = ParseAscendNumaConf(
      "# c\nnpu0 node=0 cpus=0-23\nnpu1: 1\n2 = 3\ndavinci3 numa 1 cpus 24-47\n\n");
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ(b->size(), 4u);
  EXPECT_EQ((*b)[0].node, 0);
  EXPECT_EQ(FormatCpuList((*b)[0].cpus), "0-23");
  EXPECT_EQ((*b)[1].node, 1);
  EXPECT_EQ((*b)[2].npu, 2);
  EXPECT_EQ((*b)[2].node, 3);
  EXPECT_EQ((*b)[3].line, 5);
  EXPECT_THAT(ParseAscendNumaConf("npuX node=1\n"),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("ascend_numa.conf:1")));
  EXPECT_THAT(ParseAscendNumaConf("npu1 color=red\n"), HasCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(ParseAscendNumaConf("npu1\n"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(HostRoot, ErrorsNameTheHostPathAndWritesStayUnderRoot) {
  HostRoot root(kTree);
  auto missing = root.ReadFile("/proc/nope");
  ASSERT_THAT(missing, HasCode(ErrorCode::kNotFound, HasSubstr("/proc/nope")));
  EXPECT_THAT(missing.error().Describe(), ::testing::Not(HasSubstr("fixtures")));
  HostRoot live;
  EXPECT_TRUE(live.is_live());
  EXPECT_EQ(live.Path("/proc/x"), "/proc/x");
  EXPECT_EQ(root.Path("/proc/x"), std::string(kTree) + "/proc/x");
}

}  // namespace
}  // namespace anxin::host
