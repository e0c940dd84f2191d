#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "anxin/base/http.h"
#include "anxin/base/strings.h"
#include "anxin/base/testing.h"
#include "anxin/device/registry.h"
#include "anxin/monitor/sdk_receiver.h"
#include "anxin/run/checkpoint.h"
#include "anxin/run/detector.h"
#include "anxin/run/journal.h"
#include "anxin/run/launch.h"
#include "anxin/run/playbook.h"
#include "anxin/run/rank_control.h"
#include "anxin/run/sha256.h"
#include "anxin/run/signatures.h"
#include "anxin/run/supervisor.h"

namespace anxin::run {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;

// Polls `done` until it holds (true) or real_timeout passes (false).
template <typename Pred>
bool WaitFor(Pred done, std::chrono::milliseconds real_timeout) {
  const auto deadline = std::chrono::steady_clock::now() + real_timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

device::DeviceInfo Dev(int index, std::string vendor, int numa) {
  device::DeviceInfo d;
  d.index = index;
  d.vendor = std::move(vendor);
  d.numa_node = numa;
  return d;
}

TEST(LaunchTest, PlansEnvironmentAndNumaBinding) {
  LaunchPlanOptions o;
  o.nproc_per_node = 2;
  o.master_port = 1234;
  std::vector<host::NumaNode> nodes = {{.id = 0, .cpus = {0, 1}}, {.id = 1, .cpus = {2, 3}}};
  auto plan = PlanRanks(o, {Dev(0, "huawei", 0), Dev(1, "huawei", 1), Dev(2, "huawei", 1)}, nodes);
  ASSERT_TRUE(plan) << plan.error().ToString();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_THAT((*plan)[1].env, Contains("RANK=1"));
  EXPECT_THAT((*plan)[1].env, Contains("LOCAL_RANK=1"));
  EXPECT_THAT((*plan)[1].env, Contains("WORLD_SIZE=2"));
  EXPECT_THAT((*plan)[1].env, Contains("MASTER_PORT=1234"));
  EXPECT_THAT((*plan)[1].env, Contains("ASCEND_RT_VISIBLE_DEVICES=0,1"));
  EXPECT_EQ((*plan)[1].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ((*plan)[1].numa_node, 1);

  o.excluded_devices = {0};
  plan = PlanRanks(o, {Dev(0, "nvidia", 0), Dev(1, "nvidia", 1), Dev(2, "nvidia", 5)}, nodes);
  ASSERT_TRUE(plan);
  EXPECT_EQ((*plan)[0].device_index, 1);
  EXPECT_THAT((*plan)[0].env, Contains("CUDA_VISIBLE_DEVICES=1,2"));
  EXPECT_TRUE((*plan)[1].cpus.empty());  // node 5 is not on this host
  EXPECT_THAT((*plan)[1].notes[0], HasSubstr("NUMA node 5"));

  o.nproc_per_node = 3;
  auto bad = PlanRanks(o, {Dev(0, "nvidia", 0), Dev(1, "nvidia", 0), Dev(2, "nvidia", 0)}, nodes);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("--nproc-per-node 3"));
}

TEST(LaunchTest, FreePortAndBinding) {
  auto port = PickFreePort();
  ASSERT_TRUE(port);
  EXPECT_GT(*port, 0);
  EXPECT_TRUE(BindCurrentThread({0}, -1));
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(CPU_COUNT(&set), 1);
  EXPECT_TRUE(BindCurrentThread({}, -1));
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(CPU_COUNT(&set), static_cast<int>(std::thread::hardware_concurrency()));
}

TEST(Sha256Test, KnownVectors) {
  Sha256 a;
  EXPECT_EQ(a.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 b;
  b.Update("abc");
  EXPECT_EQ(b.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 c;
  c.Update("abcdbcdecdefdefgefghfghighijhij");
  c.Update("kijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(c.HexDigest(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(SignatureTest, LibraryMatchesVendorLines) {
  auto m = LogMatcher::Compile(BuiltinSignatures());
  ASSERT_TRUE(m);
  const LogSignature* s = m->Match(
      "[Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=9, "
      "OpType=ALLREDUCE) ran for 1800081 milliseconds before timing out.");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->id, "hccl_watchdog_timeout");
  s = m->Match("EI0006: Getting socket times out. Reason: 1. The remote does not initiate");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->fault_class, "network");
  s = m->Match("node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->severity, device::Severity::kMinor);
  // A warning and an error on one line: the error wins.
  s = m->Match("NCCL WARN ... ncclRemoteError: remote process exited");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->fault_class, "peer_failure");
  EXPECT_EQ(m->Match("step 120 loss 2.31 lr 3e-4"), nullptr);
  s = m->Match("EI0004: The ranktable is invalid");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->retryable);
}

TEST(SignatureTest, ConfigSignaturesAndErrors) {
  TempDir dir;
  const std::string path = dir.Write("s.yaml",
                                     "- {id: nan, regex: 'loss (nan|inf)', class: divergence, "
                                     "retryable: false}\n"
                                     "- {id: x, match: 'boom', class: crash, severity: huge}\n");
  auto root = ConfigNode::LoadFile(path);
  ASSERT_TRUE(root);
  auto sigs = ParseSignatures(*root);
  ASSERT_FALSE(sigs);
  EXPECT_THAT(sigs.error().message(), HasSubstr("s.yaml:2:"));
  EXPECT_THAT(sigs.error().message(), HasSubstr("unknown severity 'huge'"));

  dir.Write("s.yaml", "- {id: nan, regex: 'loss (nan|inf)', class: divergence}\n");
  root = ConfigNode::LoadFile(path);
  ASSERT_TRUE(root);
  sigs = ParseSignatures(*root);
  ASSERT_TRUE(sigs) << sigs.error().ToString();
  auto m = LogMatcher::Compile(*sigs);
  ASSERT_TRUE(m);
  EXPECT_NE(m->Match("step 3 loss nan"), nullptr);
  EXPECT_EQ(m->Match("step 3 loss 1.5"), nullptr);

  dir.Write("s.yaml", "- {id: bad, regex: 'loss (', class: x}\n");
  root = ConfigNode::LoadFile(path);
  ASSERT_TRUE(root);
  sigs = ParseSignatures(*root);
  ASSERT_FALSE(sigs);
  EXPECT_THAT(sigs.error().message(), HasSubstr("s.yaml:1:"));
}

// The cost of the library per line; the figure goes to docs/recovery.md
// (measured on the release build, printed here for this build).
TEST(SignatureTest, CostPerLine) {
  auto m = LogMatcher::Compile(BuiltinSignatures());
  ASSERT_TRUE(m);
  const std::string line =
      "iteration      120/  100000 | consumed samples: 15360 | elapsed time per iteration (ms): "
      "812.4 | learning rate: 2.999E-04 | lm loss: 2.312E+00 | grad norm: 1.021";
  const int n = 20000;
  int hits = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) hits += m->Match(line) != nullptr;
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  EXPECT_EQ(hits, 0);
  std::printf("log signature library: %.0f ns per %zu-byte line (%zu signatures)\n", ns,
              line.size(), m->signatures().size());
  EXPECT_LT(ns, 200000);  // generous: sanitizers, a loaded machine
}

TEST(CheckpointTest, MegatronPointerAndPartialDirectories) {
  TempDir dir;
  dir.Write("iter_0000100/mp_rank_00/model_optim_rng.pt", "a");
  dir.Write("iter_0000200/mp_rank_00/model_optim_rng.pt", "b");
  dir.Write("iter_0000300/mp_rank_00/model_optim_rng.pt", "c");
  dir.Write("latest_checkpointed_iteration.txt", "200\n");
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan) << scan.error().ToString();
  ASSERT_EQ(scan->checkpoints.size(), 3u);
  EXPECT_EQ(scan->checkpoints[0].name, "iter_0000300");
  EXPECT_FALSE(scan->checkpoints[0].valid);
  EXPECT_THAT(scan->checkpoints[0].reason, HasSubstr("newer than the step the pointer"));
  ASSERT_NE(scan->Chosen(), nullptr);
  EXPECT_EQ(scan->Chosen()->step, 200);
  EXPECT_EQ(scan->Chosen()->format, "megatron");

