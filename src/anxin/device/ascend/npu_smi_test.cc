#include "anxin/device/ascend/npu_smi.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "anxin/base/strings.h"
#include "anxin/base/testing.h"
#include "anxin/device/ascend/npu_smi_testing.h"

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
      HasCode(ErrorCode::kDataLoss, HasSubstr("line 4: expected an NPU row")));
}

// The lines of a capture, and the text they make.
std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view l : SplitLines(text)) out.emplace_back(l);
  return out;
}
std::string Text(const std::vector<std::string>& lines, std::string_view end = "\n") {
  std::string out;
  for (const std::string& l : lines) out += l + std::string(end);
  return out;
}
// The process table: from the rule above its header to the end.
size_t ProcessTableStart(const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("Process id") != std::string::npos) return i - 1;
  }
  return lines.size();
}

// The real captures as they reach a ticket or another driver: rules removed
// (all, or those between devices), blank lines added, CRLF line ends, the
// process table dropped or moved above the devices. Each reads as the
// capture does, every chip from its own rows.
TEST(NpuSmiInfoTest, RealCapturesReshapedReadTheSame) {
  for (const char* name : {"npu-smi-info-16x910B2C-busy.txt", "npu-smi-info-1x910B4-idle.txt"}) {
    const std::string text = Capture(name);
    auto base = ParseNpuSmiInfo(text);
    ASSERT_THAT(base, IsOk()) << name;
    ASSERT_EQ(testing::FromOneBlock(text, *base), "");
    const std::vector<std::string> lines = Lines(text);
    const size_t procs = ProcessTableStart(lines);
    ASSERT_LT(procs, lines.size()) << name;
    std::vector<std::string> no_rules, no_device_rules, blank, dropped, no_rules_dropped, moved;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      if (!l.starts_with('+')) no_rules.push_back(l);
      if (!l.starts_with("+===") || i + 1 == lines.size()) no_device_rules.push_back(l);
      blank.push_back(l);
      blank.emplace_back("");
      if (i < procs) dropped.push_back(l);
      if (i < procs && !l.starts_with('+')) no_rules_dropped.push_back(l);
    }
    moved.assign(lines.begin() + static_cast<std::ptrdiff_t>(procs), lines.end());
    moved.insert(moved.end(), lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(procs));
    struct Variant {
      const char* what;
      std::string text;
      bool processes;
    };
    const Variant variants[] = {
        {"no rules", Text(no_rules), true},
        {"no rules between devices", Text(no_device_rules), true},
        {"blank lines", Text(blank), true},
        {"CRLF", Text(lines, "\r\n"), true},
        {"CRLF, no rules", Text(no_rules, "\r\n"), true},
        {"no process table", Text(dropped), false},
        {"no process table, no rules", Text(no_rules_dropped), false},
        {"process table first", Text(moved), true},
    };
    for (const Variant& v : variants) {
      SCOPED_TRACE(::testing::Message() << name << ": " << v.what);
      ASSERT_NE(v.text, text);
      auto info = ParseNpuSmiInfo(v.text);
      ASSERT_THAT(info, IsOk()) << v.text;
      NpuSmiInfo want = *base;
      if (!v.processes) want.processes.clear();
      ExpectSameChips(want, *info);
      EXPECT_EQ(testing::FromOneBlock(v.text, *info), "");
    }
  }
}

