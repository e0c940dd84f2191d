// libanxin_sdk.so through its C ABI, against a bare datagram socket that the
// test binds and reads itself (the receiver class is tested on its own).
// The SDK is one per process, so the tests share it and reconfigure it with
// anxin_sdk_set_socket; the environment is set before the first call.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "anxin/base/testing.h"
#include "anxin/monitor/sdk_wire.h"
#include "anxin/sdk.h"

namespace anxin::monitor {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    unsetenv("ANXIN_AGENT_SOCKET");
    unsetenv("ANXIN_JOB_ID");
    unsetenv("SLURM_JOB_ID");
    setenv("ANXIN_SDK_FLUSH_MS", "5", 1);
    setenv("ANXIN_SDK_RETRY_MS", "50", 1);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Environment);

// A bound datagram socket that decodes what it reads.
class Sink {
 public:
  explicit Sink(std::string path) : path_(std::move(path)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    unlink(path_.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  }
  ~Sink() { Close(); }
  void Close() {
    if (fd_ >= 0) {
      close(fd_);
      unlink(path_.c_str());
    }
    fd_ = -1;
  }

  // The next datagram, decoded, or nullopt after timeout.
  std::optional<SdkDatagram> Next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
    std::vector<uint8_t> buf(kSdkMaxDatagramBytes + 1);
    ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0) return std::nullopt;
    auto d = DecodeSdkDatagram(std::span(buf.data(), static_cast<size_t>(n)));
    EXPECT_THAT(d, IsOk());
    if (!d) return std::nullopt;
    ++datagrams_;
    return *std::move(d);
  }

  // Reads until `want` events have come (or 10 s have passed); returns them.
  std::vector<SdkEvent> Collect(size_t want, SdkSender* sender = nullptr) {
    std::vector<SdkEvent> events;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (events.size() < want && std::chrono::steady_clock::now() < deadline) {
      auto d = Next(100ms);
      if (!d) continue;
      if (sender) *sender = d->sender;
      for (auto& e : d->events) events.push_back(std::move(e));
    }
    return events;
  }

  const std::string& path() const { return path_; }
  size_t datagrams() const { return datagrams_; }

 private:
  std::string path_;
  int fd_ = -1;
  size_t datagrams_ = 0;
};

anxin_sdk_stats Stats() {
  anxin_sdk_stats s{};
  anxin_sdk_get_stats(&s);
  return s;
}

bool WaitConnected() {
  return WaitFor([] { return Stats().connected == 1; });
}

long ResidentKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(SdkClientTest, OffWithoutASocketAndNeverFails) {
  ASSERT_EQ(anxin_sdk_set_socket(nullptr), 0);
  anxin_sdk_stats before = Stats();
  EXPECT_EQ(before.enabled, 0);
  EXPECT_EQ(before.connected, 0);
  for (int i = 0; i < 1000; ++i) {
    anxin_step_begin(i);
    anxin_kernel("matmul", 10);
    anxin_step_end(i);
  }
  anxin_sdk_stats after = Stats();
  EXPECT_EQ(after.unsent - before.unsent, 3000u);
  EXPECT_EQ(after.events - before.events, 3000u);
  EXPECT_EQ(after.sent, before.sent);
  EXPECT_EQ(anxin_sdk_flush(100), -1);
  EXPECT_EQ(anxin_sdk_abi_version(), ANXIN_SDK_ABI_VERSION);
}

TEST(SdkClientTest, AbsentAgentCountsUnsentAndMemoryStaysFlat) {
  TempDir dir;
  ASSERT_EQ(anxin_sdk_set_socket((dir / "nobody.sock").c_str()), 0);
  EXPECT_EQ(Stats().enabled, 1);
  // Warm up, then a million calls of every kind must not grow the process.
  for (int i = 0; i < 1000; ++i) anxin_kernel("warm", 1);
  long rss_before = ResidentKiB();
  anxin_sdk_stats before = Stats();
  for (uint64_t i = 0; i < 250000; ++i) {
    anxin_step_begin(i);
    anxin_collective(ANXIN_OP_ALL_REDUCE, 1 << 20, 1000, "ring", 0);
    anxin_kernel("attention", 500);
    anxin_step_end(i);
  }
  anxin_checkpoint_saved(1, "/ckpt/1");
  anxin_sdk_stats after = Stats();
  EXPECT_EQ(after.unsent - before.unsent, 1000001u);
  EXPECT_EQ(after.connected, 0);
  EXPECT_EQ(after.sent, before.sent);
  EXPECT_LT(ResidentKiB() - rss_before, 1024) << "KiB grown";
  EXPECT_EQ(anxin_sdk_flush(50), -1);
}