  // An empty file makes the pointed-to one partial: fall back to 100.
  dir.Write("iter_0000200/mp_rank_00/model_optim_rng.pt", "");
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->Chosen()->step, 100);
  EXPECT_THAT(scan->checkpoints[1].reason, HasSubstr("is empty"));
}

TEST(CheckpointTest, DeepSpeedAndTorchDcp) {
  TempDir ds;
  ds.Write("global_step10/mp_rank_00_model_states.pt", "x");
  ds.Write("global_step20/mp_rank_00_model_states.pt", "y");
  ds.Write("latest", "global_step10");
  auto scan = ScanCheckpoints(ds.path());
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->Chosen()->name, "global_step10");
  EXPECT_EQ(scan->Chosen()->format, "deepspeed");

  TempDir dcp;
  dcp.Write("step_5/__0_0.distcp", "x");
  dcp.Write("step_5/.metadata", "m");
  dcp.Write("step_9/__0_0.distcp", "x");  // no .metadata: partial
  scan = ScanCheckpoints(dcp.path());
  ASSERT_TRUE(scan);
  ASSERT_EQ(scan->checkpoints.size(), 2u);
  EXPECT_EQ(scan->checkpoints[0].name, "step_9");
  EXPECT_THAT(scan->checkpoints[0].reason, HasSubstr("no .metadata"));
  EXPECT_EQ(scan->Chosen()->name, "step_5");
  EXPECT_EQ(scan->Chosen()->format, "torch-dcp");

  EXPECT_THAT(ScanCheckpoints(dcp / "nope"), HasCode(ErrorCode::kNotFound));
}

TEST(CheckpointTest, ManifestSealAndCorruption) {
  TempDir dir;
  dir.Write("iter_0000001/a.bin", "aaaa");
  dir.Write("iter_0000002/a.bin", "bbbb");
  dir.Write("iter_0000002/sub/b.bin", "cc");
  dir.Write("latest_checkpointed_iteration.txt", "2");
  ASSERT_EQ(SealCheckpoint(dir / "iter_0000001").value_or(-1), 1);
  ASSERT_EQ(SealCheckpoint(dir / "iter_0000002").value_or(-1), 2);
  EXPECT_TRUE(VerifyManifest(dir / "iter_0000002"));
  // Same size, different bytes: only the checksum tells.
  dir.Write("iter_0000002/sub/b.bin", "cd");
  auto v = VerifyManifest(dir / "iter_0000002");
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code(), ErrorCode::kDataLoss);
  EXPECT_THAT(v.error().message(), HasSubstr("sub/b.bin does not match its SHA-256"));
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->Chosen()->name, "iter_0000001");
  EXPECT_TRUE(scan->checkpoints[0].sealed);
  // A truncated file.
  dir.Write("iter_0000001/a.bin", "a");
  v = VerifyManifest(dir / "iter_0000001");
  ASSERT_FALSE(v);
  EXPECT_THAT(v.error().message(), HasSubstr("has 1 bytes, manifest says 4"));
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->Chosen(), nullptr);
}

TEST(JournalTest, RoundTrip) {
  TempDir dir;
  Incident in;
  in.id = NewIncidentId();
  in.job = "python3 train.py";
  in.fault.detector = "log";
  in.fault.fault_class = "network";
  in.fault.rank = 1;
  in.fault.summary = "rank 1: EI0006";
  in.fault.evidence = {"EI0006: Getting socket times out"};
  in.fault.wall = std::chrono::system_clock::now();
  StepRecord s;
  s.name = "stop_ranks";
  s.start = in.fault.wall;
  s.end = s.start + std::chrono::milliseconds(250);
  s.result = "ok";
  in.steps.push_back(s);
  in.outcome = "recovered";
  in.recovery_path = "in-process";
  in.time_to_recovery_seconds = 3.5;
  ASSERT_TRUE(WriteIncident(dir.path(), in));
  auto all = ReadIncidents(dir.path());
  ASSERT_TRUE(all) << all.error().ToString();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].recovery_path, "in-process");
  EXPECT_EQ((*all)[0].fault.evidence, in.fault.evidence);
  EXPECT_NEAR((*all)[0].steps[0].seconds(), 0.25, 0.002);
  EXPECT_EQ((*all)[0].outcome, "recovered");
  dir.Write("incidents/bad.json", "{");
  EXPECT_THAT(ReadIncidents(dir.path()), HasCode(ErrorCode::kDataLoss));
}

TEST(JournalTest, TableHasAColumnPerPhaseAndTheClusterViewUnderItsRow) {
  EXPECT_EQ(FormatIncidentTable({}), "");
  Incident in;
  in.id = "20261202T130501-1-1";
  in.fault.fault_class = "rank_exit";
  in.fault.rank = 3;
  in.outcome = "recovered";
  const auto t0 = std::chrono::system_clock::time_point{} + std::chrono::hours(1);
  auto step = [&](const char* name, int ms, const char* result) {
    StepRecord s;
    s.name = name;
    s.start = t0;
    s.end = t0 + std::chrono::milliseconds(ms);
    s.result = result;
    in.steps.push_back(s);
  };
  step("stop_ranks", 1250, "ok");
  step("reset_device", 4000, "skipped");  // skipped: a dash, not 4.00
  step("relaunch", 500, "ok");
  step("notify", 100, "ok");  // a site step: "other"
  step("exec", 200, "ok");
  in.time_to_recovery_seconds = 9.5;
  in.resumed_step = 40;
  ClusterView c;
  c.fault_node = "node-b";
  c.fault_class = "rank_exit";
  c.generation = 2;
  c.agreed_step = 40;
  c.nnodes = 2;
  c.nodes = {{"node-a", 0, 1.5, 0.25, 40}, {"node-b", 1, 2.0, 0.0, -1}};
  in.cluster = c;
  Incident bare;
  bare.id = "20261202T130502-1-2";
  bare.fault.fault_class = "hang";
  bare.outcome = "gave_up";
  const std::string table = FormatIncidentTable({in, bare});
  const std::vector<std::string_view> lines = SplitLines(table);
  ASSERT_EQ(lines.size(), 6u) << table;
  EXPECT_EQ(SplitWords(lines[0]),
            (std::vector<std::string_view>{"INCIDENT", "FAULT", "RANK", "OUTCOME", "stop", "clear",
                                           "reset", "links", "ckpt", "launch", "verify", "other",
                                           "RECOVERY", "RESUMED"}));
  EXPECT_EQ(SplitWords(lines[1]),
            (std::vector<std::string_view>{"20261202T130501-1-1", "rank_exit", "3", "recovered",
                                           "1.25", "-", "-", "-", "-", "0.50", "-", "0.30", "9.50s",
                                           "step", "40"}));
  EXPECT_EQ(lines[2],
            "  cluster: generation 2 opened by node-b (rank_exit), 2 node(s), agreed step 40");
  EXPECT_THAT(std::string(lines[3]), HasSubstr("node-a           rank 0   ready    1.50s"));
  EXPECT_THAT(std::string(lines[3]), HasSubstr("newest intact step 40"));
  EXPECT_THAT(std::string(lines[4]), ::testing::EndsWith("newest intact -"));
  EXPECT_EQ(SplitWords(lines[5]),
            (std::vector<std::string_view>{"20261202T130502-1-2", "hang", "-", "gave_up", "-", "-",
                                           "-", "-", "-", "-", "-", "-", "-", "-"}));
  // The header and the rows share their column edges.
  EXPECT_EQ(lines[0].find("RECOVERY") + 8, lines[1].find("9.50s") + 5);
}