// Tables of 1, 2, 8 and 16 NPUs with 1 or 2 chips each, whose every value
// names its block, in every layout: each chip's every field is its own
// block's.
TEST(NpuSmiInfoTest, EveryDeviceOfEveryShapeIsReadFromItsOwnBlock) {
  using Shape = testing::TableShape;
  int tables = 0;
  for (int npus : {1, 2, 8, 16}) {
    for (int chips : {1, 2}) {
      for (Shape::Rules rules :
           {Shape::Rules::kAll, Shape::Rules::kNoneBetweenDevices, Shape::Rules::kNone}) {
        for (Shape::Processes procs :
             {Shape::Processes::kAfter, Shape::Processes::kNone, Shape::Processes::kBefore}) {
          // As printed; blank lines; CRLF; narrow columns; wide columns with
          // blank lines and CRLF.
          for (int layout = 0; layout < 5; ++layout) {
            {
              Shape shape{.npus = npus,
                          .chips_per_npu = chips,
                          .rules = rules,
                          .blank_lines = layout == 1 || layout == 4,
                          .crlf = layout == 2 || layout == 4,
                          .gap = layout == 3   ? 1
                                 : layout == 4 ? 7
                                               : 0,
                          .pad = layout == 4 ? 12 : 0,
                          .processes = procs};
              std::string text = testing::RenderTaggedTable(shape);
              SCOPED_TRACE(::testing::Message() << text);
              auto info = ParseNpuSmiInfo(text);
              ASSERT_THAT(info, IsOk());
              ASSERT_EQ(info->chips.size(), static_cast<size_t>(npus * chips));
              for (int k = 0; k < npus; ++k) {
                for (int c = 0; c < chips; ++c) {
                  const NpuSmiChip& got = info->chips[static_cast<size_t>(k * chips + c)];
                  ASSERT_EQ(testing::CompareChips(got, testing::TaggedChip(k, c)), "")
                      << "NPU " << k << " chip " << c;
                }
              }
              const bool with_procs = procs != Shape::Processes::kNone;
              ASSERT_EQ(info->processes.size(),
                        with_procs ? static_cast<size_t>(npus * chips) : 0u);
              for (size_t i = 0; i < info->processes.size(); ++i) {
                NpuSmiProcess want = testing::TaggedProcess(static_cast<int>(i) / chips,
                                                            static_cast<int>(i) % chips);
                EXPECT_EQ(info->processes[i].npu, want.npu);
                EXPECT_EQ(info->processes[i].chip, want.chip);
                EXPECT_EQ(info->processes[i].pid, want.pid);
                EXPECT_EQ(info->processes[i].name, want.name);
                EXPECT_EQ(info->processes[i].memory_mb, want.memory_mb);
              }
              ASSERT_EQ(testing::FromOneBlock(text, *info), "");
              ++tables;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(tables, 4 * 2 * 3 * 3 * 5);
}

// The line (1-based) of `text` that contains `needle`.
int LineOf(std::string_view text, std::string_view needle, int nth = 1) {
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(needle) != std::string_view::npos && --nth == 0)
      return static_cast<int>(i) + 1;
  }
  return 0;
}

std::string Without(std::string_view text, int line) {
  std::vector<std::string> lines = Lines(text);
  lines.erase(lines.begin() + line - 1);
  return Text(lines);
}

std::string Replaced(std::string_view text, std::string_view from, std::string_view to) {
  std::string out(text);
  size_t at = out.find(from);
  if (at != std::string::npos) out.replace(at, from.size(), to);
  return out;
}

// A row that does not fit refuses the whole reading, naming its line and
// what was expected; no device is ever assembled from two blocks.
TEST(NpuSmiInfoTest, ARowThatDoesNotFitRefusesTheReading) {
  const std::string text = testing::RenderTaggedTable(
      {.npus = 4, .rules = testing::TableShape::Rules::kNoneBetweenDevices});
  ASSERT_THAT(ParseNpuSmiInfo(text), IsOk());
  const int npu2 = LineOf(text, "| 2     910B3");
  const int chip2 = LineOf(text, "0000:12:00.0");
  ASSERT_EQ(chip2, npu2 + 1);
  auto refused = [](const std::string& what) {
    return HasCode(ErrorCode::kDataLoss, ::testing::AllOf(HasSubstr("npu-smi info: " + what),
                                                          HasSubstr("the reading is refused")));
  };
  // NPU 2's Chip row lost: its NPU row is followed by NPU 3's.
  EXPECT_THAT(ParseNpuSmiInfo(Without(text, chip2)),
              refused(fmt::format("line {}: NPU 2 has no Chip/Bus-Id row after it (line {} "
                                  "follows)",
                                  npu2, npu2 + 1)));
  // NPU 2's NPU row lost: its Chip row would be a second chip 0 of NPU 1.
  EXPECT_THAT(ParseNpuSmiInfo(Without(text, npu2)),
              refused(fmt::format("line {}: NPU 1 chip 0 is listed twice", npu2)));
  // The rows of one device swapped.
  {
    std::vector<std::string> lines = Lines(text);
    std::swap(lines[static_cast<size_t>(npu2 - 1)], lines[static_cast<size_t>(chip2 - 1)]);
    EXPECT_THAT(ParseNpuSmiInfo(Text(lines)), HasCode(ErrorCode::kDataLoss));
  }
  // The first Chip row without an NPU row above it.
  EXPECT_THAT(ParseNpuSmiInfo(Without(text, LineOf(text, "| 0     910B3"))),
              refused(fmt::format("line {}: a Chip/Bus-Id row with no NPU row before it",
                                  LineOf(text, "0000:10:00.0") - 1)));
  // A Bus-Id that is not a PCI address.
  EXPECT_THAT(ParseNpuSmiInfo(Replaced(text, "0000:12:00.0", "OK          ")),
              refused(fmt::format("line {}: expected a PCI address like 0000:66:00.0 in the "
                                  "Bus-Id column, got 'OK'",
                                  chip2)));
  // An HBM total of 0.
  EXPECT_THAT(ParseNpuSmiInfo(Replaced(text, "1020 / 65536", "1020 / 0    ")),
              refused(fmt::format("line {}: expected HBM-Usage as 'used / total'", chip2)));
  // A value missing: the cell holds fewer values than its header names.
  EXPECT_THAT(ParseNpuSmiInfo(Replaced(text, "82.5        32  ", "82.5            ")),
              refused(fmt::format("line {}: the NPU row holds 2 value(s) in the column "
                                  "'Power(W)    Temp(C)           Hugepages-Usage(page)', "
                                  "whose header (line 4) names 3",
                                  npu2)));
  // A column more than the header has.
  EXPECT_THAT(
      ParseNpuSmiInfo(Replaced(text, "| 2     910B3", "| 2 | 910B3")),
      refused(fmt::format("line {}: 4 columns where the Chip row's header (line 5) has 3", npu2)));
  // A word where a number belongs.
  EXPECT_THAT(
      ParseNpuSmiInfo(Replaced(text, "82.5", "OK  ")),
      refused(fmt::format(
          "line {}: expected a number, '-' or 'used / total' for power(w), got 'OK'", npu2)));
  // A whole device block printed twice.
  {
    std::vector<std::string> lines = Lines(text);
    lines.insert(lines.begin() + chip2,
                 {lines[static_cast<size_t>(npu2 - 1)], lines[static_cast<size_t>(chip2 - 1)]});
    EXPECT_THAT(ParseNpuSmiInfo(Text(lines)),
                refused(fmt::format("line {}: NPU 2 chip 0 is listed twice", chip2 + 2)));
  }
  // A process on an NPU the device table does not list.
  EXPECT_THAT(ParseNpuSmiInfo(Replaced(text, "| 3       0     ", "| 9       0     ")),
              refused(fmt::format("line {}: the process table names NPU 9 chip 0, which "
                                  "the device table does not list",
                                  LineOf(text, "400030"))));
  // The same Bus-Id on two NPUs.
  EXPECT_THAT(ParseNpuSmiInfo(Replaced(text, "0000:12:00.0", "0000:11:00.0")),
              refused(fmt::format("line {}: Bus-Id 0000:11:00.0 is already NPU 1's", chip2)));
}

// The check the fuzzers make catches a chip assembled from two blocks.
TEST(NpuSmiInfoTest, TheOneBlockCheckCatchesMixedBlocks) {
  const std::string text = testing::RenderTaggedTable({.npus = 2});
  auto info = ParseNpuSmiInfo(text);
  ASSERT_THAT(info, IsOk());
  ASSERT_EQ(testing::FromOneBlock(text, *info), "");
  NpuSmiInfo mixed = *info;
  std::swap(mixed.chips[0].power_watts, mixed.chips[1].power_watts);
  EXPECT_THAT(testing::FromOneBlock(text, mixed), HasSubstr("NPU 0 chip 0 (lines 7 and 8): power"));
  mixed = *info;
  mixed.chips[1].npu_line = mixed.chips[0].npu_line;  // NPU 0's row with NPU 1's Chip row
  EXPECT_THAT(testing::FromOneBlock(text, mixed), HasSubstr("is not a Chip row of it"));
  mixed = *info;
  mixed.chips[1].bus_id = mixed.chips[0].bus_id;
  EXPECT_THAT(testing::FromOneBlock(text, mixed), HasSubstr("bus id"));
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
  // CRLF, blank lines and other keys around it do not matter.
  EXPECT_THAT(ParseHccnLink("\r\n\r\nnet health status: Init\r\nlink status: DOWN\r\n\r\n"),
              ::testing::Optional(false));
  // Two ports' outputs run together agree or are refused.
  EXPECT_THAT(ParseHccnLink("link status: UP\nlink status: UP\n"), ::testing::Optional(true));
  EXPECT_THAT(
      ParseHccnLink("link status: UP\n\nlink status: DOWN\n"),
      HasCode(ErrorCode::kDataLoss, HasSubstr("line 3: link status DOWN contradicts line 1")));
}

}  // namespace
}  // namespace anxin::device::ascend
