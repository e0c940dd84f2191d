// What one job telemetry call (include/anxin/sdk.h) costs the training
// thread that makes it:
//   NoAgent/*      ANXIN_AGENT_SOCKET unset: the SDK is off
//   AgentAbsent/*  a socket is named but nobody listens there
//   Agent/*        the agent's receiver (monitor::SdkReceiver, decoding and
//                  validating every datagram) drains the socket
// side by side with what the SDK's buffer replaces, one datagram send() per
// event to the same receiver (SendPerEvent). Every benchmark checks that
// each call did what it should: counted as unsent without an agent; with
// one, sent and decoded by the receiver, none dropped (the SDK's own
// counters, anxin_sdk_get_stats, and the receiver's). A check that fails
// ends the benchmark with an error.
//
// With an agent the calls come in bursts of kBurst, each followed (untimed)
// by anxin_sdk_flush, so that the buffer never overflows: the figure is the
// caller's cost of a call, not the sending thread's throughput.
//
//   sdk_bench [benchmark flags]
//   sdk_bench --receive SOCKET   serve as the receiver until stdin closes,
//                                then print the events received (for the
//                                Python figures of bench/sdk/run)
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anxin/monitor/sdk_receiver.h"
#include "anxin/monitor/sdk_wire_format.h"
#include "anxin/sdk.h"

namespace {

using anxin::monitor::SdkReceiver;

constexpr int kBurst = 1024;

std::string g_socket;  // where the receiver listens
std::string g_absent;  // where nobody does
std::unique_ptr<SdkReceiver> g_receiver;

anxin_sdk_stats Stats() {
  anxin_sdk_stats s{};
  anxin_sdk_get_stats(&s);
  return s;
}

uint64_t ReceivedEvents() { return g_receiver->stats().events; }

// Waits until the receiver has decoded `target` events (or 10 s).
bool AwaitReceived(uint64_t target) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ReceivedEvents() < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ReceivedEvents() == target;
}

enum class Call { kCollective, kKernel, kStep, kHeartbeat };

// One call of the kind; a step is one anxin_step_end (its begin is a call too,
// measured the same way).
template <Call kCall>
inline void Make(uint64_t i) {
  if constexpr (kCall == Call::kCollective)
    anxin_collective(ANXIN_OP_ALL_REDUCE, 256u << 20, 10'000'000 + (i & 1023), "ring", 0);
  else if constexpr (kCall == Call::kKernel)
    anxin_kernel("flash_attention_fwd_bf16", 1'000'000 + (i & 1023));
  else if constexpr (kCall == Call::kStep)
    anxin_step_end(i);
  else
    anxin_heartbeat();
}

template <Call kCall>
void NoAgentOrAbsent(benchmark::State& state, const char* socket) {
  if (anxin_sdk_set_socket(socket) != 0) {
    state.SkipWithError("anxin_sdk_set_socket failed");
    return;
  }
  const anxin_sdk_stats before = Stats();
  if (before.connected) {
    state.SkipWithError("an agent answered where none should be");
    return;
  }
  uint64_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) Make<kCall>(n++);
  const double timed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const anxin_sdk_stats after = Stats();
  if (after.unsent - before.unsent != n || after.sent != before.sent)
    state.SkipWithError("a call was not counted as unsent");
  state.counters["ns_per_call"] = n ? timed * 1e9 / static_cast<double>(n) : 0;
}

template <Call kCall>
void BM_NoAgent(benchmark::State& state) {
  NoAgentOrAbsent<kCall>(state, nullptr);
}

template <Call kCall>
void BM_AgentAbsent(benchmark::State& state) {
  NoAgentOrAbsent<kCall>(state, g_absent.c_str());
}

template <Call kCall>
void BM_Agent(benchmark::State& state) {
  if (anxin_sdk_set_socket(g_socket.c_str()) != 0 || !Stats().connected) {
    state.SkipWithError("the SDK did not connect to the receiver");
    return;
  }
  const anxin_sdk_stats before = Stats();
  const uint64_t received_before = ReceivedEvents();
  uint64_t n = 0;
  double timed = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBurst; ++i) Make<kCall>(n++);
    auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    timed += s;
    if (anxin_sdk_flush(10'000) != 0) {
      state.SkipWithError("anxin_sdk_flush: events were lost");
      return;
    }
  }
  const anxin_sdk_stats after = Stats();
  if (after.dropped != before.dropped) {
    state.SkipWithError("events were dropped");
  } else if (after.sent - before.sent != n || after.events - before.events != n) {
    state.SkipWithError("not every call was sent");
  } else if (!AwaitReceived(received_before + n)) {
    state.SkipWithError("the receiver did not decode every event");
  }
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.counters["ns_per_call"] = n ? timed * 1e9 / static_cast<double>(n) : 0;
}