// A rank's end of the control socket, as anxin_sdk.run() speaks it.
struct ControlClient {
  int fd = -1;
  explicit ControlClient(const std::string& address) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = address.substr(1);  // '@': abstract
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr),
                      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
              0);
  }
  ~ControlClient() { close(fd); }
  void Say(const std::string& line) {
    ASSERT_EQ(send(fd, line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  }
  // One line, "" at EOF.
  std::string Hear() {
    std::string line;
    char c;
    while (recv(fd, &c, 1, 0) == 1) {
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }
};

TEST(RankControlTest, AbortAndRejoinTravelAsLinesAndAnswersAreCounted) {
  auto control = RankControl::Start();
  ASSERT_TRUE(control) << control.error().ToString();
  RankControl& rc = **control;
  EXPECT_EQ(rc.address().front(), '@');
  EXPECT_THAT(rc.Send("rank-0-0", {{"abort", {{"generation", 1}}}}),
              HasCode(ErrorCode::kUnavailable));
  ControlClient r0(rc.address()), r1(rc.address()), spare(rc.address());
  std::atomic<int> spares_ready{0};
  rc.OnSpareReady([&] { ++spares_ready; });
  r0.Say("not json\n{\"aborted\": {\"generation\": 1}}\n");  // before hello: ignored
  r0.Say("{\"hello\": {\"token\": \"rank-0-0\", \"pid\": 1}}\n");
  r1.Say("{\"hello\": {\"token\": \"rank-1-0\", \"pid\": 2}}\n");
  spare.Say("{\"hello\": {\"token\": \"spare-0\"}}\n{\"spare_ready\": {}}\n");
  ASSERT_TRUE(WaitFor([&] { return rc.Connected("rank-0-0") && rc.Connected("rank-1-0"); },
                      std::chrono::seconds(10)));
  ASSERT_TRUE(WaitFor([&] { return rc.SpareReady("spare-0"); }, std::chrono::seconds(10)));
  EXPECT_EQ(spares_ready.load(), 1);
  EXPECT_FALSE(rc.SpareReady("rank-0-0"));

  ASSERT_TRUE(rc.Send("rank-0-0", {{"abort", {{"generation", 1}}}}));
  ASSERT_TRUE(rc.Send("rank-1-0", {{"abort", {{"generation", 1}}}}));
  EXPECT_EQ(nlohmann::json::parse(r0.Hear())["abort"]["generation"], 1);
  EXPECT_EQ(nlohmann::json::parse(r1.Hear())["abort"]["generation"], 1);
  r0.Say("{\"aborted\": {\"generation\": 1}}\n");
  r1.Say("{\"aborted\": {\"generation\": 0}}\n");  // an old generation's answer counts not
  // rank 1 never answers for generation 1: the deadline ends the wait.
  auto t0 = std::chrono::steady_clock::now();
  auto answered = rc.WaitAborted({"rank-0-0", "rank-1-0"}, 1, t0 + std::chrono::milliseconds(300),
                                 [](const std::string&) { return false; });
  EXPECT_EQ(answered, std::set<std::string>{"rank-0-0"});
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  // A rank whose process is gone does not hold the wait up.
  t0 = std::chrono::steady_clock::now();
  answered = rc.WaitAborted({"rank-0-0", "rank-1-0"}, 1, t0 + std::chrono::seconds(30),
                            [](const std::string& t) { return t == "rank-1-0"; });
  EXPECT_EQ(answered, std::set<std::string>{"rank-0-0"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));

  // The spare is given its rank; a rejoin makes it a spare no more.
  ASSERT_TRUE(rc.Send("spare-0", {{"rejoin", {{"generation", 1}, {"env", {{"RANK", "1"}}}}}}));
  EXPECT_EQ(nlohmann::json::parse(spare.Hear())["rejoin"]["env"]["RANK"], "1");
  EXPECT_FALSE(rc.SpareReady("spare-0"));
  // Forget closes the connection: the rank sees EOF (the SDK then exits).
  rc.Forget("rank-1-0");
  EXPECT_EQ(r1.Hear(), "");
  EXPECT_FALSE(rc.Connected("rank-1-0"));
  EXPECT_THAT(rc.Send("rank-1-0", {{"abort", {{"generation", 2}}}}),
              HasCode(ErrorCode::kUnavailable));
}

TEST(RankControlTest, AConnectionThatClosesIsNoLongerConnected) {
  auto control = RankControl::Start();
  ASSERT_TRUE(control);
  {
    ControlClient c((*control)->address());
    c.Say("{\"hello\": {\"token\": \"rank-0-3\"}}\n");
    ASSERT_TRUE(
        WaitFor([&] { return (*control)->Connected("rank-0-3"); }, std::chrono::seconds(10)));
  }
  EXPECT_TRUE(
      WaitFor([&] { return !(*control)->Connected("rank-0-3"); }, std::chrono::seconds(10)));
}

TEST(TemplateTest, Expands) {
  EXPECT_EQ(ExpandTemplate("--load={checkpoint} --step {step} a{attempt}{attempt}", "/c", 20, 2),
            "--load=/c --step 20 a22");
}

// ---- The supervisor with small shell jobs and the sim backend.

// Where a job's time comes from: the wall clock; a virtual clock for the
// supervisor (deadlines, retry delays and detector timeouts pass when the
// test advances it, or at once when a step sleeps); or the same virtual clock
// for the sim backend too, so that the devices' timed events (a link down for
// 2.5 s) pass at the speed of the steps that wait for them.
enum class JobTime { kReal, kVirtual, kVirtualWithSim };

struct Job {
  TempDir dir{"anxin-run-test"};
  SupervisorOptions o;
  VirtualClock clock{RealClock().Now()};  // journal times stay plausible
  std::unique_ptr<device::DeviceBackend> backend;
  std::vector<device::DeviceInfo> devices;

  explicit Job(std::string script, std::string scenario_yaml = "", JobTime time = JobTime::kReal) {
    std::string scenario;
    if (!scenario_yaml.empty()) scenario = dir.Write("scenario.yaml", scenario_yaml);
    if (time != JobTime::kReal) {
      clock.set_auto_advance(true);
      o.clock = &clock;
    }
    Clock* sim_clock = time == JobTime::kVirtualWithSim ? &clock : nullptr;
    backend =
        std::move(device::CreateBackend("sim", {.scenario = scenario, .clock = sim_clock}).value());
    devices = backend->Enumerate().value();
    o.command = {"/bin/sh", "-c", std::move(script), "sh", "{checkpoint}", "{step}"};
    o.launch.nproc_per_node = 2;
    o.launch.numa_bind = false;
    o.state_dir = dir.Mkdir("state");
    o.log_dir = dir.Mkdir("logs");
    o.stop_grace_seconds = 0.5;
    o.reset_retry_delay_seconds = 0.05;
    o.link_timeout_seconds = 10;
    o.verify_timeout_seconds = 10;
    o.prefix_output = false;
  }
  Result<int> Run() {
    Supervisor s(o, backend.get(), devices, {});
    return s.Run();
  }
  std::vector<Incident> Incidents() { return ReadIncidents(o.state_dir).value(); }
};

const StepRecord* FindStep(const Incident& in, std::string_view name) {
  for (const StepRecord& s : in.steps) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

constexpr char kFastResets[] =
    "name: t\ndevices:\n  count: 3\n  model: Ascend910C\n  ports: 1\n"
    "  reset: {duration: 0.05s, fail_first: 0}\n";

TEST(SupervisorTest, CrashIsRelaunchedFromTheNewestValidCheckpoint) {
  // Attempt 0: rank 0 dies after "saving" step 20. Attempt 1: both finish.
  Job job(
      "echo \"attempt=$ANXIN_RUN_ATTEMPT ckpt=$1 step=$2 rank=$RANK\"; "
      "if [ \"$ANXIN_RUN_ATTEMPT\" = 0 ]; then echo step 20; "
      "  if [ \"$RANK\" = 0 ]; then mkdir -p $CK/iter_0000020 && echo w > $CK/iter_0000020/m.pt "
      "  && echo 20 > $CK/latest_checkpointed_iteration.txt; sleep 0.3; exit 7; fi; sleep 30; fi; "
      "echo step 21; exit 0",
      kFastResets);
  job.o.checkpoint_dir = job.dir.Mkdir("ckpt");
  job.o.env = {"CK=" + job.o.checkpoint_dir};
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto incidents = job.Incidents();
  ASSERT_EQ(incidents.size(), 1u);
  const Incident& in = incidents[0];
  EXPECT_EQ(in.fault.fault_class, "process_exit");
  EXPECT_EQ(in.fault.rank, 0);
  EXPECT_EQ(in.outcome, "recovered");
  EXPECT_EQ(in.resumed_step, 21);
  EXPECT_THAT(in.checkpoint, HasSubstr("iter_0000020"));
  EXPECT_EQ(FindStep(in, "reset_device")->result, "skipped");
  const std::string log = job.dir.Read("logs/rank-1.log");
  EXPECT_THAT(log, HasSubstr("attempt=1 ckpt=" + job.o.checkpoint_dir + "/iter_0000020 step=20"));
}

TEST(SupervisorTest, HangIsDetectedOnceTheTimeoutHasPassed) {
  Job job("if [ \"$ANXIN_RUN_ATTEMPT\" = 0 ]; then echo step 1; sleep 60; fi; echo step 2",
          kFastResets, JobTime::kVirtual);
  job.o.hang_timeout_seconds = 60;
  const Clock::TimePoint start = job.clock.Now();
  std::jthread advance([&] {
    // Once both ranks of attempt 0 have printed their step (a line is logged
    // after the detectors have its time), a minute passes without another.
    auto printed = [&](const char* log) {
      return job.dir.Read(log).find("step 1") != std::string::npos;
    };
    if (!WaitFor([&] { return printed("logs/rank-0.log") && printed("logs/rank-1.log"); },
                 std::chrono::seconds(30)))
      return;
    job.clock.Advance(std::chrono::seconds(61));
  });
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto incidents = job.Incidents();
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].fault.fault_class, "hang");
  // The job printed its last step right after it started: the hang is seen
  // at the first look after the minute (the journal keeps milliseconds).
  EXPECT_NEAR(ToSeconds(incidents[0].fault.wall - start), 61, 0.002);
  // A hang resets the job's devices.
  EXPECT_EQ(FindStep(incidents[0], "reset_device")->result, "ok");
  EXPECT_EQ(incidents[0].resumed_step, 2);
}

TEST(SupervisorTest, ErrorLineIsDetectedAndResetRetried) {
  Job job(
      "if [ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && [ \"$RANK\" = 1 ]; then "
      "echo 'EI0006: Getting socket times out.'; sleep 60; fi; "
      "[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && sleep 60; echo step 5",
      "name: t\ndevices:\n  count: 2\n  model: Ascend910C\n  ports: 1\n"
      "  reset: {duration: 0.05s, fail_first: 2}\n",
      JobTime::kVirtual);
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto incidents = job.Incidents();
  ASSERT_EQ(incidents.size(), 1u);
  const Incident& in = incidents[0];
  EXPECT_EQ(in.fault.fault_class, "network");
  EXPECT_EQ(in.fault.rank, 1);
  EXPECT_THAT(in.fault.evidence, Contains("EI0006: Getting socket times out."));
  const StepRecord* reset = FindStep(in, "reset_device");
  EXPECT_EQ(reset->result, "ok");
  EXPECT_EQ(reset->tries, 6);  // two devices, each fails twice then succeeds
  EXPECT_EQ(in.outcome, "recovered");
}

TEST(SupervisorTest, ResetThatAlwaysFailsIsolatesTheDeviceOrGivesUp) {
  constexpr char kBadReset[] =
      "name: t\ndevices:\n  count: 2\n  model: Ascend910C\n  ports: 1\n"
      "  reset: {duration: 0.01s, fail_first: 0}\n  overrides:\n"
      "    - index: 0\n      reset: {fail_first: 1000}\n";
  Job spare(
      "echo \"devices=$ASCEND_RT_VISIBLE_DEVICES\"; "
      "[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && echo 'HCCL_E_TIMEOUT' && sleep 60; echo step 1",
      kBadReset);
  spare.o.launch.nproc_per_node = 1;
  auto rc = spare.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = spare.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(FindStep(in[0], "reset_device")->result, "degraded");
  EXPECT_THAT(FindStep(in[0], "reset_device")->detail,
              HasSubstr("device 0 did not reset after 3 tries"));
  EXPECT_THAT(FindStep(in[0], "escalate")->detail, HasSubstr("isolated, a spare device"));
  EXPECT_THAT(spare.dir.Read("logs/rank-0.log"), HasSubstr("devices=1"));

  Job none("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && echo 'HCCL_E_TIMEOUT' && sleep 60; echo step 1",
           kBadReset);
  rc = none.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, kExitEscalated);  // a reset that always fails escalates
  in = none.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "escalated");
  EXPECT_THAT(FindStep(in[0], "escalate")->detail, HasSubstr("cannot isolate it"));
}

