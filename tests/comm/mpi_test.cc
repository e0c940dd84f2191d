// `anxin bench comm` with real Open MPI ranks on this machine: 2 and 4 ranks
// started by `--np` (anxin runs mpirun) and by an outer mpirun (anxin
// replaces itself with the worker). Every operation is verified (-c 1); the
// columns are checked against nccl-tests' formulas; a rank slowed on purpose
// (ANXIN_COMM_TEST_FAULT=delay:1:US sleeps before each send) is named by the
// slow-rank finding and by --matrix; a rank that dies or hangs is one error
// line within a deadline.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "anxin/base/subprocess.h"
#include "anxin/base/testing.h"
#include "anxin/comm/model.h"
#include "anxin/monitor/sdk_wire.h"

namespace anxin::comm {
namespace {

using ::anxin::testing::AnxinBinary;
using ::anxin::testing::RunAnxin;
using ::anxin::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

CommandOutput Bench(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), {"--json", "bench", "comm"});
  // Unless a test slows a rank on purpose, no rank may be named slow (exit 1)
  // because the machine running the tests is busy: only a median lateness of
  // a whole second would count.
  const bool delayed = std::any_of(env.begin(), env.end(), [](const std::string& e) {
    return e.starts_with("ANXIN_COMM_TEST_FAULT=delay");
  });
  if (!delayed) args.insert(args.end(), {"--slow-us", "1000000"});
  return RunAnxin(args, {.env = std::move(env), .timeout = std::chrono::seconds(180)});
}