TEST(SdkClientTest, DeliversEveryKindOfEvent) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  ASSERT_EQ(anxin_sdk_set_identity("llama-7b", 2, 4), 0);
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());

  anxin_step_begin(7);
  std::this_thread::sleep_for(20ms);
  anxin_step_end(7);
  anxin_step_time(8, 123456789);
  anxin_collective(ANXIN_OP_REDUCE_SCATTER, 64ULL << 20, 2'000'000, "NHR", 8);
  anxin_collective(ANXIN_OP_BROADCAST, 4096, 1000, nullptr, 0);  // algorithm may be NULL
  anxin_kernel("flash_attn_fwd", 1'500'000);
  anxin_heartbeat();
  anxin_checkpoint_saved(8, "/ckpt/iter_0000008");
  anxin_sdk_alloc_stats a{100, 60, 120, 0.25, 1, 3};
  anxin_report_alloc_stats(1, &a);
  ASSERT_EQ(anxin_sdk_flush(5000), 0);

  SdkSender sender;
  std::vector<SdkEvent> got = sink.Collect(9, &sender);
  ASSERT_EQ(got.size(), 9u);
  EXPECT_EQ(sender.job, "llama-7b");
  EXPECT_EQ(sender.rank, 2);
  EXPECT_EQ(sender.world_size, 4);
  EXPECT_EQ(sender.pid, static_cast<uint32_t>(getpid()));
  int seen = 0;
  for (const SdkEvent& e : got) {
    EXPECT_GT(e.time_ns, 1'700'000'000'000'000'000ULL);  // a real Unix time
    if (auto* b = std::get_if<SdkStepBegin>(&e.body)) {
      EXPECT_EQ(b->step, 7u);
      seen |= 1;
    } else if (auto* s = std::get_if<SdkStepEnd>(&e.body)) {
      if (s->step == 7) {
        EXPECT_GE(s->duration_ns, 20'000'000u);
        EXPECT_LT(s->duration_ns, 10'000'000'000u);
        seen |= 2;
      } else {
        EXPECT_EQ(s->step, 8u);
        EXPECT_EQ(s->duration_ns, 123456789u);
        seen |= 4;
      }
    } else if (auto* c = std::get_if<SdkCollective>(&e.body);
               c && c->op == SdkCollectiveOp::kBroadcast) {
      EXPECT_EQ(c->algorithm, "");
      EXPECT_EQ(c->bytes, 4096u);
      seen |= 256;
    } else if (auto* c = std::get_if<SdkCollective>(&e.body)) {
      EXPECT_EQ(c->op, SdkCollectiveOp::kReduceScatter);
      EXPECT_EQ(c->bytes, 64ULL << 20);
      EXPECT_EQ(c->duration_ns, 2'000'000u);
      EXPECT_EQ(c->algorithm, "NHR");
      EXPECT_EQ(c->group_size, 8u);
      seen |= 8;
    } else if (auto* k = std::get_if<SdkKernel>(&e.body)) {
      EXPECT_EQ(k->name, "flash_attn_fwd");
      EXPECT_EQ(k->duration_ns, 1'500'000u);
      seen |= 16;
    } else if (std::holds_alternative<SdkHeartbeat>(e.body)) {
      seen |= 32;
    } else if (auto* cp = std::get_if<SdkCheckpoint>(&e.body)) {
      EXPECT_EQ(cp->step, 8u);
      EXPECT_EQ(cp->path, "/ckpt/iter_0000008");
      seen |= 64;
    } else if (auto* s = std::get_if<SdkAllocStats>(&e.body)) {
      EXPECT_EQ(s->device, 1);
      EXPECT_EQ(s->reserved_bytes, 100u);
      EXPECT_EQ(s->allocated_bytes, 60u);
      EXPECT_EQ(s->peak_reserved_bytes, 120u);
      EXPECT_EQ(s->fragmentation, 0.25);
      EXPECT_EQ(s->ooms, 1u);
      EXPECT_EQ(s->remaps, 3u);
      seen |= 128;
    }
  }
  EXPECT_EQ(seen, 511);
}