TEST(SupervisorTest, LinkDownHoldsTheRelaunchUntilItIsUp) {
  Job job("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && exit 1; echo step 1",
          std::string(kFastResets) +
              "events:\n  - {at: 0s, device: 1, kind: link_down, port: 0, duration: 2.5s}\n",
          JobTime::kVirtualWithSim);
  job.o.detectors = {"exit", "log_patterns", "hang"};
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  const StepRecord* links = FindStep(in[0], "wait_links_up");
  EXPECT_EQ(links->result, "ok");
  // Polled every 200 ms of the clock until the link came back at 2.5 s.
  EXPECT_GE(links->seconds(), 2.5 - 0.2 - 0.05);
  EXPECT_LE(links->seconds(), 2.5 + 0.2);
}

TEST(SupervisorTest, DeviceFaultStartsRecovery) {
  Job job("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && sleep 60; echo step 1",
          std::string(kFastResets) + "events:\n  - {at: 0.5s, device: 1, kind: device_lost}\n",
          JobTime::kVirtualWithSim);
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].fault.fault_class, "device_lost");
  EXPECT_EQ(in[0].fault.device, 1);
  EXPECT_EQ(FindStep(in[0], "reset_device")->detail, "device 1 reset");
}

TEST(SupervisorTest, RestartStormAndBudget) {
  Job storm("exit 3", kFastResets);
  storm.o.max_restarts = 10;
  storm.o.storm_limit = 2;
  auto rc = storm.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, kExitRestartStorm);
  auto in = storm.Incidents();
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in.back().outcome, "gave_up");

  // Progress each time, so no storm: the budget ends it.
  Job budget("echo step 1; exit 3", kFastResets);
  budget.o.max_restarts = 1;
  rc = budget.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 1);
  EXPECT_EQ(budget.Incidents().size(), 2u);
}

