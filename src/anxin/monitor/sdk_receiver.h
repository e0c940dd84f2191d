// The receiving end of the job telemetry SDK: binds the AF_UNIX datagram
// socket that training processes reach through ANXIN_AGENT_SOCKET, decodes
// and validates every datagram (sdk_wire.h), counts what it accepts and
// refuses, and hands each accepted datagram, decoded and raw, to a callback.
// The agent feeds its job-telemetry aggregator from it; the `anxin run`
// supervisor listens on a socket of its own to watch heartbeats and steps,
// and relays the raw datagrams on to the agent (forward_path).
//
//   #include <atomic>
//
//   Registry registry;                              // the agent's metrics (metric_registry.h)
//   SdkReceiverOptions opts{.socket_path = "/run/anxin/agent.sock"};
//   opts.registry = &registry;                      // self-metrics, optional
//   std::atomic<uint64_t> events{0};
//   auto on_datagram = [&](const SdkDatagram& d, std::span<const uint8_t> /*raw*/) {
//     events += d.events.size();
//   };
//   ANXIN_ASSIGN_OR_RETURN(auto receiver, SdkReceiver::Start(opts, on_datagram));
//   // ... the receiver's thread calls back for every accepted datagram ...
//   receiver->Stop();                               // or let it go out of scope
//
// What is counted (stats(), and with a registry the metrics below, each with
// the label node=options.node):
//   anxin_sdk_datagrams_received_total             accepted datagrams
//   anxin_sdk_events_received_total                events in them
//   anxin_sdk_datagrams_rejected_total{reason}     malformed, truncated,
//                                                  oversized, unknown_version
//   anxin_sdk_events_dropped_total                 events the senders dropped
//                                                  while connected (their
//                                                  buffer was full), from the
//                                                  datagram headers
//   anxin_sdk_events_unsent_total                  events the senders made
//                                                  while no agent was there
//   anxin_sdk_datagrams_lost_total                 gaps in a sender's sequence
//                                                  numbers (lost on the way,
//                                                  e.g. by a relay)
//   anxin_sdk_datagrams_forwarded_total{result}    ok / failed, with forward_path
// A sender is known by (pid, job); the receiver remembers at most 4096 of
// them, forgetting the longest silent first.
//
// Thread safety: the callbacks run on the receiver's own thread, one
// datagram at a time; stats() and Stop() may be called from any thread
// (Stop not from a callback).
#ifndef ANXIN_MONITOR_SDK_RECEIVER_H_
#define ANXIN_MONITOR_SDK_RECEIVER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "anxin/base/error.h"
#include "anxin/monitor/metric_registry.h"
#include "anxin/monitor/sdk_wire.h"

namespace anxin::monitor {

// Sends raw datagrams on to another receiver's socket without ever
// blocking: while nobody listens there it only counts, and tries to connect
// again every retry_interval (no system call per datagram meanwhile); a full
// queue at the other end drops the datagram (counted).
//
// Thread safety: Forward may be called from any thread (it takes a lock).
class SdkForwarder {
 public:
  explicit SdkForwarder(std::string path,
                        std::chrono::milliseconds retry_interval = std::chrono::seconds(1));
  ~SdkForwarder();
  SdkForwarder(const SdkForwarder&) = delete;
  SdkForwarder& operator=(const SdkForwarder&) = delete;

  // true when the datagram was handed to the other socket.
  bool Forward(std::span<const uint8_t> datagram);
  uint64_t forwarded() const { return forwarded_.load(std::memory_order_relaxed); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::chrono::milliseconds retry_interval_;
  std::mutex mu_;
  int fd_ = -1;
  std::chrono::steady_clock::time_point next_try_{};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> failed_{0};
};

struct SdkReceiverOptions {
  std::string socket_path{};
  // File mode of the socket: who on the node may report (0666: anyone; the
  // agent usually runs as root and the jobs as users).
  unsigned socket_mode = 0666;
  // SO_RCVBUF asked for (the kernel caps it at net.core.rmem_max unless the
  // process may raise it). Linux also caps the queue at
  // net.unix.max_dgram_qlen datagrams, which the SDK's batching allows for.
  int receive_buffer_bytes = 4 << 20;
  // When set, every accepted datagram is relayed unchanged to this socket.
  std::string forward_path{};
  // Self-metrics go here when set (it must outlive the receiver).
  Registry* registry = nullptr;
  std::string node{};  // value of the "node" label of the self-metrics
};

struct SdkReceiverStats {
  uint64_t datagrams = 0;
  uint64_t events = 0;
  uint64_t bytes = 0;
  std::array<uint64_t, kSdkRejectReasons> rejected{};  // by SdkRejectReason
  uint64_t sender_dropped = 0;
  uint64_t sender_unsent = 0;
  uint64_t datagrams_lost = 0;
  uint64_t forwarded = 0;
  uint64_t forward_failed = 0;

  uint64_t rejected_total() const {
    uint64_t t = 0;
    for (uint64_t r : rejected) t += r;
    return t;
  }
};

class SdkReceiver {
 public:
  // Called for each accepted datagram: decoded, and the bytes as received.
  // Both are valid only during the call.
  using Callback = std::function<void(const SdkDatagram&, std::span<const uint8_t>)>;
  // Called for each refused datagram.
  using RejectCallback =
      std::function<void(SdkRejectReason, const Error&, std::span<const uint8_t>)>;

  // Binds the socket and starts the receiving thread. A stale socket file
  // left by a receiver that died is replaced; a live one is an error
  // (kFailedPrecondition), as is a path that exists and is not a socket, or
  // a path too long for a socket address (kInvalidArgument); a missing
  // directory is kNotFound.
  static Result<std::unique_ptr<SdkReceiver>> Start(SdkReceiverOptions options,
                                                    Callback on_datagram,
                                                    RejectCallback on_reject = nullptr);

  // Stops the thread, closes the socket and removes its file (unless
  // another receiver has replaced it meanwhile).
  ~SdkReceiver();
  void Stop();

  SdkReceiverStats stats() const;
  const std::string& path() const { return options_.socket_path; }

 private:
  struct Metrics;
  struct Senders;
  SdkReceiver(SdkReceiverOptions options, Callback on_datagram, RejectCallback on_reject);
  Status Bind();
  void Run();
  void Handle(std::span<const uint8_t> raw, size_t real_size);

  SdkReceiverOptions options_;
  Callback on_datagram_;
  RejectCallback on_reject_;
  int fd_ = -1;
  int wake_fd_ = -1;  // eventfd that Stop writes
  uint64_t inode_ = 0;
  std::unique_ptr<SdkForwarder> forwarder_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Senders> senders_;
  SdkDatagram scratch_;  // decoded into by the receiving thread
  std::unique_ptr<std::thread> thread_;
  std::mutex stop_mu_;

  std::atomic<uint64_t> datagrams_{0}, events_{0}, bytes_{0};
  std::array<std::atomic<uint64_t>, kSdkRejectReasons> rejected_{};
  std::atomic<uint64_t> sender_dropped_{0}, sender_unsent_{0}, lost_{0};
};

}  // namespace anxin::monitor

#endif  // ANXIN_MONITOR_SDK_RECEIVER_H_
