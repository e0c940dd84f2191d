// The job telemetry wire format, version 1: what the SDK (libanxin_sdk.so)
// sends over the AF_UNIX datagram socket named by ANXIN_AGENT_SOCKET, and
// what the agent's receiver (sdk_wire.h) decodes. docs/sdk.md describes it
// for people writing their own senders.
//
// One datagram is a header followed by record_count records; every integer is
// little-endian, nothing is aligned, and a datagram is at most
// kSdkMaxDatagramBytes long.
//
//   [text]
//   header (48 bytes + job id)
//     0  u32  magic "ANXT"
//     4  u16  version (1)
//     6  u16  record_count (1 .. kSdkMaxRecords)
//     8  u32  pid of the sending process
//    12  i32  rank (0 .. world_size-1)
//    16  i32  world_size (1 .. kSdkMaxWorldSize)
//    20  u8   job id length (1 .. kSdkMaxJobIdBytes)
//    21  u8[3] zero
//    24  u64  sequence: datagrams this sender sent before this one
//    32  u64  dropped_total: events the sender dropped while an agent was
//             connected (buffer full, send failed), cumulative
//    40  u64  unsent_total: events made while no agent was connected, cumulative
//    48  job id (printable ASCII, no '"' or '\')
//   record (12-byte record header + body)
//     0  u8   type (SdkRecordType)
//     1  u8   zero
//     2  u16  size of the whole record, header included
//     4  u64  time_ns: when the event happened, ns since the Unix epoch (> 0)
//    12  body, by type:
//     step_begin   u64 step
//     step_end     u64 step, u64 duration_ns
//     collective   u8 op (SdkCollectiveOp), u8 algorithm length (0..32), u16 zero,
//                  u32 group_size (0 = world size), u64 bytes, u64 duration_ns, algorithm
//     kernel       u64 duration_ns, u8 name length (1..96), name
//     heartbeat    (empty)
//     checkpoint   u64 step, u16 path length (1..4096), path
//     alloc_stats  i32 device (>= 0), u32 zero, u64 reserved_bytes, u64 allocated_bytes,
//                  u64 peak_reserved_bytes, f64 fragmentation (0..1), u64 ooms, u64 remaps
//     recovery     u64 restarts_total, u64 incidents_total (of this fault class),
//                  u64 recovery_ns (0: none in this record), u8 fault class length
//                  (1..32), fault class ([a-z0-9_]); sent by a supervisor such as
//                  `anxin run`, counts cumulative
//   Strings are UTF-8 without control characters; durations are at most
//   kSdkMaxDurationNs. A receiver rejects a datagram whole when anything in it
//   breaks these rules, including a version it does not know: new record types
//   or fields come with a new version.
//
// This header is self-contained (standard library only) because the SDK's
// shared library compiles it without the rest of anxin.
//
//   uint64_t now_ns = 1'700'000'000'000'000'000;   // ns since the Unix epoch
//   uint8_t buf[kSdkMaxDatagramBytes];
//   SdkDatagramWriter w(buf, sizeof buf);
//   w.BeginHeader({.pid = 42, .rank = 0, .world_size = 8, .job = "llama-7b"});
//   w.AddStepEnd(now_ns, 17, 250'000'000);
//   size_t n = w.Finish();                    // bytes to send
//
// Thread safety: a writer is used by one thread at a time.
#ifndef ANXIN_MONITOR_SDK_WIRE_FORMAT_H_
#define ANXIN_MONITOR_SDK_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "anxin/base/strings.h"