nlohmann::json Parse(const CommandOutput& out) {
  auto j = nlohmann::json::parse(out.stdout_text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out.stdout_text << out.stderr_text;
  return j;
}

// Every sample: checked with no wrong element; algbw = S / t in 1e9 bytes per
// second; busbw = algbw x nccl-tests' factor; p50 <= p99 <= max.
void ExpectColumns(const nlohmann::json& j, CollOp op, int ranks) {
  ASSERT_TRUE(j.contains("rows")) << j.dump();
  ASSERT_FALSE(j["rows"].empty()) << OpName(op);
  EXPECT_EQ(j["ranks"], ranks);
  EXPECT_EQ(j["wrong_total"], 0);
  int samples = 0;
  for (const auto& row : j["rows"]) {
    const double bytes = row["size"].get<double>();
    for (const char* mode : {"out_of_place", "in_place"}) {
      const auto& s = row[mode];
      if (s.is_null()) continue;
      ++samples;
      EXPECT_EQ(s["wrong"], 0) << OpName(op) << " " << bytes << " " << mode;
      const double t = s["time_us"].get<double>();
      ASSERT_GT(t, 0);
      const double alg = bytes / 1e9 / (t * 1e-6);
      EXPECT_NEAR(s["algbw"].get<double>(), alg, 1e-9 * alg);
      EXPECT_NEAR(s["busbw"].get<double>(), alg * BusBandwidthFactor(op, ranks), 1e-9 * alg);
      EXPECT_LE(s["p50_us"].get<double>(), s["p99_us"].get<double>());
      EXPECT_LE(s["p99_us"].get<double>(), s["max_us"].get<double>());
    }
  }
  EXPECT_GT(samples, 0);
}

class EveryOperation : public ::testing::TestWithParam<int> {};

TEST_P(EveryOperation, IsVerifiedAndMatchesTheFormulas) {
  const int ranks = GetParam();
  for (CollOp op : kAllOps) {
    SCOPED_TRACE(std::string(OpName(op)));
    auto out =
        Bench({"--np", std::to_string(ranks), "--coll", std::string(OpName(op)), "-b", "8", "-e",
               "16K", "-f", "4", "-n", "3", "-w", "1", "-c", "1", "-r", std::to_string(ranks - 1)});
    ASSERT_EQ(out.exit_code, 0) << out.stderr_text << out.stdout_text;
    auto j = Parse(out);
    EXPECT_EQ(j["wrong_total"], 0);
    ExpectColumns(j, op, ranks);
    EXPECT_TRUE(j["checked"].get<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EveryOperation, ::testing::Values(2, 4));

TEST(Verification, TypesAndReductions) {
  for (auto [type, redop] : {std::pair{"int8", "sum"}, std::pair{"uint64", "prod"},
                             std::pair{"double", "max"}, std::pair{"int32", "min"}}) {
    auto out = Bench({"--np", "4", "--coll", "reduce_scatter", "-d", type, "-o", redop, "-b", "64",
                      "-e", "4K", "-f", "8", "-n", "2", "-w", "0"});
    ASSERT_EQ(out.exit_code, 0) << type << " " << redop << ": " << out.stderr_text;
    auto j = Parse(out);
    EXPECT_EQ(j["wrong_total"], 0) << type << " " << redop;
    ExpectColumns(j, CollOp::kReduceScatter, 4);
  }
}

TEST(Verification, ADamagedResultIsCounted) {
  // Rank 1 damages 3 elements of each result it checks: 3 per sample.
  auto out = Bench({"--np", "2", "-b", "64", "-e", "256", "-n", "2", "-w", "0"},
                   {"ANXIN_COMM_TEST_FAULT=corrupt:1:3"});
  EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
  auto j = Parse(out);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["out_of_place"]["wrong"], 3);
    EXPECT_EQ(row["in_place"]["wrong"], 3);
  }
  EXPECT_EQ(j["wrong_total"], 3 * 2 * 3);
  auto text = RunAnxin({"bench", "comm", "--np", "2", "-b", "64", "-e", "64", "-n", "1"},
                       {.env = {"ANXIN_COMM_TEST_FAULT=corrupt:0:1"}});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_THAT(text.stdout_text, HasSubstr("# Out of bounds values : 2 FAILED"));
}

TEST(HandComputed, AllGatherOnFourRanks) {
  // 4 KiB of floats on 4 ranks: each rank's block is 256 elements; the row is
  // 4096 bytes; busbw = algbw x 3/4.
  auto out = Bench({"--np", "4", "--coll", "all_gather", "-b", "4K", "-e", "4K", "-n", "4"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  auto j = Parse(out);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["size"], 4096);
  EXPECT_EQ(j["rows"][0]["count"], 256);
  const auto& s = j["rows"][0]["out_of_place"];
  EXPECT_NEAR(s["busbw"].get<double>(), s["algbw"].get<double>() * 0.75, 1e-12);
  EXPECT_NEAR(s["algbw"].get<double>(), 4096 / (s["time_us"].get<double>() * 1e3), 1e-9);
  double sum = 0;
  int n = 0;
  for (const char* mode : {"out_of_place", "in_place"}) {
    sum += j["rows"][0][mode]["busbw"].get<double>();
    ++n;
  }
  EXPECT_NEAR(j["avg_busbw"].get<double>(), sum / n, 1e-12);
}

TEST(SlowRank, ArrivalSkewNamesTheDelayedRank) {
  for (int ranks : {2, 4}) {
    auto out = Bench(
        {"--np", std::to_string(ranks), "-b", "8", "-e", "1K", "-f", "4", "-n", "10", "-w", "1"},
        {"ANXIN_COMM_TEST_FAULT=delay:1:20000"});
    EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
    auto j = Parse(out);
    ASSERT_TRUE(j.contains("skew")) << j.dump();
    EXPECT_EQ(j["skew"]["slow_rank"], 1) << j["skew"].dump(2);
    EXPECT_THAT(j["skew"]["why"].get<std::string>(), HasSubstr("rank 1"));
    EXPECT_GE(j["skew"]["ranks"][1]["median_late_us"].get<double>(), 10000);
  }
}

TEST(SlowRank, MatrixNamesTheDelayedRank) {
  for (int ranks : {2, 4}) {
    auto out = Bench({"--np", std::to_string(ranks), "--matrix", "--matrix-bytes", "64K",
                      "--matrix-iters", "10"},
                     // 50 ms a send: the slow direction must stay over three
                     // times the fast one however loaded the machine is.
                     {"ANXIN_COMM_TEST_FAULT=delay:1:50000"});
    EXPECT_EQ(out.exit_code, 1) << out.stderr_text;
    auto j = Parse(out);
    ASSERT_TRUE(j.contains("matrix")) << j.dump();
    const auto& m = j["matrix"];
    EXPECT_EQ(m["slow_ranks"], nlohmann::json::array({1})) << m.dump(2);
    EXPECT_EQ(m["rounds"], ranks - 1);
    // Rank 1's sends are the slow links.
    for (int p = 0; p < ranks; ++p) {
      if (p != 1) {
        EXPECT_TRUE(m["bw_outlier"][1 * ranks + p].get<bool>()) << p;
      }
    }
  }
}

TEST(Failures, ADeadRankIsOneErrorLine) {
  const auto start = std::chrono::steady_clock::now();
  auto out =
      Bench({"--np", "2", "-b", "8", "-e", "64", "-n", "5"}, {"ANXIN_COMM_TEST_FAULT=exit:1:3"});
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, StartsWith("error: "));
  EXPECT_THAT(out.stderr_text, HasSubstr("rank"));
  EXPECT_EQ(std::count(out.stderr_text.begin(), out.stderr_text.end(), '\n'), 1) << out.stderr_text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(90));
}

TEST(Failures, AHungRankEndsAtTheWatchdog) {
  const auto start = std::chrono::steady_clock::now();
  auto out = Bench({"--np", "2", "-b", "8", "-e", "64", "-n", "5", "--op-timeout", "3"},
                   {"ANXIN_COMM_TEST_FAULT=hang:1:3"});
  EXPECT_EQ(out.exit_code, 3) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("has not completed after 3 s"));
  EXPECT_EQ(std::count(out.stderr_text.begin(), out.stderr_text.end(), '\n'), 1) << out.stderr_text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(90));
}

