// Decoder of the job telemetry wire format (sdk_wire_format.h): turns one
// datagram from a training process into a validated SdkDatagram, or says why
// it was refused. Everything in a datagram comes from outside the agent, so
// every length, count, enum, string and number is checked before use.
//
//   #include <array>
//
//   std::vector<uint8_t> bytes;                  // one datagram as received
//   std::array<uint64_t, kSdkRejectReasons> rejected{};
//   uint64_t step_ns = 0;
//   SdkDatagram d;
//   Status s = DecodeSdkDatagram(bytes, d);      // reuses d's storage
//   if (!s) ++rejected[static_cast<size_t>(RejectReasonOf(s.error()))];
//   for (const SdkEvent& e : d.events)
//     if (auto* end = std::get_if<SdkStepEnd>(&e.body)) step_ns += end->duration_ns;
//
// Thread safety: the functions are pure; an SdkDatagram is a value.
#ifndef ANXIN_MONITOR_SDK_WIRE_H_
#define ANXIN_MONITOR_SDK_WIRE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/monitor/sdk_wire_format.h"

namespace anxin::monitor {

// Who sent a datagram (from its header).
struct SdkSender {
  uint32_t pid = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string job{};
  uint64_t sequence = 0;
  uint64_t dropped_total = 0;
  uint64_t unsent_total = 0;
};

struct SdkStepBegin {
  uint64_t step = 0;
};
struct SdkStepEnd {
  uint64_t step = 0;
  uint64_t duration_ns = 0;
};
struct SdkCollective {
  SdkCollectiveOp op = SdkCollectiveOp::kOther;
  uint32_t group_size = 0;  // 0: the sender's world size
  uint64_t bytes = 0;       // nccl-tests' "size" of the operation
  uint64_t duration_ns = 0;
  std::string algorithm{};  // may be empty
};
struct SdkKernel {
  uint64_t duration_ns = 0;
  std::string name;
};
struct SdkHeartbeat {};
struct SdkCheckpoint {
  uint64_t step = 0;
  std::string path;
};
using SdkAllocStats = SdkAllocStatsFields;
// From a supervisor (`anxin run`): cumulative counts for the sender's job.
struct SdkRecovery {
  uint64_t restarts_total = 0;
  uint64_t incidents_total = 0;  // of fault_class
  uint64_t recovery_ns = 0;      // the recovery this record reports; 0 = none
  std::string fault_class{};     // 1..32 of [a-z0-9_]
};

using SdkEventBody = std::variant<SdkStepBegin, SdkStepEnd, SdkCollective, SdkKernel, SdkHeartbeat,
                                  SdkCheckpoint, SdkAllocStats, SdkRecovery>;

struct SdkEvent {
  uint64_t time_ns = 0;  // ns since the Unix epoch, as the sender's clock said
  SdkEventBody body;
};

struct SdkDatagram {
  SdkSender sender;
  std::vector<SdkEvent> events;  // in the order they were sent; never empty
};

// Why a datagram was refused; the receiver counts each separately.
enum class SdkRejectReason : uint8_t {
  kMalformed,       // a field breaks the format's rules
  kTruncated,       // shorter than its header or a record says
  kOversized,       // longer than kSdkMaxDatagramBytes
  kUnknownVersion,  // a version this decoder does not read (or not our magic)
};
inline constexpr size_t kSdkRejectReasons = 4;
// "malformed", "truncated", "oversized", "unknown_version": label values.
std::string_view SdkRejectReasonName(SdkRejectReason reason);

// Decodes one datagram into out (its previous contents are replaced; vector
// capacity is kept, so a receiver decoding into one object does not allocate
// per datagram once warm). On error out is left in an unspecified state and
// the error's code tells the reason (RejectReasonOf); its message names the
// byte offset and the rule, e.g. "offset 61: record 2: kernel name length 0".
Status DecodeSdkDatagram(std::span<const uint8_t> bytes, SdkDatagram& out);
Result<SdkDatagram> DecodeSdkDatagram(std::span<const uint8_t> bytes);

// Encodes d (the inverse of DecodeSdkDatagram, byte for byte): for tests,
// tools and senders written in C++. kInvalidArgument when d breaks the
// format's rules or does not fit in one datagram.
Result<std::vector<uint8_t>> EncodeSdkDatagram(const SdkDatagram& d);

// The reason for a decoding error: kDataLoss -> truncated, kResourceExhausted
// -> oversized, kUnimplemented -> unknown version, anything else -> malformed.
SdkRejectReason RejectReasonOf(const Error& error);

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
// "reduce", "send_recv", "barrier", "other".
std::string_view SdkCollectiveOpName(SdkCollectiveOp op);
// "step_begin", "step_end", "collective", "kernel", "heartbeat", "checkpoint",
// "alloc_stats", "recovery".
std::string_view SdkEventTypeName(const SdkEventBody& body);

// nccl-tests' bus-bandwidth factor for a collective over n ranks: 2(n-1)/n
// for all_reduce; (n-1)/n for all_gather, reduce_scatter and all_to_all; 1
// for the others (broadcast, reduce, send_recv, other); 0 for barrier, which
// moves no data. n < 1 is taken as 1.
double BusBandwidthFactor(SdkCollectiveOp op, int64_t n);

// Whether s is valid UTF-8 without control characters (what the wire format
// allows in names and paths).
bool IsCleanUtf8(std::string_view s);

}  // namespace anxin::monitor

#endif  // ANXIN_MONITOR_SDK_WIRE_H_
