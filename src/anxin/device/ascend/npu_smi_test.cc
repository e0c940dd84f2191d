#include "anxin/device/ascend/npu_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"

namespace anxin::device::ascend {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::ReadTextFile;
using ::testing::HasSubstr;

std::string Capture(const char* name) {
  return ReadTextFile(FixturePath(std::string("ascend/") + name));
}

// The output blocks of hccn-tool-samples.txt: "$ command" -> the lines after it.
std::map<std::string, std::string> Samples() {
  std::map<std::string, std::string> out;
  std::string command;
  const std::string text = Capture("hccn-tool-samples.txt");  // outlives the views
  for (std::string_view line : SplitLines(text)) {
    if (line.starts_with("$ ")) {
      command = std::string(line.substr(2));
      out[command];
    } else if (!command.empty() && !line.empty()) {
      out[command] += std::string(line) + "\n";
    }
  }
  return out;
}

// The capture with every table cell rewritten: its words joined by `gap`
// spaces and padded by `pad` more, and the first two cells of each row
// swapped when `swap` is set (a driver that orders columns differently).
std::string Reshape(std::string_view text, int gap, int pad, bool swap) {
  std::string out;
  for (std::string_view raw : SplitLines(text)) {
    std::string_view line = Trim(raw);
    if (!line.starts_with('|')) {
      out += std::string(raw) + "\n";
      continue;
    }
    line.remove_prefix(1);
    if (line.ends_with('|')) line.remove_suffix(1);
    std::vector<std::string> cells;
    for (std::string_view c : Split(line, '|')) {
      std::string cell;
      for (std::string_view w : SplitWords(c)) {
        if (!cell.empty()) cell += std::string(gap, ' ');
        cell += w;
      }
      cells.push_back(" " + cell + std::string(pad, ' '));
    }
    if (swap && cells.size() >= 3) std::swap(cells[1], cells[2]);
    out += "|";
    for (const std::string& c : cells) out += c + "|";
    out += "\n";
  }
  return out;
}

void ExpectSameChips(const NpuSmiInfo& a, const NpuSmiInfo& b) {
  EXPECT_EQ(a.version, b.version);
  ASSERT_EQ(a.chips.size(), b.chips.size());
  for (size_t i = 0; i < a.chips.size(); ++i) {
    const NpuSmiChip& x = a.chips[i];
    const NpuSmiChip& y = b.chips[i];
    EXPECT_EQ(x.npu, y.npu);
    EXPECT_EQ(x.chip, y.chip);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.health, y.health);
    EXPECT_EQ(x.bus_id, y.bus_id);
    EXPECT_EQ(x.power_watts, y.power_watts);
    EXPECT_EQ(x.temperature_celsius, y.temperature_celsius);
    EXPECT_EQ(x.aicore_percent, y.aicore_percent);
    EXPECT_EQ(x.hbm_used_mb, y.hbm_used_mb);
    EXPECT_EQ(x.hbm_total_mb, y.hbm_total_mb);
  }
  ASSERT_EQ(a.processes.size(), b.processes.size());
  for (size_t i = 0; i < a.processes.size(); ++i) {
    EXPECT_EQ(a.processes[i].pid, b.processes[i].pid);
    EXPECT_EQ(a.processes[i].name, b.processes[i].name);
    EXPECT_EQ(a.processes[i].memory_mb, b.processes[i].memory_mb);
  }
}

TEST(NpuSmiInfoTest, SixteenBusyChips) {
  auto info = ParseNpuSmiInfo(Capture("npu-smi-info-16x910B2C-busy.txt"));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->version, "24.1.rc1");
  ASSERT_EQ(info->chips.size(), 16u);
  const NpuSmiChip& c0 = info->chips[0];
  EXPECT_EQ(c0.npu, 0);
  EXPECT_EQ(c0.chip, 0);
  EXPECT_EQ(c0.name, "910B2C");
  EXPECT_EQ(c0.health, "OK");
  EXPECT_EQ(c0.bus_id, "0000:66:00.0");
  EXPECT_DOUBLE_EQ(c0.power_watts, 86.8);
  EXPECT_EQ(c0.temperature_celsius, 35);
  EXPECT_EQ(c0.aicore_percent, 0);
  EXPECT_EQ(c0.hbm_used_mb, 59356u);
  EXPECT_EQ(c0.hbm_total_mb, 65536u);
  EXPECT_EQ(info->chips[15].npu, 15);
  EXPECT_EQ(info->chips[15].bus_id, "0000:D0:00.0");
  EXPECT_DOUBLE_EQ(info->chips[15].power_watts, 104.2);
  ASSERT_EQ(info->processes.size(), 16u);
  EXPECT_EQ(info->processes[0].pid, 418635);
  EXPECT_EQ(info->processes[0].name, "vllm");
  EXPECT_EQ(info->processes[0].memory_mb, 56057u);
  EXPECT_EQ(info->processes[15].npu, 15);
  EXPECT_EQ(info->processes[15].name, "rayNPURayWork");
}

TEST(NpuSmiInfoTest, OneIdleChip) {
  auto info = ParseNpuSmiInfo(Capture("npu-smi-info-1x910B4-idle.txt"));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->version, "25.5.2");
  ASSERT_EQ(info->chips.size(), 1u);
  EXPECT_EQ(info->chips[0].npu, 5);
  EXPECT_EQ(info->chips[0].name, "910B4");
  EXPECT_DOUBLE_EQ(info->chips[0].power_watts, 89.9);
  EXPECT_EQ(info->chips[0].hbm_used_mb, 2922u);
  EXPECT_EQ(info->chips[0].hbm_total_mb, 32768u);
  EXPECT_TRUE(info->processes.empty());
}