TEST(SdkClientTest, CleansAndCutsStringsSoTheAgentNeverRefusesThem) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  std::string long_name = "k\tx" + std::string(200, 'n');
  anxin_kernel(long_name.c_str(), 5);
  anxin_kernel("\xe6\xa0\xb8\xff", 6);  // 核 then a stray byte
  anxin_collective(static_cast<anxin_collective_op>(77), 1, 1,
                   "a-very-long-algorithm-name-that-goes-on", -5);
  anxin_report_alloc_stats(0, nullptr);  // ignored
  anxin_kernel(nullptr, 1);              // ignored
  anxin_sdk_alloc_stats nan_frag{1, 1, 1, std::nan(""), 0, 0};
  anxin_report_alloc_stats(0, &nan_frag);
  ASSERT_EQ(anxin_sdk_flush(5000), 0);
  std::vector<SdkEvent> got = sink.Collect(4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(std::get<SdkKernel>(got[0].body).name, "k?x" + std::string(93, 'n'));
  EXPECT_EQ(std::get<SdkKernel>(got[1].body).name, "\xe6\xa0\xb8?");
  const auto& c = std::get<SdkCollective>(got[2].body);
  EXPECT_EQ(c.op, SdkCollectiveOp::kOther);
  EXPECT_EQ(c.group_size, 0u);
  EXPECT_EQ(c.algorithm.size(), kSdkMaxAlgorithmBytes);
  EXPECT_EQ(std::get<SdkAllocStats>(got[3].body).fragmentation, 0.0);
}

TEST(SdkClientTest, ReportsRecoveryCountsAndIgnoresBadFaultClasses) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  anxin_report_recovery("collective_timeout", 2, 3, 1'500'000'000);
  anxin_report_recovery(nullptr, 1, 1, 0);                       // ignored
  anxin_report_recovery("", 1, 1, 0);                            // ignored
  anxin_report_recovery("Hang", 1, 1, 0);                        // ignored: upper case
  anxin_report_recovery(std::string(33, 'x').c_str(), 1, 1, 0);  // ignored: too long
  anxin_report_recovery("hang", 1, 4, ~0ULL);                    // clamped to a week
  ASSERT_EQ(anxin_sdk_flush(5000), 0);
  std::vector<SdkEvent> got = sink.Collect(2);
  ASSERT_EQ(got.size(), 2u);
  const auto& a = std::get<SdkRecovery>(got[0].body);
  EXPECT_EQ(a.fault_class, "collective_timeout");
  EXPECT_EQ(a.incidents_total, 2u);
  EXPECT_EQ(a.restarts_total, 3u);
  EXPECT_EQ(a.recovery_ns, 1'500'000'000u);
  const auto& b = std::get<SdkRecovery>(got[1].body);
  EXPECT_EQ(b.fault_class, "hang");
  EXPECT_EQ(b.restarts_total, 4u);
  EXPECT_EQ(b.recovery_ns, kSdkMaxDurationNs);
}

TEST(SdkClientTest, IdentityIsValidated) {
  EXPECT_EQ(anxin_sdk_set_identity("job", 4, 4), -1);
  EXPECT_EQ(anxin_sdk_set_identity("job", -1, 4), -1);
  EXPECT_EQ(anxin_sdk_set_identity("bad\"id", 0, 1), -1);
  EXPECT_EQ(anxin_sdk_set_identity("", 0, 1), -1);
  EXPECT_EQ(anxin_sdk_set_identity(std::string(65, 'j').c_str(), 0, 1), -1);
  EXPECT_EQ(anxin_sdk_set_identity(nullptr, 0, 1), 0);
  EXPECT_EQ(anxin_sdk_set_socket(std::string(200, 'p').c_str()), -1);
  EXPECT_EQ(anxin_sdk_add_sampler(nullptr, nullptr), -1);
}

// The agent stops reading: the socket's queue fills, then the SDK's buffer;
// calls keep returning at once, the excess is dropped and counted, and the
// count reaches the agent once it reads again.
TEST(SdkClientTest, SlowAgentMeansDropsNotBlocking) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  anxin_sdk_stats before = Stats();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 300000; ++i) anxin_kernel("gemm", 100);
  auto took = std::chrono::steady_clock::now() - start;
  anxin_sdk_stats mid = Stats();
  EXPECT_GT(mid.dropped, before.dropped);
  EXPECT_EQ(mid.events - before.events, 300000u);
  EXPECT_LT(took, 30s);  // a blocked call would hang here instead

  // Read everything; the later headers carry the drop count.
  uint64_t reported_dropped = 0;
  uint64_t received = 0;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  anxin_heartbeat();
  while (std::chrono::steady_clock::now() < deadline) {
    auto d = sink.Next(200ms);
    if (!d) {
      if (anxin_sdk_flush(10) == 0 && reported_dropped == Stats().dropped) break;
      anxin_heartbeat();  // a datagram to carry the latest counters
      continue;
    }
    received += d->events.size();
    reported_dropped = d->sender.dropped_total;
  }
  anxin_sdk_stats after = Stats();
  EXPECT_EQ(reported_dropped, after.dropped);
  EXPECT_EQ(after.sent - before.sent, received);
  EXPECT_EQ(after.sent + after.dropped + after.unsent, after.events);
}

