// What a user gets from the built `anxin` for wrong input: exit 2 with one
// line naming the flag or path and what is wrong, never a run that
// silently reads the input as something else (docs/exit-codes.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "anxin/base/testing.h"
#include "anxin/loadgen/scripted_server_testing.h"

namespace anxin {
namespace {

using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The run was refused as bad input, with message on stderr.
void ExpectUsage(const CommandOutput& out, const std::string& message) {
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr(message));
}

TEST(CliChecks, EveryServerRefusesAPortOutside0To65535) {
  const std::vector<std::vector<std::string>> servers = {
      {"agent", "--once"},
      {"notify", "--sink-file", "/dev/null"},
      {"serve", "sim", "--duration", "0.1"},
      {"serve", "gate", "--upstream", "http://127.0.0.1:9", "--duration", "0.1"}};
  for (const auto& server : servers) {
    for (const std::string port : {"70000", "-1"}) {
      std::vector<std::string> args = server;
      args.insert(args.end(), {"--port", port});
      ExpectUsage(RunAnxin(args), "--port: must be from 0 to 65535, got " + port);
    }
  }
}

TEST(CliChecks, BenchServeConcurrencyAndRequestsMustBeAtLeastOne) {
  ExpectUsage(RunAnxin({"bench", "serve", "-c", "0"}), "--concurrency: must be at least 1, got 0");
  ExpectUsage(RunAnxin({"bench", "serve", "-c", "-2"}),
              "--concurrency: must be at least 1, got -2");
  auto n = RunAnxin({"bench", "serve", "-n", "0"});
  ExpectUsage(n, "--num-requests: must be at least 1, got 0");
  EXPECT_THAT(n.stderr_text, Not(HasSubstr("1797693")));
}

TEST(CliChecks, GigabytesAreRefusedAsAmbiguousNotReadAsGibibytes) {
  ExpectUsage(RunAnxin({"kv", "plan", "--model", "llama-3-8b", "--device-memory", "80GB"}),
              "--device-memory: size '80GB' is ambiguous: write 80GiB for 85899345920 bytes");
  auto ok = RunAnxin({"kv", "plan", "--model", "llama-3-8b", "--device-memory", "80GiB"});
  EXPECT_EQ(ok.exit_code, 0) << ok.stderr_text;
}

TEST(CliChecks, IncidentsOfAMissingStateDirectoryIsAnError) {
  ExpectUsage(RunAnxin({"incidents", "--state-dir", "/nonexistent/anxin-state"}),
              "--state-dir: no such directory '/nonexistent/anxin-state'");
  TempDir dir;
  ExpectUsage(RunAnxin({"incidents"}, {.cwd = dir.path()}),
              "the default state directory: no such directory '.anxin/run'");
  dir.Write("file", "x");
  ExpectUsage(RunAnxin({"incidents", "--state-dir", dir / "file"}), "is a file, not a directory");
  std::filesystem::create_directories(dir / "state");
  auto empty = RunAnxin({"incidents", "--state-dir", dir / "state"});
  EXPECT_EQ(empty.exit_code, 0) << empty.stderr_text;
  EXPECT_THAT(empty.stdout_text, HasSubstr("no incidents in"));
}

TEST(CliChecks, CheckpointCommandsNameWhatIsWrongWithTheDirectory) {
  TempDir dir;
  std::filesystem::create_directories(dir / "iter_0000001");
  ExpectUsage(RunAnxin({"ckpt", "seal", dir / "iter_0000001"}), "nothing to seal in");
  dir.Write("iter_0000001/model.pt", "weights");
  auto sealed = RunAnxin({"ckpt", "seal", dir / "iter_0000001"});
  EXPECT_EQ(sealed.exit_code, 0) << sealed.stderr_text;
  EXPECT_THAT(sealed.stdout_text, HasSubstr("1 file(s)"));
  ExpectUsage(RunAnxin({"ckpt", "list", dir / "iter_0000001/model.pt"}),
              "model.pt is a file, not a checkpoint directory");
  ExpectUsage(RunAnxin({"ckpt", "seal", dir / "iter_0000001/model.pt"}),
              "is a file, not a checkpoint directory");
}

TEST(CliChecks, NotifyRefusesADirectoryAsSinkFileAndAFileAsSpool) {
  TempDir dir;
  ExpectUsage(
      RunAnxin({"notify", "--sink-file", dir.path(), "--spool", dir / "spool", "--port", "0"}),
      "--sink-file: '" + dir.path() + "' is a directory");
  dir.Write("spool-file", "x");
  ExpectUsage(RunAnxin({"notify", "--sink-file", dir / "alerts.jsonl", "--spool",
                        dir / "spool-file", "--port", "0"}),
              "is a file, not a directory: give --spool a directory");
}

TEST(CliChecks, AgentRefusesAMissingDoctorRoot) {
  ExpectUsage(RunAnxin({"agent", "--once", "--doctor-root", "/nonexistent/root"}),
              "--doctor-root: no such directory '/nonexistent/root'");
}

TEST(CliChecks, ThresholdsAndCountsSayWhatIsWrongWithTheValue) {
  ExpectUsage(RunAnxin({"kv", "accuracy", "--min-cosine", "2"}),
              "--min-cosine: must be from -1 to 1, got 2");
  ExpectUsage(RunAnxin({"kv", "plan", "--model", "llama-3-8b", "--device-memory", "0"}),
              "--device-memory: must be at least 1 byte");
  ExpectUsage(RunAnxin({"kv", "plan", "--layers", "0", "--kv-heads", "8", "--head-dim", "128",
                        "--weights", "16GiB", "--device-memory", "80GiB"}),
              "--layers: must be at least 1, got 0");
  ExpectUsage(RunAnxin({"bench", "comm", "--np", "0"}), "--np: must be at least 1, got 0");
}

TEST(CliChecks, ARankCommandThatDoesNotExistIsBadInput) {
  TempDir dir;
  auto out = RunAnxin({"run", "--state-dir", dir / "state", "--", "/nonexistent/cmd"},
                      {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(out.exit_code, 2) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("/nonexistent/cmd"));
}

TEST(CliChecks, ExitCodesPageListsEveryStatusTheProgramUses) {
  const std::string page =
      ::anxin::testing::ReadTextFile(::anxin::testing::SourcePath("docs/exit-codes.md"));
  for (const char* row : {"| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |", "| 5 |", "| 128+N |"}) {
    EXPECT_THAT(page, HasSubstr(row));
  }
  EXPECT_THAT(page, Not(HasSubstr("Every `anxin` command ends with one of four statuses")));
}

TEST(CliChecks, BenchServeSaysFirstWhenEveryRequestFailedTheSameWay) {
  loadgen::testing::ScriptedServer server([](const loadgen::testing::ScriptedRequest&) {
    loadgen::testing::Script s;
    s.steps.push_back({0, loadgen::testing::JsonResponse(404, R"({"detail":"Not Found"})")});
    return s;
  });
  auto out = RunAnxin({"bench", "serve", "--url", server.url() + "/v1", "--model", "m", "-n", "3",
                       "--no-progress"});
  EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
  EXPECT_THAT(out.stdout_text,
              StartsWith("every request (3 of 3) failed with HTTP 404 at /v1: the URL already "
                         "ends in /v1; give --url http://HOST:PORT (the API adds "
                         "/v1/completions)"));
}

TEST(CliChecks, AddressesWithoutASchemeAreHttpEverywhere) {
  loadgen::testing::ScriptedServer server([](const loadgen::testing::ScriptedRequest&) {
    return loadgen::testing::SseScript({"a", "b"}, 1, 1, 3);
  });
  const std::string bare = "127.0.0.1:" + std::to_string(server.port());
  auto bench = RunAnxin({"bench", "serve", "--url", bare, "--model", "m", "-n", "2",
                         "--output-tokens", "2", "--no-progress"});
  EXPECT_EQ(bench.exit_code, 0) << bench.stderr_text;
  auto gate = RunAnxin({"serve", "gate", "--upstream", bare, "--port", "0", "--duration", "0.2"});
  EXPECT_EQ(gate.exit_code, 0) << gate.stderr_text;
  EXPECT_THAT(gate.stderr_text, HasSubstr("-> http://" + bare));
  ExpectUsage(RunAnxin({"serve", "gate", "--upstream", "ftp://127.0.0.1:21"}),
              "--upstream: 'ftp://127.0.0.1:21': scheme 'ftp' is not HTTP");
  ExpectUsage(RunAnxin({"bench", "serve", "--url", "ftp://127.0.0.1:21"}),
              "--url: 'ftp://127.0.0.1:21': scheme 'ftp' is not HTTP");
}

}  // namespace
}  // namespace anxin
