#include "anxin/monitor/sdk_receiver.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin::monitor {
namespace {

using namespace std::chrono_literals;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::anxin::testing::TempDir;
using ::anxin::testing::WaitFor;
using ::testing::HasSubstr;

constexpr uint64_t kT = 1'764'000'000'000'000'000ULL;

// Sends raw bytes to a socket path, as a misbehaving client could.
bool SendTo(const std::string& path, std::span<const uint8_t> bytes) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ssize_t n =
      sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
  return n == static_cast<ssize_t>(bytes.size());
}

SdkDatagram Datagram(uint32_t pid, uint64_t sequence, uint64_t dropped = 0, uint64_t unsent = 0) {
  SdkDatagram d;
  d.sender = {.pid = pid,
              .rank = 1,
              .world_size = 2,
              .job = "job-1",
              .sequence = sequence,
              .dropped_total = dropped,
              .unsent_total = unsent};
  d.events.push_back({kT, SdkStepEnd{sequence, 1'000'000}});
  d.events.push_back({kT, SdkHeartbeat{}});
  return d;
}

std::vector<uint8_t> Bytes(const SdkDatagram& d) {
  auto b = EncodeSdkDatagram(d);
  EXPECT_THAT(b, IsOk());
  return b ? *b : std::vector<uint8_t>{};
}

// Collects what the callbacks see, for the test thread to wait on.
struct Seen {
  std::mutex mu;
  std::vector<SdkDatagram> datagrams;
  std::vector<std::vector<uint8_t>> raw;
  std::vector<std::string> rejects;

  SdkReceiver::Callback OnDatagram() {
    return [this](const SdkDatagram& d, std::span<const uint8_t> r) {
      std::lock_guard lock(mu);
      datagrams.push_back(d);
      raw.emplace_back(r.begin(), r.end());
    };
  }
  SdkReceiver::RejectCallback OnReject() {
    return [this](SdkRejectReason why, const Error& e, std::span<const uint8_t>) {
      std::lock_guard lock(mu);
      rejects.push_back(std::string(SdkRejectReasonName(why)) + ": " + e.Describe());
    };
  }
  size_t count() {
    std::lock_guard lock(mu);
    return datagrams.size();
  }
};

TEST(SdkReceiverTest, AcceptsAndHandsOverDecodedAndRaw) {
  TempDir dir;
  Seen seen;
  auto r = SdkReceiver::Start({.socket_path = dir / "agent.sock"}, seen.OnDatagram());
  ASSERT_THAT(r, IsOk());
  std::vector<uint8_t> bytes = Bytes(Datagram(100, 0));
  ASSERT_TRUE(SendTo((*r)->path(), bytes));
  ASSERT_TRUE(WaitFor([&] { return seen.count() == 1; }));
  EXPECT_EQ(seen.datagrams[0].sender.pid, 100u);
  EXPECT_EQ(seen.datagrams[0].events.size(), 2u);
  EXPECT_EQ(seen.raw[0], bytes);
  SdkReceiverStats s = (*r)->stats();
  EXPECT_EQ(s.datagrams, 1u);
  EXPECT_EQ(s.events, 2u);
  EXPECT_EQ(s.bytes, bytes.size());
  EXPECT_EQ(s.rejected_total(), 0u);
}