TEST(SupervisorTest, FaultARestartCannotCureStopsTheJob) {
  Job job("echo 'EI0004: The ranktable is invalid'; sleep 60", kFastResets);
  auto rc = job.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 1);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "fatal");
}

TEST(SupervisorTest, BadDetectorConfigurationNamesThePlace) {
  TempDir dir;
  auto root = ConfigNode::Parse("detectors:\n  hang:\n    timeot: 5s\n", "g.yaml");
  ASSERT_TRUE(root);
  Job job("exit 0", kFastResets);
  job.o.run_section = *root;
  auto rc = job.Run();
  ASSERT_FALSE(rc);
  EXPECT_THAT(rc.error().Describe(), HasSubstr("g.yaml:3:5"));
  EXPECT_THAT(rc.error().Describe(), HasSubstr("unknown key 'timeot'"));
}

// ---- Detectors on a virtual clock.

struct DetectorRig {
  VirtualClock clock{RealClock().Now()};
  ProgressTracker progress;
  std::vector<Fault> faults;
  DetectorContext ctx;
  DetectorRig() {
    ctx.clock = &clock;
    ctx.progress = &progress;
    ctx.report = [this](Fault f) { faults.push_back(std::move(f)); };
  }
  std::unique_ptr<Detector> Make(std::string_view name, std::string_view yaml) {
    auto root = ConfigNode::Parse(yaml, "g.yaml");
    EXPECT_TRUE(root) << root.error().ToString();
    auto d = CreateDetector(name, *root, ctx);
    EXPECT_TRUE(d) << d.error().ToString();
    progress.Restart(clock.Now());
    EXPECT_TRUE(d.value()->Start(AttemptInfo{}));
    return std::move(*d);
  }
};

TEST(DetectorTest, HangCountsFromTheLastProgressOnTheClock) {
  using std::chrono::seconds;
  DetectorRig rig;
  auto hang = rig.Make("hang", "timeout: 30s\nwatch_checkpoints: false\n");
  rig.clock.Advance(seconds(600));  // start-up is not a hang
  hang->Tick(rig.clock.Now());
  EXPECT_TRUE(rig.faults.empty());
  hang->OnLine(0, "step 7", rig.clock.Now());
  rig.clock.Advance(seconds(29));
  hang->Tick(rig.clock.Now());
  EXPECT_TRUE(rig.faults.empty());
  rig.clock.Advance(seconds(1));
  hang->Tick(rig.clock.Now());
  ASSERT_EQ(rig.faults.size(), 1u);
  EXPECT_EQ(rig.faults[0].fault_class, "hang");
  EXPECT_EQ(rig.faults[0].seen, rig.clock.Now());
  EXPECT_THAT(rig.faults[0].summary,
              HasSubstr("no progress for 30.0 s (timeout 30.0 s, last step 7)"));
  hang->Tick(rig.clock.Now() + seconds(60));
  EXPECT_EQ(rig.faults.size(), 1u);  // once per attempt
}

TEST(DetectorTest, HangLearnsTheTimeoutFromTheStepTime) {
  using std::chrono::seconds;
  DetectorRig rig;
  auto hang = rig.Make("hang",
                       "timeout: 1h\nlearn_factor: 3\nwarmup_steps: 3\nmin_timeout: 5s\n"
                       "watch_checkpoints: false\n");
  for (int step = 1; step <= 3; ++step) {  // a step every 4 s: the timeout becomes 12 s
    hang->OnLine(0, "step " + std::to_string(step), rig.clock.Now());
    if (step < 3) rig.clock.Advance(seconds(4));
  }
  rig.clock.Advance(seconds(11));
  hang->Tick(rig.clock.Now());
  EXPECT_TRUE(rig.faults.empty());
  rig.clock.Advance(seconds(1));
  hang->Tick(rig.clock.Now());
  ASSERT_EQ(rig.faults.size(), 1u);
  EXPECT_THAT(rig.faults[0].summary, HasSubstr("timeout 12.0 s"));
}

// A backend whose fault events the test sends.
class EventBackend final : public device::DeviceBackend {
 public:
  std::string_view name() const override { return "events"; }
  Result<std::vector<device::DeviceInfo>> Enumerate() override {
    return std::vector<device::DeviceInfo>{};
  }
  Result<device::DeviceSample> Sample(int) override { return device::DeviceSample{}; }
  Result<device::FaultSubscription> SubscribeFaults(device::FaultCallback callback) override {
    callback_ = std::move(callback);
    return device::FaultSubscription();
  }
  device::FaultCallback callback_;
};

TEST(DetectorTest, DeviceFaultTakesTheDetectionTimeFromTheEventsClock) {
  DetectorRig rig;
  EventBackend backend;
  rig.ctx.backend = &backend;
  auto d = rig.Make("device_faults", "{}");
  AttemptInfo attempt;
  attempt.devices = {0, 1};
  ASSERT_TRUE(d->Start(attempt));
  ASSERT_TRUE(backend.callback_);
  const Clock::TimePoint event_time = rig.clock.Now();
  rig.clock.Advance(std::chrono::milliseconds(1500));
  backend.callback_(
      device::MakeFaultEvent(1, event_time, device::FaultKind::kDeviceLost, "fell off the bus"));
  ASSERT_EQ(rig.faults.size(), 1u);
  EXPECT_EQ(rig.faults[0].fault_class, "device_lost");
  EXPECT_EQ(rig.faults[0].device, 1);
  EXPECT_DOUBLE_EQ(rig.faults[0].detection_seconds, 1.5);
}