namespace anxin::monitor {

inline constexpr uint8_t kSdkMagic[4] = {'A', 'N', 'X', 'T'};
inline constexpr uint16_t kSdkWireVersion = 1;
inline constexpr size_t kSdkMaxDatagramBytes = 65536;
inline constexpr size_t kSdkHeaderBytes = 48;  // before the job id
inline constexpr size_t kSdkRecordHeaderBytes = 12;
inline constexpr size_t kSdkMaxRecords = 4096;
inline constexpr size_t kSdkMaxJobIdBytes = 64;
inline constexpr size_t kSdkMaxAlgorithmBytes = 32;
inline constexpr size_t kSdkMaxKernelNameBytes = 96;
inline constexpr size_t kSdkMaxPathBytes = 4096;
inline constexpr size_t kSdkMaxFaultClassBytes = 32;
inline constexpr int32_t kSdkMaxWorldSize = 1 << 20;
inline constexpr uint64_t kSdkMaxDurationNs = 7ULL * 24 * 3600 * 1000000000ULL;  // a week

enum class SdkRecordType : uint8_t {
  kStepBegin = 1,
  kStepEnd = 2,
  kCollective = 3,
  kKernel = 4,
  kHeartbeat = 5,
  kCheckpoint = 6,
  kAllocStats = 7,
  kRecovery = 8,
};
inline constexpr uint8_t kSdkMaxRecordType = 8;

// The same numbers as anxin_collective_op in include/anxin/sdk.h.
enum class SdkCollectiveOp : uint8_t {
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllToAll = 4,
  kBroadcast = 5,
  kReduce = 6,
  kSendRecv = 7,
  kBarrier = 8,
  kOther = 9,
};
inline constexpr uint8_t kSdkMaxCollectiveOp = 9;

// Fixed body sizes (strings come after them).
inline constexpr size_t kSdkStepBeginBody = 8;
inline constexpr size_t kSdkStepEndBody = 16;
inline constexpr size_t kSdkCollectiveBody = 24;
inline constexpr size_t kSdkKernelBody = 9;
inline constexpr size_t kSdkHeartbeatBody = 0;
inline constexpr size_t kSdkCheckpointBody = 10;
inline constexpr size_t kSdkAllocStatsBody = 56;
inline constexpr size_t kSdkRecoveryBody = 25;

// The largest record: a checkpoint with the longest path.
inline constexpr size_t kSdkMaxRecordBytes =
    kSdkRecordHeaderBytes + kSdkCheckpointBody + kSdkMaxPathBytes;

struct SdkHeaderFields {
  uint32_t pid = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string_view job{};  // REQUIRES: 1..kSdkMaxJobIdBytes printable ASCII
  uint64_t sequence = 0;
  uint64_t dropped_total = 0;
  uint64_t unsent_total = 0;
};

struct SdkAllocStatsFields {
  int32_t device = 0;
  uint64_t reserved_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  double fragmentation = 0;
  uint64_t ooms = 0;
  uint64_t remaps = 0;
};

// Length (1..4) of the UTF-8 character at p[i] when it is one the format
// allows in strings (no control characters, C0, DEL or C1, no overlong forms
// or surrogates); 0 when the bytes there are not.
inline size_t SdkCleanCharLength(const uint8_t* p, size_t n, size_t i) {
  size_t len = Utf8SequenceLength(std::string_view(reinterpret_cast<const char*>(p), n), i);
  if (len == 1 && (p[i] < 0x20 || p[i] == 0x7f)) return 0;
  if (len == 2 && p[i] == 0xc2 && p[i + 1] <= 0x9f) return 0;  // C1 controls U+0080..U+009F
  return len;
}

// Rewrites s[0..n) in place so that every byte belongs to an allowed
// character: each byte that does not start one becomes '?'.
inline void SdkCleanText(char* s, size_t n) {
  auto* p = reinterpret_cast<uint8_t*>(s);
  for (size_t i = 0; i < n;) {
    size_t len = SdkCleanCharLength(p, n, i);
    if (len == 0) {
      p[i] = '?';
      len = 1;
    }
    i += len;
  }
}

// Writes one datagram into a caller-owned buffer. Each Add* returns false,
// writing nothing, when the record does not fit (the caller sends what it
// has and starts a new datagram) or when the record count is at its limit.
// The writer does not validate values: the SDK clamps them before.
class SdkDatagramWriter {
 public:
  // REQUIRES: buf holds capacity bytes, capacity >= kSdkHeaderBytes + job id.
  SdkDatagramWriter(uint8_t* buf, size_t capacity) : buf_(buf), capacity_(capacity) {}

  void BeginHeader(const SdkHeaderFields& h) {
    std::memcpy(buf_, kSdkMagic, 4);
    Put16(4, kSdkWireVersion);
    Put16(6, 0);
    Put32(8, h.pid);
    Put32(12, static_cast<uint32_t>(h.rank));
    Put32(16, static_cast<uint32_t>(h.world_size));
    buf_[20] = static_cast<uint8_t>(h.job.size());
    buf_[21] = buf_[22] = buf_[23] = 0;
    Put64(24, h.sequence);
    Put64(32, h.dropped_total);
    Put64(40, h.unsent_total);
    std::memcpy(buf_ + kSdkHeaderBytes, h.job.data(), h.job.size());
    size_ = kSdkHeaderBytes + h.job.size();
    records_ = 0;
  }