// Column widths and column order change between driver versions: every
// capture reshaped reads the same.
TEST(NpuSmiInfoTest, ShiftedAndReorderedColumnsReadTheSame) {
  for (const char* name : {"npu-smi-info-16x910B2C-busy.txt", "npu-smi-info-1x910B4-idle.txt"}) {
    std::string text = Capture(name);
    auto base = ParseNpuSmiInfo(text);
    ASSERT_THAT(base, IsOk()) << name;
    for (int gap : {1, 2, 7}) {
      for (int pad : {0, 1, 12}) {
        for (bool swap : {false, true}) {
          std::string variant = Reshape(text, gap, pad, swap);
          ASSERT_NE(variant, text);
          auto v = ParseNpuSmiInfo(variant);
          ASSERT_THAT(v, IsOk()) << name << " gap " << gap << " pad " << pad << "\n" << variant;
          SCOPED_TRACE(::testing::Message()
                       << name << " gap " << gap << " pad " << pad << " swap " << swap);
          ExpectSameChips(*base, *v);
        }
      }
    }
  }
}

// Fields in another order inside one column: matched by the header's names.
TEST(NpuSmiInfoTest, FieldsAreReadByName) {
  std::string text =
      "| NPU   Name     | Health | Temp(C)   Power(W)   Hugepages-Usage(page) |\n"
      "| Chip           | Bus-Id | HBM-Usage(MB)   AICore(%)                |\n"
      "+================+========+==========================================+\n"
      "| 3     910B3    | Alarm  | 61        -          0 / 0                 |\n"
      "| 0              | 0000:C1:00.0 | 1024 / 65536   42                   |\n";
  auto info = ParseNpuSmiInfo(text);
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(info->chips.size(), 1u);
  EXPECT_EQ(info->chips[0].npu, 3);
  EXPECT_EQ(info->chips[0].health, "Alarm");
  EXPECT_EQ(info->chips[0].temperature_celsius, 61);
  EXPECT_FALSE(Reported(info->chips[0].power_watts));  // "-": not reported
  EXPECT_EQ(info->chips[0].hbm_used_mb, 1024u);
  EXPECT_EQ(info->chips[0].aicore_percent, 42);
  EXPECT_EQ(info->chips[0].bus_id, "0000:C1:00.0");
}

TEST(NpuSmiInfoTest, NotATableIsDataLoss) {
  EXPECT_THAT(ParseNpuSmiInfo(""), HasCode(ErrorCode::kDataLoss, HasSubstr("no device table")));
  EXPECT_THAT(ParseNpuSmiInfo("dcmi module initialize failed. ret is -8005\n"),
              HasCode(ErrorCode::kDataLoss));
  EXPECT_THAT(
      ParseNpuSmiInfo("| NPU Name | Health |\n| Chip | Bus-Id |\n+==+\n| x y | OK |\n| 0 | b |\n"),
      HasCode(ErrorCode::kDataLoss, HasSubstr("without an NPU id")));
}

TEST(NpuSmiHealthTest, TheCaptureAndCodes) {
  auto samples = Samples();
  ASSERT_TRUE(samples.contains("npu-smi info -i 0 -c 0 -t health"));
  auto h = ParseNpuSmiHealth(samples["npu-smi info -i 0 -c 0 -t health"]);
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->health, "OK");
  EXPECT_TRUE(h->error_codes.empty());
  auto codes = ParseNpuSmiHealth("  Error Code   :  80E01801, 80CB8009\n health status: Alarm\n");
  ASSERT_THAT(codes, IsOk());
  EXPECT_EQ(codes->health, "Alarm");
  EXPECT_THAT(codes->error_codes, ::testing::ElementsAre("80E01801", "80CB8009"));
  EXPECT_THAT(ParseNpuSmiHealth("Error Code : NA\n"), HasCode(ErrorCode::kDataLoss));
}

// No capture of this page is at hand: the text is in the key : value form the
// npu-smi manual documents, with its keys.
TEST(NpuSmiUsagesTest, KeysIgnoreCaseAndSpacing) {
  auto u = ParseNpuSmiUsages(
      "        Memory Capacity(MB)            : 15039\n"
      "        HBM Capacity(MB)               : 65536\n"
      "        HBM Usage Rate(%)              : 90\n"
      "        Aicore Usage Rate(%)           : 40\n"
      "        Chip ID                        : 0\n");
  ASSERT_THAT(u, IsOk());
  EXPECT_EQ(u->Get("HBM Capacity(MB)"), 65536);
  EXPECT_EQ(u->Get("hbm   usage rate(%)"), 90);
  EXPECT_EQ(u->Get("Aicore Usage Rate(%)"), 40);
  EXPECT_FALSE(Reported(u->Get("AICPU Usage Rate(%)")));
  EXPECT_THAT(ParseNpuSmiUsages("nothing here\n"), HasCode(ErrorCode::kDataLoss));
}

TEST(HccnLinkTest, UpDownAndGarbage) {
  auto samples = Samples();
  ASSERT_TRUE(samples.contains("hccn_tool -i 0 -link -g"));
  EXPECT_THAT(ParseHccnLink(samples["hccn_tool -i 0 -link -g"]), ::testing::Optional(true));
  EXPECT_THAT(ParseHccnLink("link status: DOWN\n"), ::testing::Optional(false));
  EXPECT_THAT(ParseHccnLink("Link   Status :  up"), ::testing::Optional(true));
  EXPECT_THAT(ParseHccnLink(samples["hccn_tool -i 0 -net_health -g"]),
              HasCode(ErrorCode::kDataLoss, HasSubstr("no 'link status' line")));
  EXPECT_THAT(ParseHccnLink("link status: flapping\n"), HasCode(ErrorCode::kDataLoss));
}

}  // namespace
}  // namespace anxin::device::ascend