// ---- Playbooks.

PlaybookSet Books(std::string_view yaml, PlaybookDefaults d = {}) {
  auto root = ConfigNode::Parse(yaml, "p.yaml");
  EXPECT_TRUE(root) << root.error().ToString();
  PlaybookSet set = DefaultPlaybooks(d);
  Status s = MergePlaybooks(*root, d, {}, set);
  EXPECT_TRUE(s) << s.error().ToString();
  return set;
}

TEST(PlaybookTest, DefaultIsTheFixedSequence) {
  PlaybookDefaults d;
  d.stop_grace_seconds = 2;
  d.reset_tries = 4;
  PlaybookSet set = DefaultPlaybooks(d);
  const Playbook& p = set.For("hang");
  std::vector<std::string> names;
  for (const PlaybookStep& s : p.steps) names.emplace_back(StepKindName(s.kind));
  EXPECT_EQ(names, (std::vector<std::string>{"stop_ranks", "clear_device_memory", "reset_device",
                                             "wait_links_up", "select_checkpoint", "relaunch",
                                             "verify_progress"}));
  EXPECT_EQ(p.steps[0].timeout_seconds, 2);
  EXPECT_EQ(p.steps[2].retries, 3);  // 4 tries
  EXPECT_EQ(p.steps[2].only_for, ResetFaultClasses());
  EXPECT_EQ(&set.For("process_exit"), &p);
  EXPECT_EQ(set.Escalation(), nullptr);
}

TEST(PlaybookTest, FileDefinesPlaybooksAndMapsFaultClasses) {
  PlaybookSet set = Books(R"(playbooks:
  hccl:
    - {step: stop_ranks, grace: 3s}
    - {step: reset_device, retries: 5, retry_delay: 250ms, timeout: 2m}
    - {step: exec, argv: [/bin/echo, "{device}"], timeout: 10s, on_failure: continue}
    - {step: notify, url: "http://127.0.0.1:9/webhook"}
    - {step: select_checkpoint}
    - {step: relaunch}
    - {step: verify_progress, timeout: 1m}
  page:
    - {step: stop_ranks}
    - {step: notify, url: "http://127.0.0.1:9/webhook", timeout: 1s, retries: 2}
faults:
  network: hccl
  collective_timeout: hccl
  escalation: page
)");
  const Playbook& p = set.For("network");
  EXPECT_EQ(p.name, "hccl");
  ASSERT_EQ(p.steps.size(), 7u);
  EXPECT_EQ(p.steps[0].timeout_seconds, 3);
  EXPECT_EQ(p.steps[1].retries, 5);
  EXPECT_EQ(p.steps[1].retry_delay_seconds, 0.25);
  EXPECT_EQ(p.steps[1].timeout_seconds, 120);
  EXPECT_EQ(p.steps[2].argv, (std::vector<std::string>{"/bin/echo", "{device}"}));
  EXPECT_FALSE(p.steps[2].abort_on_failure);
  EXPECT_FALSE(p.steps[3].abort_on_failure);  // notify never blocks
  EXPECT_EQ(p.steps[3].timeout_seconds, 5);
  EXPECT_EQ(p.steps[6].timeout_seconds, 60);
  EXPECT_TRUE(p.Relaunches());
  EXPECT_EQ(set.For("hang").name, "default");
  ASSERT_NE(set.Escalation(), nullptr);
  EXPECT_FALSE(set.Escalation()->Relaunches());
  EXPECT_EQ(set.Escalation()->steps[1].retries, 2);
}

TEST(PlaybookTest, TheShippedExampleFileIsValid) {
  auto root = ConfigNode::LoadFile(::anxin::testing::SourcePath("examples/run/playbooks.yaml"));
  ASSERT_TRUE(root) << root.error().ToString();
  PlaybookSet set = DefaultPlaybooks({});
  Status s = MergePlaybooks(*root, {}, {}, set);
  ASSERT_TRUE(s) << s.error().ToString();
  EXPECT_EQ(set.For("link_down").name, "link");
  EXPECT_EQ(set.For("network").name, "collective");
  EXPECT_EQ(set.For("process_exit").name, "default");
  ASSERT_NE(set.Escalation(), nullptr);
  EXPECT_EQ(set.Escalation()->name, "page");
}

struct BadPlaybook {
  const char* name;
  const char* yaml;
  const char* error;  // file:line:col and the words
};

class PlaybookErrorTest : public ::testing::TestWithParam<BadPlaybook> {};

TEST_P(PlaybookErrorTest, NamesThePlace) {
  const BadPlaybook& b = GetParam();
  auto root = ConfigNode::Parse(b.yaml, "p.yaml");
  ASSERT_TRUE(root) << root.error().ToString();
  PlaybookSet set = DefaultPlaybooks({});
  Status s = MergePlaybooks(*root, {}, {"divergence"}, set);
  ASSERT_FALSE(s) << b.name;
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().Describe(), HasSubstr(b.error)) << s.error().Describe();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlaybookErrorTest,
    ::testing::Values(
        BadPlaybook{"unknown_step",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: reboot\n",
                    "p.yaml:4:13: playbooks.a[1].step: unknown step 'reboot' (known: stop_ranks"},
        BadPlaybook{"unknown_key", "playbooks:\n  a:\n    - step: stop_ranks\n      grcae: 5s\n",
                    "p.yaml:4:7: playbooks.a[0]: unknown key 'grcae'"},
        BadPlaybook{"bad_duration",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: reset_device\n"
                    "      timeout: 5 parsecs\n",
                    "p.yaml:5:16: playbooks.a[1].timeout: expected a duration"},
        BadPlaybook{"wrong_type",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: exec\n"
                    "      argv: /bin/true\n",
                    "p.yaml:5:13: playbooks.a[1].argv: expected an argument vector"},
        BadPlaybook{"retries_not_a_number",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: reset_device\n"
                    "      retries: many\n",
                    "p.yaml:5:16: playbooks.a[1].retries: expected an integer"},
        BadPlaybook{"retries_where_none_apply",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: select_checkpoint\n"
                    "      retries: 2\n",
                    "p.yaml:5:7: playbooks.a[1]: unknown key 'retries'"},
        BadPlaybook{"unknown_fault_class", "faults:\n  hangg: default\n",
                    "p.yaml:2:10: faults.hangg: unknown fault class 'hangg' (known: default, "
                    "escalation, process_exit"},
        BadPlaybook{"unknown_class_in_only_for",
                    "playbooks:\n  a:\n    - step: stop_ranks\n      only_for: [hang, ooops]\n",
                    "p.yaml:4:24: playbooks.a[0].only_for[1]: unknown fault class 'ooops'"},
        BadPlaybook{
            "undefined_playbook", "faults:\n  divergence: rollback\n",
            "p.yaml:2:15: faults.divergence: no playbook named 'rollback' (defined: default)"},
        BadPlaybook{"reset_before_stop", "playbooks:\n  a:\n    - step: reset_device\n",
                    "p.yaml:3:7: playbooks.a[0]: reset_device must come after stop_ranks"},
        BadPlaybook{"verify_without_relaunch",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: verify_progress\n",
                    "p.yaml:4:7: playbooks.a[1]: verify_progress must follow relaunch"},
        BadPlaybook{"notify_without_url",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: notify\n",
                    "p.yaml:4:7: playbooks.a[1]: missing required key 'url'"},
        BadPlaybook{"notify_bad_url",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: notify\n"
                    "      url: 127.0.0.1:80\n",
                    "p.yaml:5:12: playbooks.a[1].url: expected an http:// or https:// URL"},
        BadPlaybook{"bad_on_failure",
                    "playbooks:\n  a:\n    - step: stop_ranks\n    - step: exec\n"
                    "      argv: [/bin/true]\n      on_failure: ignore\n",
                    "p.yaml:6:19: playbooks.a[1].on_failure: expected abort or continue"},
        BadPlaybook{"steps_not_a_list", "playbooks:\n  a: stop_ranks\n",
                    "p.yaml:2:6: playbooks.a: expected a list of steps"}),
    [](const auto& info) { return std::string(info.param.name); });