  bool AddStepBegin(uint64_t time_ns, uint64_t step) {
    size_t at = size_;
    if (!Open(SdkRecordType::kStepBegin, time_ns, kSdkStepBeginBody)) return false;
    Put64(at + 12, step);
    return true;
  }
  bool AddStepEnd(uint64_t time_ns, uint64_t step, uint64_t duration_ns) {
    size_t at = size_;
    if (!Open(SdkRecordType::kStepEnd, time_ns, kSdkStepEndBody)) return false;
    Put64(at + 12, step);
    Put64(at + 20, duration_ns);
    return true;
  }
  bool AddCollective(uint64_t time_ns, SdkCollectiveOp op, uint32_t group_size, uint64_t bytes,
                     uint64_t duration_ns, std::string_view algorithm) {
    size_t at = size_;
    if (!Open(SdkRecordType::kCollective, time_ns, kSdkCollectiveBody + algorithm.size()))
      return false;
    buf_[at + 12] = static_cast<uint8_t>(op);
    buf_[at + 13] = static_cast<uint8_t>(algorithm.size());
    Put16(at + 14, 0);
    Put32(at + 16, group_size);
    Put64(at + 20, bytes);
    Put64(at + 28, duration_ns);
    std::memcpy(buf_ + at + 36, algorithm.data(), algorithm.size());
    return true;
  }
  bool AddKernel(uint64_t time_ns, uint64_t duration_ns, std::string_view name) {
    size_t at = size_;
    if (!Open(SdkRecordType::kKernel, time_ns, kSdkKernelBody + name.size())) return false;
    Put64(at + 12, duration_ns);
    buf_[at + 20] = static_cast<uint8_t>(name.size());
    std::memcpy(buf_ + at + 21, name.data(), name.size());
    return true;
  }
  bool AddHeartbeat(uint64_t time_ns) {
    return Open(SdkRecordType::kHeartbeat, time_ns, kSdkHeartbeatBody);
  }
  bool AddCheckpoint(uint64_t time_ns, uint64_t step, std::string_view path) {
    size_t at = size_;
    if (!Open(SdkRecordType::kCheckpoint, time_ns, kSdkCheckpointBody + path.size())) return false;
    Put64(at + 12, step);
    Put16(at + 20, static_cast<uint16_t>(path.size()));
    std::memcpy(buf_ + at + 22, path.data(), path.size());
    return true;
  }
  bool AddAllocStats(uint64_t time_ns, const SdkAllocStatsFields& s) {
    size_t at = size_;
    if (!Open(SdkRecordType::kAllocStats, time_ns, kSdkAllocStatsBody)) return false;
    Put32(at + 12, static_cast<uint32_t>(s.device));
    Put32(at + 16, 0);
    Put64(at + 20, s.reserved_bytes);
    Put64(at + 28, s.allocated_bytes);
    Put64(at + 36, s.peak_reserved_bytes);
    uint64_t bits;
    std::memcpy(&bits, &s.fragmentation, 8);
    Put64(at + 44, bits);
    Put64(at + 52, s.ooms);
    Put64(at + 60, s.remaps);
    return true;
  }

  // fault_class: 1..kSdkMaxFaultClassBytes of [a-z0-9_] (not checked here).
  bool AddRecovery(uint64_t time_ns, uint64_t restarts_total, uint64_t incidents_total,
                   uint64_t recovery_ns, std::string_view fault_class) {
    size_t at = size_;
    if (!Open(SdkRecordType::kRecovery, time_ns, kSdkRecoveryBody + fault_class.size()))
      return false;
    Put64(at + 12, restarts_total);
    Put64(at + 20, incidents_total);
    Put64(at + 28, recovery_ns);
    buf_[at + 36] = static_cast<uint8_t>(fault_class.size());
    std::memcpy(buf_ + at + 37, fault_class.data(), fault_class.size());
    return true;
  }

  size_t records() const { return records_; }
  size_t size() const { return size_; }
  // Writes the record count; returns the datagram's length in bytes.
  size_t Finish() {
    Put16(6, static_cast<uint16_t>(records_));
    return size_;
  }

 private:
  bool Open(SdkRecordType type, uint64_t time_ns, size_t body) {
    size_t total = kSdkRecordHeaderBytes + body;
    if (records_ >= kSdkMaxRecords || size_ + total > capacity_) return false;
    buf_[size_] = static_cast<uint8_t>(type);
    buf_[size_ + 1] = 0;
    Put16(size_ + 2, static_cast<uint16_t>(total));
    Put64(size_ + 4, time_ns);
    size_ += total;
    ++records_;
    return true;
  }
  void Put16(size_t at, uint16_t v) {
    buf_[at] = static_cast<uint8_t>(v);
    buf_[at + 1] = static_cast<uint8_t>(v >> 8);
  }
  void Put32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void Put64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }

  uint8_t* buf_;
  size_t capacity_;
  size_t size_ = 0;
  size_t records_ = 0;
};

}  // namespace anxin::monitor

#endif  // ANXIN_MONITOR_SDK_WIRE_FORMAT_H_