// The agent goes away and comes back at the same path: calls go on
// returning at once, and events flow again to the new one.
TEST(SdkClientTest, SurvivesTheAgentRestarting) {
  TempDir dir;
  std::string path = dir / "agent.sock";
  auto first = std::make_unique<Sink>(path);
  ASSERT_EQ(anxin_sdk_set_socket(path.c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  anxin_heartbeat();
  ASSERT_EQ(anxin_sdk_flush(5000), 0);
  ASSERT_EQ(first->Collect(1).size(), 1u);
  first.reset();  // the agent stops

  // The SDK notices at its next send.
  ASSERT_TRUE(WaitFor([] {
    anxin_heartbeat();
    return Stats().connected == 0;
  }));
  Sink second(path);
  ASSERT_TRUE(WaitConnected());
  anxin_step_end(99);
  ASSERT_EQ(anxin_sdk_flush(5000), 0);
  // A heartbeat made as the first agent went away may come first.
  bool found = false;
  for (int i = 0; i < 3 && !found; ++i)
    for (const SdkEvent& e : second.Collect(1))
      if (auto* s = std::get_if<SdkStepEnd>(&e.body)) found = s->step == 99;
  EXPECT_TRUE(found);
}

// Samplers cannot be removed: this one reports only while a test wants it.
std::atomic<bool> sampler_on{false};
void ReportAllocStats(void*) {
  if (!sampler_on.load()) return;
  anxin_sdk_alloc_stats s{1 << 30, 1 << 29, 1 << 30, 0.5, 0, 0};
  anxin_report_alloc_stats(5, &s);
}

TEST(SdkClientTest, SamplersRunWhileConnected) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  static const bool added = anxin_sdk_add_sampler(ReportAllocStats, nullptr) == 0;
  ASSERT_TRUE(added);
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  sampler_on = true;
  std::vector<SdkEvent> got = sink.Collect(1);
  sampler_on = false;
  ASSERT_GE(got.size(), 1u);
  EXPECT_EQ(std::get<SdkAllocStats>(got[0].body).device, 5);
}

TEST(SdkClientTest, AForkedChildReportsWithItsOwnPid) {
  TempDir dir;
  Sink sink(dir / "agent.sock");
  ASSERT_EQ(anxin_sdk_set_socket(sink.path().c_str()), 0);
  ASSERT_TRUE(WaitConnected());
  pid_t child = fork();
  if (child == 0) {
    // The child re-reads the environment: point it at the sink.
    setenv("ANXIN_AGENT_SOCKET", sink.path().c_str(), 1);
    anxin_step_end(4242);
    _exit(anxin_sdk_flush(5000) == 0 ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  SdkSender sender;
  std::vector<SdkEvent> got = sink.Collect(1, &sender);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(sender.pid, static_cast<uint32_t>(child));
  EXPECT_EQ(std::get<SdkStepEnd>(got[0].body).step, 4242u);
}

}  // namespace
}  // namespace anxin::monitor