// A local webhook that keeps what it is sent.
struct Hook {
  HttpServer server;
  std::mutex mu;
  std::vector<std::string> bodies;
  Hook() {
    server.Post("/hook", [this](const HttpRequest& r) {
      std::lock_guard lock(mu);
      bodies.push_back(r.body);
      return HttpResponse::Json(200, R"({"status":"stored"})");
    });
    EXPECT_TRUE(server.Start());
  }
  std::string Url() { return "http://127.0.0.1:" + std::to_string(server.port()) + "/hook"; }
  std::vector<std::string> Bodies() {
    std::lock_guard lock(mu);
    return bodies;
  }
};

TEST(SupervisorTest, PlaybookRunsExecAndNotifyAndAFailingNotifyDoesNotBlock) {
  Hook hook;
  Job job("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && echo 'HCCL_E_TIMEOUT' && sleep 60; echo step 1",
          kFastResets);
  const std::string marks = job.dir / "hook.txt";
  PlaybookDefaults d;
  d.reset_retry_delay_seconds = 0.05;
  job.o.playbooks = Books(R"(playbooks:
  hccl:
    - {step: stop_ranks, grace: 500ms}
    - {step: exec, argv: [/bin/sh, -c, 'echo "dev={device} fault={fault} attempt={attempt}" >> )" +
                              marks + R"('], timeout: 5s}
    - {step: notify, url: ")" +
                              hook.Url() + R"(", timeout: 2s}
    - {step: notify, url: "http://127.0.0.1:1/nobody", timeout: 1s, retries: 1, retry_delay: 100ms}
    - {step: reset_device, retries: 1, retry_delay: 50ms}
    - {step: select_checkpoint}
    - {step: relaunch}
    - {step: verify_progress, timeout: 10s}
faults:
  collective_timeout: hccl
)",
                          d);
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].playbook, "hccl");
  EXPECT_EQ(in[0].outcome, "recovered");
  std::vector<std::string> names;
  for (const StepRecord& s : in[0].steps) names.push_back(s.name + ":" + s.result);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "stop_ranks:ok", "exec:ok", "notify:ok", "notify:failed", "reset_device:ok",
                       "select_checkpoint:skipped", "relaunch:ok", "verify_progress:ok"}));
  EXPECT_EQ(in[0].steps[3].tries, 2);
  EXPECT_THAT(in[0].steps[3].detail, HasSubstr("127.0.0.1:1"));
  EXPECT_EQ(job.dir.Read("hook.txt"), "dev=0,1 fault=collective_timeout attempt=0\n");
  auto bodies = hook.Bodies();
  ASSERT_EQ(bodies.size(), 1u);
  auto msg = nlohmann::json::parse(bodies[0]);
  EXPECT_EQ(msg["version"], "4");
  EXPECT_EQ(msg["alerts"][0]["labels"]["alertname"], "AnxinRunFault");
  EXPECT_EQ(msg["alerts"][0]["labels"]["fault_class"], "collective_timeout");
  EXPECT_THAT(msg["alerts"][0]["annotations"]["description"].get<std::string>(),
              HasSubstr("exec ok"));
}

TEST(SupervisorTest, PlaybookWithoutRelaunchEndsTheJob) {
  Job job("echo 'HCCL_E_TIMEOUT'; sleep 60", kFastResets);
  job.o.playbooks = Books(
      "playbooks:\n  stop:\n    - {step: stop_ranks, grace: 100ms}\n"
      "faults:\n  collective_timeout: stop\n");
  auto rc = job.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 1);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "stopped");
}

TEST(SupervisorTest, ExecThatFailsAbortsTheRecovery) {
  Job job("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && exit 2; echo step 1", kFastResets);
  job.o.playbooks = Books(
      "playbooks:\n  p:\n    - {step: stop_ranks}\n"
      "    - {step: exec, argv: [/bin/sh, -c, 'echo no container; exit 3'], retries: 1, "
      "retry_delay: 10ms}\n    - {step: relaunch}\nfaults:\n  process_exit: p\n");
  auto rc = job.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 1);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "gave_up");
  const StepRecord* exec = FindStep(in[0], "exec");
  ASSERT_NE(exec, nullptr);
  EXPECT_EQ(exec->result, "failed");
  EXPECT_EQ(exec->tries, 2);
  EXPECT_THAT(exec->detail, HasSubstr("no container"));
  EXPECT_EQ(FindStep(in[0], "relaunch"), nullptr);
}

// ---- Escalation.

constexpr char kLostTwice[] =
    "name: t\ndevices:\n  count: 3\n  model: Ascend910C\n  ports: 1\n"
    "  reset: {duration: 0.05s, fail_first: 0}\n"
    "events:\n  - {at: 0.5s, device: 1, kind: device_lost}\n"
    "  - {at: 3s, device: 1, kind: device_lost}\n";

TEST(SupervisorTest, RepeatedDeviceFaultsIsolateTheDeviceForASpare) {
  Job job(
      "echo \"attempt=$ANXIN_RUN_ATTEMPT devices=$ASCEND_RT_VISIBLE_DEVICES\"; "
      "[ \"$ANXIN_RUN_ATTEMPT\" -lt 2 ] && sleep 60; echo step 1",
      kLostTwice);
  job.o.escalate_faults = 2;
  job.o.escalate_window_seconds = 60;
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(FindStep(in[0], "escalate"), nullptr);
  const StepRecord* esc = FindStep(in[1], "escalate");
  ASSERT_NE(esc, nullptr);
  EXPECT_EQ(esc->result, "ok");
  EXPECT_THAT(esc->detail, HasSubstr("device 1: 2 fault(s) within 60 s: isolated, a spare"));
  // The isolated device is neither reset nor in the relaunch.
  EXPECT_EQ(FindStep(in[1], "reset_device")->result, "skipped");
  EXPECT_THAT(job.dir.Read("logs/rank-0.log"), HasSubstr("attempt=2 devices=0,2"));
}