// The peer: what a call costs when each event is its own datagram, encoded
// in the same wire format and sent on the caller's thread.
void BM_SendPerEvent(benchmark::State& state) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", g_socket.c_str());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    state.SkipWithError("cannot connect to the receiver");
    if (fd >= 0) close(fd);
    return;
  }
  const uint64_t received_before = ReceivedEvents();
  std::vector<uint8_t> buf(anxin::monitor::kSdkMaxDatagramBytes);
  const uint32_t pid = static_cast<uint32_t>(getpid());
  uint64_t n = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t now =
        static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
    anxin::monitor::SdkDatagramWriter w(buf.data(), buf.size());
    w.BeginHeader({.pid = pid, .rank = 0, .world_size = 1, .job = "peer", .sequence = n});
    w.AddCollective(now, anxin::monitor::SdkCollectiveOp::kAllReduce, 0, 256u << 20,
                    10'000'000 + (n & 1023), "ring");
    const size_t size = w.Finish();
    if (send(fd, buf.data(), size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) ++failed;
    ++n;
  }
  const double timed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fd);
  if (failed) {
    state.SkipWithError("send failed");
  } else if (!AwaitReceived(received_before + n)) {
    state.SkipWithError("the receiver did not decode every event");
  }
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.counters["ns_per_call"] = n ? timed * 1e9 / static_cast<double>(n) : 0;
}

BENCHMARK(BM_NoAgent<Call::kCollective>)->Name("NoAgent/collective");
BENCHMARK(BM_NoAgent<Call::kKernel>)->Name("NoAgent/kernel");
BENCHMARK(BM_NoAgent<Call::kStep>)->Name("NoAgent/step_end");
BENCHMARK(BM_NoAgent<Call::kHeartbeat>)->Name("NoAgent/heartbeat");
BENCHMARK(BM_AgentAbsent<Call::kCollective>)->Name("AgentAbsent/collective");
BENCHMARK(BM_AgentAbsent<Call::kKernel>)->Name("AgentAbsent/kernel");
BENCHMARK(BM_Agent<Call::kCollective>)->Name("Agent/collective")->UseManualTime();
BENCHMARK(BM_Agent<Call::kKernel>)->Name("Agent/kernel")->UseManualTime();
BENCHMARK(BM_Agent<Call::kStep>)->Name("Agent/step_end")->UseManualTime();
BENCHMARK(BM_Agent<Call::kHeartbeat>)->Name("Agent/heartbeat")->UseManualTime();
BENCHMARK(BM_SendPerEvent)->Name("SendPerEvent/collective");

int Receive(const std::string& path) {
  auto r = SdkReceiver::Start({.socket_path = path},
                              [](const anxin::monitor::SdkDatagram&, std::span<const uint8_t>) {});
  if (!r) {
    std::cerr << "sdk_bench: " << r.error().ToString() << "\n";
    return 1;
  }
  std::cout << "listening " << path << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  auto s = (*r)->stats();
  std::cout << "{\"events\": " << s.events << ", \"datagrams\": " << s.datagrams
            << ", \"rejected\": " << s.rejected_total() << "}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--receive") return Receive(argv[2]);
  unsetenv("ANXIN_AGENT_SOCKET");  // the benchmarks choose the socket themselves
  char dir[] = "/tmp/anxin-sdk-bench-XXXXXX";
  if (!mkdtemp(dir)) {
    std::perror("mkdtemp");
    return 1;
  }
  g_socket = std::string(dir) + "/agent.sock";
  g_absent = std::string(dir) + "/nobody.sock";
  auto r = SdkReceiver::Start({.socket_path = g_socket},
                              [](const anxin::monitor::SdkDatagram&, std::span<const uint8_t>) {});
  if (!r) {
    std::cerr << "sdk_bench: " << r.error().ToString() << "\n";
    return 1;
  }
  g_receiver = std::move(*r);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  anxin_sdk_set_socket(nullptr);
  g_receiver.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