TEST(SdkReceiverTest, RefusesAndCountsEachKindOfBadDatagram) {
  TempDir dir;
  Seen seen;
  Registry registry;
  auto r = SdkReceiver::Start(
      {.socket_path = dir / "agent.sock", .registry = &registry, .node = "node-a"},
      seen.OnDatagram(), seen.OnReject());
  ASSERT_THAT(r, IsOk());
  std::vector<uint8_t> good = Bytes(Datagram(100, 0));

  std::vector<uint8_t> malformed = good;
  malformed[12] = 9;  // rank 9 of world size 2
  std::vector<uint8_t> truncated(good.begin(), good.end() - 3);
  std::vector<uint8_t> version = good;
  version[4] = 7;
  std::vector<uint8_t> oversized(kSdkMaxDatagramBytes + 100, 0);
  std::memcpy(oversized.data(), good.data(), good.size());
  std::vector<uint8_t> garbage = {'G', 'E', 'T', ' ', '/'};
  for (auto* b : {&malformed, &truncated, &version, &oversized, &garbage, &good})
    ASSERT_TRUE(SendTo((*r)->path(), *b));

  ASSERT_TRUE(WaitFor([&] { return seen.count() == 1; }));
  SdkReceiverStats s = (*r)->stats();
  EXPECT_EQ(s.datagrams, 1u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(SdkRejectReason::kMalformed)], 2u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(SdkRejectReason::kTruncated)], 1u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(SdkRejectReason::kUnknownVersion)], 1u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(SdkRejectReason::kOversized)], 1u);
  {
    std::lock_guard lock(seen.mu);
    ASSERT_EQ(seen.rejects.size(), 5u);
    EXPECT_THAT(seen.rejects[0], HasSubstr("malformed: offset 12: rank 9 outside world size 2"));
    EXPECT_THAT(seen.rejects[3], HasSubstr("oversized: datagram of 65636 bytes"));
  }
  std::string text = registry.TextExposition();
  EXPECT_THAT(text, HasSubstr("anxin_sdk_datagrams_received_total{node=\"node-a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("anxin_sdk_events_received_total{node=\"node-a\"} 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "anxin_sdk_datagrams_rejected_total{node=\"node-a\",reason=\"malformed\"} 2\n"
          "anxin_sdk_datagrams_rejected_total{node=\"node-a\",reason=\"oversized\"} 1\n"
          "anxin_sdk_datagrams_rejected_total{node=\"node-a\",reason=\"truncated\"} 1\n"
          "anxin_sdk_datagrams_rejected_total{node=\"node-a\",reason=\"unknown_version\"} 1\n"));
}

TEST(SdkReceiverTest, CountsSenderDropsAndSequenceGapsAsIncrements) {
  TempDir dir;
  Seen seen;
  auto r = SdkReceiver::Start({.socket_path = dir / "agent.sock"}, seen.OnDatagram());
  ASSERT_THAT(r, IsOk());
  // Sender 100: first seen with 3 dropped and 10 unsent; then datagram 1 is
  // lost on the way and 2 arrives with 5 dropped.
  ASSERT_TRUE(SendTo((*r)->path(), Bytes(Datagram(100, 0, 3, 10))));
  ASSERT_TRUE(SendTo((*r)->path(), Bytes(Datagram(100, 2, 5, 10))));
  // Sender 200 reports on its own.
  ASSERT_TRUE(SendTo((*r)->path(), Bytes(Datagram(200, 7, 1, 0))));
  ASSERT_TRUE(WaitFor([&] { return seen.count() == 3; }));
  SdkReceiverStats s = (*r)->stats();
  EXPECT_EQ(s.sender_dropped, 5u + 1u);
  EXPECT_EQ(s.sender_unsent, 10u);
  EXPECT_EQ(s.datagrams_lost, 1u);
}

TEST(SdkReceiverTest, SocketFileRules) {
  TempDir dir;
  Seen seen;
  std::string path = dir / "agent.sock";
  {
    auto first = SdkReceiver::Start({.socket_path = path}, seen.OnDatagram());
    ASSERT_THAT(first, IsOk());
    // A second receiver on a live socket is refused.
    EXPECT_THAT(SdkReceiver::Start({.socket_path = path}, seen.OnDatagram()),
                HasCode(ErrorCode::kFailedPrecondition, HasSubstr("in use")));
  }
  // Stop removed the file.
  EXPECT_NE(access(path.c_str(), F_OK), 0);

  // A stale socket (bound, then its owner gone) is replaced.
  {
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  EXPECT_THAT(SdkReceiver::Start({.socket_path = path}, seen.OnDatagram()), IsOk());

  std::string file = dir.Write("plain.txt", "not a socket");
  EXPECT_THAT(SdkReceiver::Start({.socket_path = file}, seen.OnDatagram()),
              HasCode(ErrorCode::kFailedPrecondition, HasSubstr("not a socket")));
  EXPECT_THAT(SdkReceiver::Start({.socket_path = dir / "no/such/dir/a.sock"}, seen.OnDatagram()),
              HasCode(ErrorCode::kNotFound, HasSubstr("does not exist")));
  EXPECT_THAT(SdkReceiver::Start({.socket_path = dir / std::string(120, 'x')}, seen.OnDatagram()),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("at most 107")));
}

TEST(SdkReceiverTest, StopLeavesAReplacementSocketAlone) {
  TempDir dir;
  Seen seen;
  std::string path = dir / "agent.sock";
  auto old = SdkReceiver::Start({.socket_path = path}, seen.OnDatagram());
  ASSERT_THAT(old, IsOk());
  // Someone removes the file and a new receiver binds the same path.
  unlink(path.c_str());
  auto fresh = SdkReceiver::Start({.socket_path = path}, seen.OnDatagram());
  ASSERT_THAT(fresh, IsOk());
  (*old)->Stop();
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  ASSERT_TRUE(SendTo(path, Bytes(Datagram(1, 0))));
  ASSERT_TRUE(WaitFor([&] { return (*fresh)->stats().datagrams == 1; }));
}

// The supervisor's seam: a receiver that sees every datagram and relays it
// unchanged to the agent's socket, whether or not the agent is up.
TEST(SdkReceiverTest, ForwardsRawDatagramsToTheNextReceiver) {
  TempDir dir;
  Seen at_agent;
  Registry registry;
  std::string agent_path = dir / "agent.sock";
  auto supervisor = SdkReceiver::Start({.socket_path = dir / "run.sock",
                                        .forward_path = agent_path,
                                        .registry = &registry,
                                        .node = "n"},
                                       [](const SdkDatagram&, std::span<const uint8_t>) {});
  ASSERT_THAT(supervisor, IsOk());

  // No agent yet: relaying fails, counted, and costs no blocking.
  ASSERT_TRUE(SendTo((*supervisor)->path(), Bytes(Datagram(1, 0))));
  ASSERT_TRUE(WaitFor([&] { return (*supervisor)->stats().forward_failed == 1; }));

  auto agent = SdkReceiver::Start({.socket_path = agent_path}, at_agent.OnDatagram());
  ASSERT_THAT(agent, IsOk());
  // The forwarder looks for the agent again once a second.
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(WaitFor([&] {
    bytes = Bytes(Datagram(1, (*supervisor)->stats().datagrams));
    SendTo((*supervisor)->path(), bytes);
    std::this_thread::sleep_for(20ms);
    return at_agent.count() > 0;
  }));
  {
    std::lock_guard lock(at_agent.mu);
    EXPECT_EQ(at_agent.raw.back(), bytes);
  }
  SdkReceiverStats s = (*supervisor)->stats();
  EXPECT_GE(s.forwarded, 1u);
  EXPECT_EQ(s.forwarded + s.forward_failed, s.datagrams);
  EXPECT_THAT(registry.TextExposition(),
              HasSubstr("anxin_sdk_datagrams_forwarded_total{node=\"n\",result=\"failed\"}"));
}

TEST(SdkReceiverTest, ForwarderAloneNeverBlocks) {
  TempDir dir;
  SdkForwarder f(dir / "nobody.sock", 50ms);
  std::vector<uint8_t> bytes = Bytes(Datagram(1, 0));
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(f.Forward(bytes));
  EXPECT_EQ(f.failed(), 1000u);
  // A receiver that never reads: its queue fills, then sends fail at once.
  Seen seen;
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = dir / "slow.sock";
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  SdkForwarder slow(path);
  int ok = 0;
  for (int i = 0; i < 1000; ++i) ok += slow.Forward(bytes) ? 1 : 0;
  EXPECT_GT(ok, 0);
  EXPECT_LT(ok, 1000);
  EXPECT_EQ(slow.forwarded() + slow.failed(), 1000u);
  close(fd);
}

}  // namespace
}  // namespace anxin::monitor