TEST(SupervisorTest, EscalationShrinksTheJobToMinNproc) {
  Job job(
      "echo \"attempt=$ANXIN_RUN_ATTEMPT world=$WORLD_SIZE\"; "
      "[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && sleep 60; echo step 1",
      "name: t\ndevices:\n  count: 2\n  model: Ascend910C\n  ports: 1\n"
      "  reset: {duration: 0.05s}\nevents:\n  - {at: 0.5s, device: 1, kind: device_lost}\n",
      JobTime::kVirtualWithSim);
  job.o.escalate_faults = 1;
  job.o.min_nproc = 1;
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_THAT(FindStep(in[0], "escalate")->detail, HasSubstr("the job goes on with 1 rank(s)"));
  EXPECT_THAT(job.dir.Read("logs/rank-0.log"), HasSubstr("attempt=1 world=1"));
}

TEST(SupervisorTest, EscalationWithoutRoomStopsAndPages) {
  Hook hook;
  Job job("sleep 60",
          "name: t\ndevices:\n  count: 2\n  model: Ascend910C\n  ports: 1\n"
          "  reset: {duration: 0.05s}\nevents:\n  - {at: 0.5s, device: 0, kind: device_lost}\n",
          JobTime::kVirtualWithSim);
  job.o.escalate_faults = 1;
  job.o.playbooks = Books(
      "playbooks:\n  page:\n    - {step: stop_ranks}\n"
      "    - {step: notify, url: \"" +
      hook.Url() + "\"}\nfaults:\n  escalation: page\n");
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, kExitEscalated);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "escalated");
  EXPECT_EQ(FindStep(in[0], "escalate")->result, "failed");
  EXPECT_THAT(FindStep(in[0], "escalate")->detail, HasSubstr("1 usable device(s) left"));
  EXPECT_EQ(FindStep(in[0], "notify")->result, "ok");
  EXPECT_EQ(FindStep(in[0], "reset_device"), nullptr);  // stopped before touching devices
  auto bodies = hook.Bodies();
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_THAT(bodies[0], HasSubstr("AnxinRunEscalated"));
}

// ---- A supervisor that takes over from one that died.

TEST(SupervisorTest, RestartedSupervisorClosesTheOpenIncidentAndResumes) {
  Job job("echo \"attempt=$ANXIN_RUN_ATTEMPT ckpt=$1\"; echo step 11; exit 0", kFastResets);
  job.o.checkpoint_dir = job.dir.Mkdir("ckpt");
  job.dir.Write("ckpt/iter_0000010/m.pt", "w");
  job.dir.Write("ckpt/latest_checkpointed_iteration.txt", "10\n");
  // What a supervisor killed in the middle of a recovery leaves behind.
  job.dir.Write("state/supervisor.json",
                R"({"state": "running", "pid": 99999, "attempt": 2, "restarts": 2,
                    "restarts_without_progress": 1, "nproc": 2, "excluded_devices": [],
                    "device_faults": {}, "incidents_by_class": {"hang": 2}})");
  Incident open;
  open.id = "20261202T000000-99999-1";
  open.fault.fault_class = "hang";
  open.fault.wall = std::chrono::system_clock::now() - std::chrono::seconds(5);
  StepRecord reset;
  reset.name = "reset_device";
  reset.start = open.fault.wall;
  reset.end = reset.start;
  reset.result = "running";
  open.steps.push_back(reset);
  ASSERT_TRUE(WriteIncident(job.o.state_dir, open));
  job.o.max_restarts = 3;
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].outcome, "supervisor_restarted");
  EXPECT_EQ(in[0].steps[0].result, "interrupted");
  EXPECT_THAT(in[0].steps[0].detail, HasSubstr("pid 99999"));
  EXPECT_EQ(in[1].fault.fault_class, "supervisor_restart");
  EXPECT_EQ(in[1].outcome, "recovered");
  EXPECT_THAT(in[1].checkpoint, HasSubstr("iter_0000010"));
  EXPECT_THAT(job.dir.Read("logs/rank-0.log"),
              HasSubstr("attempt=3 ckpt=" + job.o.checkpoint_dir + "/iter_0000010"));
  auto state = nlohmann::json::parse(job.dir.Read("state/supervisor.json"));
  EXPECT_EQ(state["state"], "finished");
  EXPECT_EQ(state["restarts"], 3);
  EXPECT_EQ(state["incidents_by_class"]["supervisor_restart"], 1);

  // Finished: the next supervisor on this state directory starts afresh.
  rc = job.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(job.Incidents().size(), 2u);
  EXPECT_THAT(job.dir.Read("logs/rank-0.log"), HasSubstr("attempt=0 "));
}

TEST(SupervisorTest, RestartBudgetCarriesOverARestart) {
  Job job("echo step 1; exit 0", kFastResets);
  job.dir.Write("state/supervisor.json",
                R"({"state": "running", "pid": 99999, "attempt": 3, "restarts": 3})");
  job.o.max_restarts = 3;
  auto rc = job.Run();
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 1);
  auto in = job.Incidents();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].outcome, "gave_up");
  EXPECT_THAT(FindStep(in[0], "give_up")->detail, HasSubstr("restart budget spent"));
}

// ---- Counters for the agent.

TEST(SupervisorTest, CountersGoToTheAgentSocket) {
  TempDir sock("anxin-run-sock");
  std::mutex mu;
  std::vector<monitor::SdkRecovery> got;
  std::string job_id;
  auto receiver =
      monitor::SdkReceiver::Start({.socket_path = sock / "agent.sock"},
                                  [&](const monitor::SdkDatagram& d, std::span<const uint8_t>) {
                                    std::lock_guard lock(mu);
                                    for (const auto& e : d.events) {
                                      if (auto* r = std::get_if<monitor::SdkRecovery>(&e.body)) {
                                        got.push_back(*r);
                                        job_id = d.sender.job;
                                      }
                                    }
                                  });
  ASSERT_TRUE(receiver) << receiver.error().ToString();
  Job job("[ \"$ANXIN_RUN_ATTEMPT\" = 0 ] && exit 4; echo step 1; sleep 0.5", kFastResets);
  job.o.sdk_forward = sock / "agent.sock";
  job.o.job_id = "llama-7b";
  auto rc = job.Run();
  ASSERT_TRUE(rc) << rc.error().ToString();
  EXPECT_EQ(*rc, 0);
  for (int i = 0; i < 50; ++i) {
    {
      std::lock_guard lock(mu);
      if (got.size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(got.size(), 3u);  // the fault, the relaunch, the recovery
  EXPECT_EQ(job_id, "llama-7b");
  EXPECT_EQ(got[0].fault_class, "process_exit");
  EXPECT_EQ(got[0].incidents_total, 1u);
  EXPECT_EQ(got[0].restarts_total, 0u);
  EXPECT_EQ(got[1].restarts_total, 1u);
  EXPECT_EQ(got[2].restarts_total, 1u);
  EXPECT_GT(got[2].recovery_ns, 0u);
  EXPECT_NEAR(static_cast<double>(got[2].recovery_ns) * 1e-9,
              job.Incidents()[0].time_to_recovery_seconds, 0.01);
}

}  // namespace
}  // namespace anxin::run
