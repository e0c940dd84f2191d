// Runs the built `anxin` program (ANXIN_BINARY_DIR/anxin) the way a user
// does and checks its output and exit status.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs anxin with args (argv, no shell), capturing stdout and stderr.
RunResult RunAnxin(const std::vector<std::string>& args) {
  std::string binary = std::string(ANXIN_BINARY_DIR) + "/anxin";
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err_pipe, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult r;
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << binary << ": " << strerror(rc);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, 60000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, n);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string Scenario(const char* name) {
  return std::string(ANXIN_SOURCE_DIR) + "/examples/scenarios/" + name;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("anxin-devices-cli-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(DevicesCliTest, JsonOfAScenarioFile) {
  RunResult r =
      RunAnxin({"devices", "--scenario", Scenario("faults.yaml"), "--at", "75s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["source"], "sim, scenario faults (8 x Ascend910C)");
  ASSERT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["devices"][0]["model"], "Ascend910C");
  EXPECT_EQ(j["devices"][0]["hbm_total_bytes"], 64ull << 30);
  EXPECT_EQ(j["devices"][3]["health"], "Critical");
  EXPECT_EQ(j["devices"][4]["links"][1]["up"], false);
  EXPECT_EQ(j["devices"][5]["utilisation_percent"], 0.0);
  EXPECT_EQ(j["devices"][7]["health"], "Lost");
  // The same scenario at the same virtual time reads the same.
  RunResult again =
      RunAnxin({"devices", "--scenario", Scenario("faults.yaml"), "--at", "75s", "--json"});
  nlohmann::json j2 = nlohmann::json::parse(again.out);
  EXPECT_EQ(j["devices"], j2["devices"]);
}

TEST(DevicesCliTest, DefaultTableAndGlobalJsonFlag) {
  RunResult r = RunAnxin({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sim, scenario default (8 x Ascend910C)"));
  EXPECT_THAT(r.out, HasSubstr("| 7     910C                | OK            |"));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));  // not a terminal: no colours
  RunResult j = RunAnxin({"--json", "devices"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["devices"].size(), 8u);
}

TEST(DevicesCliTest, WatchPrintsFramesAsJsonLines) {
  RunResult r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval",
                          "2s", "--count", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<nlohmann::json> frames;
  for (std::string line; std::getline(in, line);) frames.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0]["frame"], 0);
  EXPECT_EQ(frames[3]["frame"], 3);
  // 2 s apart on the scenario's clock; NPU 3 heats up frame by frame.
  double t0 = frames[0]["devices"][3]["temperature_celsius"];
  double t3 = frames[3]["devices"][3]["temperature_celsius"];
  EXPECT_GT(t3, t0 + 20);
}

TEST(DevicesCliTest, WatchAsTextEndsWithWhatChanged) {
  RunResult r = RunAnxin({"devices", "--scenario", "demo", "--at", "0s", "--watch", "--interval",
                          "3s", "--count", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("What changed in 6.0 s:\n  NPU 3: health OK -> Warning; temperature"));
  EXPECT_THAT(r.out, HasSubstr("NPU 5: HBM used"));
}

TEST(DevicesCliTest, BadScenarioIsExitTwoWithLineAndColumn) {
  std::string path =
      WriteTemp("bad.yaml", "devices:\n  count: 4\nevents:\n  - {at: 1s, device: 9, kind: hang}\n");
  RunResult r = RunAnxin({"devices", "--scenario", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ":4:22: events[0].device: device 9 does not exist"));
  EXPECT_TRUE(r.out.empty());
  std::filesystem::remove(path);
}

TEST(DevicesCliTest, OtherBadInputIsExitTwo) {
  RunResult missing = RunAnxin({"devices", "--scenario", "/nonexistent/x.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/x.yaml"));
  RunResult backend = RunAnxin({"devices", "--backend", "nope"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_THAT(backend.err, HasSubstr("unknown device backend 'nope' (known: sim)"));
  RunResult interval = RunAnxin({"devices", "--watch", "--interval", "soon"});
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_THAT(interval.err, HasSubstr("--interval"));
  RunResult flag = RunAnxin({"devices", "--bogus"});
  EXPECT_EQ(flag.exit_code, 2);
  RunResult demo = RunAnxin({"demo", "--seconds", "0"});
  EXPECT_EQ(demo.exit_code, 2);
}

TEST(DemoCliTest, ShortDemoRunsAndSummarises) {
  RunResult r = RunAnxin({"demo", "--seconds", "1", "--interval", "0.5s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("== stage 1/1"));
  EXPECT_THAT(r.out, HasSubstr("sim, scenario demo (8 x Ascend910C)"));
  EXPECT_THAT(r.out, HasSubstr("What changed in 1.0 s:"));
  EXPECT_THAT(r.out, HasSubstr("Demo done."));
}

}  // namespace