TEST(Launch, UnderAnOuterMpirun) {
  std::vector<std::string> argv = {"mpirun", "-np", "2"};
  if (std::thread::hardware_concurrency() < 2) argv.push_back("--oversubscribe");
  for (const char* a : {"bench", "comm", "-b", "8", "-e", "64", "-n", "2", "--coll", "broadcast"}) {
    if (std::string(a) == "bench") argv.push_back(AnxinBinary());
    argv.push_back(a);
  }
  auto out =
      RunCommand(argv, {.timeout = std::chrono::seconds(120),
                        .env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}});
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->exit_code, 0) << out->stderr_text;
  EXPECT_THAT(out->stdout_text, HasSubstr("broadcast on 2 ranks, engine mpi"));
  EXPECT_THAT(out->stdout_text, HasSubstr("# Out of bounds values : 0 OK"));
  EXPECT_THAT(out->stdout_text, HasSubstr("# Avg bus bandwidth"));
}

TEST(Soak, RepeatsForTheDurationWithProgress) {
  auto out = Bench(
      {"--np", "2", "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "--duration", "2s", "--progress"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  EXPECT_THAT(out.stderr_text, HasSubstr("soak: "));
  auto j = Parse(out);
  ASSERT_TRUE(j.contains("soak"));
  EXPECT_GE(j["soak"]["seconds"].get<double>(), 2.0);
  const int passes = j["soak"]["passes"].get<int>();
  EXPECT_GE(passes, 1);
  for (const auto& s : j["soak"]["sizes"]) {
    EXPECT_EQ(s["pass_us"].size(), static_cast<size_t>(passes));
    EXPECT_LE(s["p50_us"].get<double>(), s["max_us"].get<double>());
  }
  ExpectColumns(j, CollOp::kAllReduce, 2);
}

TEST(Sweep, OneRunPerAlgorithmAndTheFastestPerSize) {
  TempDir dir;
  auto out = Bench({"--np", "4", "--sweep-algos", "--algos", "recursive_doubling,ring", "-b", "8",
                    "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--save", dir / "s.json"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  auto j = Parse(out);
  EXPECT_EQ(j["algos"], nlohmann::json::array({"recursive_doubling", "ring"}));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["algo"], "ring");
  // The library was told: Open MPI reports the algorithm it was given.
  EXPECT_EQ(j["runs"][1]["algo_effective"], "ring") << j["runs"][1].dump();
  EXPECT_EQ(j["best"].size(), j["runs"][0]["rows"].size());
  for (const auto& run : j["runs"]) ExpectColumns(run, CollOp::kAllReduce, 4);
  EXPECT_THAT(out.stderr_text, HasSubstr("sweep: ring (2 of 2)"));
  EXPECT_EQ(nlohmann::json::parse(dir.Read("s.json")), j);
}

TEST(Telemetry, EveryTimedCollectiveReachesTheAgentSocket) {
  // A bare datagram socket stands in for the agent; the monitor's decoder
  // reads what the ranks sent.
  TempDir dir;
  const std::string path = dir / "agent.sock";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto out = Bench({"--np", "2", "-b", "8", "-e", "64", "-f", "8", "-n", "4", "-w", "1"},
                   {"ANXIN_AGENT_SOCKET=" + path, "ANXIN_JOB_ID=stress-1"});
  ASSERT_EQ(out.exit_code, 0) << out.stderr_text;
  // 2 sizes x 2 modes x 4 timed iterations per rank.
  EXPECT_THAT(out.stderr_text, HasSubstr("telemetry: rank 0 sent 16 of 16 collective records"));
  std::map<int, int> per_rank;
  std::vector<uint8_t> buf(1 << 16);
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    auto d = monitor::DecodeSdkDatagram(std::span<const uint8_t>(buf.data(), n));
    ASSERT_TRUE(d.has_value()) << d.error().ToString();
    EXPECT_EQ(d->sender.job, "stress-1");
    EXPECT_EQ(d->sender.world_size, 2);
    for (const auto& e : d->events) {
      const auto* c = std::get_if<monitor::SdkCollective>(&e.body);
      if (c == nullptr) continue;
      EXPECT_EQ(c->op, monitor::SdkCollectiveOp::kAllReduce);
      EXPECT_EQ(c->group_size, 2u);
      EXPECT_TRUE(c->bytes == 8 || c->bytes == 64) << c->bytes;
      EXPECT_GT(c->duration_ns, 0u);
      ++per_rank[d->sender.rank];
    }
  }
  ::close(fd);
  EXPECT_EQ(per_rank[0], 16);
  EXPECT_EQ(per_rank[1], 16);
}

}  // namespace
}  // namespace anxin::comm
