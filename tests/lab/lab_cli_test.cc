// `anxin lab` as a user runs it: the whole loop on four simulated nodes with
// three faults (an NPU over 85 C, a RoCE link down on the job's NPU, a rank
// crash), checked row by row; `lab down` after `lab up` was killed with
// SIGKILL; and the refusals that must come before anything starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/lab/procs.h"

namespace anxin::lab {
namespace {

using ::anxin::testing::AnxinBinary;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json ReadJson(const std::string& path) {
  auto j = nlohmann::json::parse(::anxin::testing::ReadTextFile(path), nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// Three faults 20 s in, after the sample job is stepping on a busy machine;
// each device fault outlasts its rule's for: (30 s) so that it fires, then
// ends, so that it resolves; the crash comes once the link is back.
constexpr const char* kFaults = R"(faults:
  - {at: 20s, kind: temperature, node: 1, npu: 3, to: 88, for: 40s}
  - {at: 20s, kind: link_down, node: 3, npu: 0, for: 36s}
  - {at: 62s, kind: crash, node: 2}
)";

TEST(LabCliTest, FourNodesThreeFaultsTheWholeTable) {
  TempDir dir("anxin-lab");
  const std::string faults = dir.Write("faults.yaml", kFaults);
  const std::string lab = dir / "lab";
  SubprocessOptions o;
  o.argv = {AnxinBinary(), "lab",      "up",   "--nodes", "4", "--dir",
            lab,           "--faults", faults, "--port",  "0", "--exit-when-done",
            "--timeout",   "240s"};
  std::string out, err;
  std::mutex mu;
  o.on_stdout = [&](const OutputLine& l) {
    std::lock_guard lock(mu);
    out += l.text + "\n";
  };
  o.on_stderr = [&](const OutputLine& l) {
    std::lock_guard lock(mu);
    err += l.text + "\n";
  };
  o.timeout = std::chrono::seconds(330);
  auto up = Subprocess::Start(std::move(o));
  ASSERT_THAT(up, ::anxin::testing::IsOk());
  auto text = [&](std::string& s) {
    std::lock_guard lock(mu);
    return s;
  };

  // While it runs: every node steps, `lab status` says so, and the page shows them.
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto s = ReadJson(lab + "/status.json");
        int stepping = 0;
        for (const auto& n : s.value("nodes", nlohmann::json::array())) {
          stepping += n.value("step", -1) >= 0;
        }
        return stepping == 4;
      },
      std::chrono::seconds(150)))
      << text(err);
  auto status = RunAnxin({"--json", "lab", "status", "--dir", lab});
  EXPECT_EQ(status.exit_code, 0) << status.stderr_text;
  auto sj = nlohmann::json::parse(status.stdout_text, nullptr, false);
  ASSERT_FALSE(sj.is_discarded()) << status.stdout_text;
  EXPECT_TRUE(sj.value("running", false));
  ASSERT_EQ(sj["nodes"].size(), 4u);
  EXPECT_EQ(sj["nodes"][3]["name"], "node-3");
  const auto page_port = ReadJson(lab + "/processes.json")["lab"].value("port", 0);
  HttpClient page("127.0.0.1", page_port, {.timeout = std::chrono::milliseconds(5000)});
  auto html = page.Get("/");
  ASSERT_TRUE(html && html->ok());
  EXPECT_THAT(html->body, HasSubstr("node-3"));
  EXPECT_THAT(html->body, HasSubstr("Faults"));
  // Every node's agent names its node and its 8 NPUs in its series.
  const int agent_port = sj["nodes"][2].value("agent_port", 0);
  HttpClient agent("127.0.0.1", agent_port, {.timeout = std::chrono::milliseconds(5000)});
  auto metrics = agent.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->ok());
  EXPECT_THAT(metrics->body, HasSubstr("anxin_device_temperature_celsius{node=\"node-2\""));
  EXPECT_THAT(metrics->body, HasSubstr("device=\"7\""));

  auto st = (*up)->Wait();
  ASSERT_THAT(st, ::anxin::testing::IsOk());
  EXPECT_EQ(st->exit_code, 0) << text(out) << text(err);
  const std::string table = text(out);

  const nlohmann::json report = ReadJson(lab + "/report.json");
  ASSERT_TRUE(report.value("complete", false)) << table << text(err);
  const auto rows = report["rows"];
  ASSERT_EQ(rows.size(), 3u) << table;
  // Row by row: the order of the events, and what each card says.
  for (const auto& r : rows) {
    const auto& s = r["seconds"];
    SCOPED_TRACE(r.dump());
    EXPECT_TRUE(r.value("done", false));
    EXPECT_GE(s["card"].get<double>(), 0);
    EXPECT_GE(s["stepping"].get<double>(), 0);
    if (r.value("prometheus", false)) {
      // Not before the rule's for: (30 s), and the card after the firing.
      EXPECT_GE(s["firing"].get<double>(), 28);
      EXPECT_GE(s["card"].get<double>(), s["firing"].get<double>() - 2.5);
      EXPECT_GT(s["resolved"].get<double>(), s["card"].get<double>());
      EXPECT_THAT(r.value("card_text", ""), HasSubstr("Node: " + r.value("node", "")));
      EXPECT_THAT(r.value("card_text", ""),
                  HasSubstr("Device: " + std::to_string(r.value("npu", -1))));
      EXPECT_THAT(r.value("card_text", ""), HasSubstr("Since: 20"));
    }
  }
  EXPECT_EQ(rows[0]["alert"], "AnxinDeviceTemperatureHigh");
  EXPECT_FALSE(rows[0]["recovery_expected"].get<bool>());
  EXPECT_EQ(rows[1]["alert"], "AnxinLinkDown");
  ASSERT_TRUE(rows[1]["recovery_expected"].get<bool>());
  EXPECT_THAT(rows[1].value("recovery_text", ""), HasSubstr("link_down on node-3"));
  // Every node waits for the link: stepping again only after it is back (36 s).
  EXPECT_GE(rows[1]["seconds"]["stepping"].get<double>(), 35);
  EXPECT_EQ(rows[2]["alert"], "AnxinRunFault");
  EXPECT_THAT(rows[2].value("recovery_text", ""), HasSubstr("process_exit on node-2"));
  EXPECT_GT(rows[2]["generation"].get<int>(), rows[1]["generation"].get<int>());
  EXPECT_TRUE(report["duplicated_cards"].empty()) << report["duplicated_cards"].dump();
  EXPECT_THAT(table, HasSubstr("3 of 3 row(s) complete"));
  EXPECT_THAT(table, HasSubstr("0 duplicated"));

  // `lab report` prints the same table from the directory, and its JSON.
  auto rep = RunAnxin({"lab", "report", "--dir", lab});
  EXPECT_EQ(rep.exit_code, 0) << rep.stderr_text;
  EXPECT_THAT(rep.stdout_text, HasSubstr("AnxinLinkDown"));
  EXPECT_THAT(rep.stdout_text, HasSubstr("3 of 3 row(s) complete"));
  // Nothing of the lab is left running, and `lab down` finds nothing to stop.
  EXPECT_TRUE(ProcessesUnder(lab).empty());
  auto down = RunAnxin({"lab", "down", "--dir", lab});
  EXPECT_EQ(down.exit_code, 0) << down.stdout_text << down.stderr_text;
  EXPECT_THAT(down.stdout_text, HasSubstr("0 left"));
}

TEST(LabCliTest, DownStopsEverythingAfterUpIsKilled) {
  TempDir dir("anxin-lab");
  const std::string faults = dir.Write("faults.yaml", "faults: []\n");
  const std::string lab = dir / "lab";
  SubprocessOptions o;
  o.argv = {AnxinBinary(), "lab",      "up",   "--nodes", "2", "--dir",
            lab,           "--faults", faults, "--port",  "0"};
  o.timeout = std::chrono::seconds(200);
  auto up = Subprocess::Start(std::move(o));
  ASSERT_THAT(up, ::anxin::testing::IsOk());
  // Once the supervisors are started (the last children it records).
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto p = ReadJson(lab + "/processes.json");
        int n = 0;
        for (const auto& c : p.value("children", nlohmann::json::array())) {
          n += c.value("name", "").ends_with("-run");
        }
        return n == 2;
      },
      std::chrono::seconds(120)));
  ASSERT_FALSE(ProcessesUnder(lab).empty());
  ASSERT_THAT((*up)->Signal(SIGKILL), ::anxin::testing::IsOk());
  (void)(*up)->Wait();
  auto down = RunAnxin({"--json", "lab", "down", "--dir", lab});
  EXPECT_EQ(down.exit_code, 0) << down.stdout_text << down.stderr_text;
  auto j = nlohmann::json::parse(down.stdout_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << down.stdout_text;
  EXPECT_EQ(j.value("left", -1), 0);
  EXPECT_TRUE(j["ports_in_use"].empty());
  EXPECT_TRUE(ProcessesUnder(lab).empty());
  auto status = RunAnxin({"lab", "status", "--dir", lab});
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_THAT(status.stdout_text, HasSubstr("not running"));
}

TEST(LabCliTest, RefusesBadInputBeforeStartingAnything) {
  TempDir dir("anxin-lab");
  auto r = RunAnxin({"lab", "up", "--nodes", "0", "--dir", dir / "a"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("--nodes"));

  const std::string bad = dir.Write("bad.yaml",
                                    "faults:\n  - {at: 5s, kind: crash, node: 1}\n"
                                    "  - {at: 9s, kind: melt, node: 0}\n");
  r = RunAnxin({"lab", "up", "--faults", bad, "--dir", dir / "b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr(bad + ":3:"));
  EXPECT_THAT(r.stderr_text, HasSubstr("unknown kind 'melt'"));

  r = RunAnxin({"lab", "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);

  // A PATH with every program the lab needs but prometheus.
  const std::string bin = dir.Mkdir("bin");
  for (const char* p : {"etcd", "prometheus-alertmanager", "python3"}) {
    std::filesystem::create_symlink(std::string("/usr/bin/") + p, bin + "/" + p);
  }
  r = RunAnxin({"lab", "up", "--dir", dir / "c"}, {.env = {"PATH=" + bin}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.stderr_text, HasSubstr("prometheus not found"));
  EXPECT_THAT(r.stderr_text, HasSubstr("Debian's prometheus package"));
  EXPECT_TRUE(ProcessesUnder(dir / "c").empty());

  // The status page's port taken by someone else.
  HttpServer holder;
  ASSERT_THAT(holder.Start(), ::anxin::testing::IsOk());
  r = RunAnxin({"lab", "up", "--port", std::to_string(holder.port()), "--dir", dir / "d"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.stderr_text, HasSubstr("--port " + std::to_string(holder.port())));
  EXPECT_TRUE(ProcessesUnder(dir / "d").empty());

  // Nothing to report or stop where no lab ran.
  r = RunAnxin({"lab", "report", "--dir", dir / "none"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("no lab in"));
  r = RunAnxin({"lab", "down", "--dir", dir / "none"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace anxin::lab
