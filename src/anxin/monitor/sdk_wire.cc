#include "anxin/monitor/sdk_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace anxin::monitor {
namespace {

uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::unexpected<Error> Malformed(size_t offset, std::string what) {
  return InvalidArgument(fmt::format("offset {}: {}", offset, what));
}
std::unexpected<Error> Truncated(size_t offset, std::string what) {
  return DataLoss(fmt::format("offset {}: truncated: {}", offset, what));
}

constexpr std::string_view kRecordNames[] = {"",           "step_begin",  "step_end",
                                             "collective", "kernel",      "heartbeat",
                                             "checkpoint", "alloc_stats", "recovery"};

bool IsJobIdChar(uint8_t c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

// Decodes the body of one record whose bounds are already checked: body
// points at `body_size` readable bytes.
Status DecodeBody(SdkRecordType type, const uint8_t* body, size_t body_size, size_t offset,
                  size_t index, SdkEvent& event) {
  // The message is made only when there is an error.
  auto bad = [&](std::string what) -> Status {
    return Malformed(offset, fmt::format("record {} ({}): {}", index + 1,
                                         kRecordNames[static_cast<uint8_t>(type)], what));
  };
  auto exact = [&](size_t want) -> Status {
    if (body_size != want)
      return bad(fmt::format("body of {} bytes, expected {}", body_size, want));
    return Ok();
  };
  auto text = [&](const uint8_t* p, size_t n, std::string_view field, std::string& out) -> Status {
    std::string_view s(reinterpret_cast<const char*>(p), n);
    if (!IsCleanUtf8(s))
      return bad(fmt::format("{} is not UTF-8 text without control characters", field));
    out.assign(s);
    return Ok();
  };

  switch (type) {
    case SdkRecordType::kStepBegin: {
      ANXIN_TRY(exact(kSdkStepBeginBody));
      event.body = SdkStepBegin{Get64(body)};
      return Ok();
    }
    case SdkRecordType::kStepEnd: {
      ANXIN_TRY(exact(kSdkStepEndBody));
      SdkStepEnd e{Get64(body), Get64(body + 8)};
      if (e.duration_ns > kSdkMaxDurationNs)
        return bad(fmt::format("duration {} ns is longer than a week", e.duration_ns));
      event.body = e;
      return Ok();
    }
    case SdkRecordType::kCollective: {
      if (body_size < kSdkCollectiveBody)
        return bad(
            fmt::format("body of {} bytes is shorter than {}", body_size, kSdkCollectiveBody));
      uint8_t op = body[0];
      size_t algo_len = body[1];
      if (op < 1 || op > kSdkMaxCollectiveOp)
        return bad(fmt::format("unknown collective op {}", op));
      if (algo_len > kSdkMaxAlgorithmBytes)
        return bad(fmt::format("algorithm length {} is over {}", algo_len, kSdkMaxAlgorithmBytes));
      if (Get16(body + 2) != 0) return bad("reserved bytes");
      ANXIN_TRY(exact(kSdkCollectiveBody + algo_len));
      uint32_t group = Get32(body + 4);
      if (group > static_cast<uint32_t>(kSdkMaxWorldSize))
        return bad(fmt::format("group size {} is over {}", group, kSdkMaxWorldSize));
      if (!std::holds_alternative<SdkCollective>(event.body)) event.body = SdkCollective{};
      auto& c = std::get<SdkCollective>(event.body);
      c.op = static_cast<SdkCollectiveOp>(op);
      c.group_size = group;
      c.bytes = Get64(body + 8);
      c.duration_ns = Get64(body + 16);
      if (c.duration_ns > kSdkMaxDurationNs)
        return bad(fmt::format("duration {} ns is longer than a week", c.duration_ns));
      return text(body + kSdkCollectiveBody, algo_len, "algorithm", c.algorithm);
    }
    case SdkRecordType::kKernel: {
      if (body_size < kSdkKernelBody)
        return bad(fmt::format("body of {} bytes is shorter than {}", body_size, kSdkKernelBody));
      size_t name_len = body[8];
      if (name_len < 1 || name_len > kSdkMaxKernelNameBytes)
        return bad(
            fmt::format("kernel name length {} (must be 1..{})", name_len, kSdkMaxKernelNameBytes));
      ANXIN_TRY(exact(kSdkKernelBody + name_len));
      if (!std::holds_alternative<SdkKernel>(event.body)) event.body = SdkKernel{};
      auto& k = std::get<SdkKernel>(event.body);
      k.duration_ns = Get64(body);
      if (k.duration_ns > kSdkMaxDurationNs)
        return bad(fmt::format("duration {} ns is longer than a week", k.duration_ns));
      return text(body + kSdkKernelBody, name_len, "kernel name", k.name);
    }
    case SdkRecordType::kHeartbeat: {
      ANXIN_TRY(exact(kSdkHeartbeatBody));
      event.body = SdkHeartbeat{};
      return Ok();
    }
    case SdkRecordType::kCheckpoint: {
      if (body_size < kSdkCheckpointBody)
        return bad(
            fmt::format("body of {} bytes is shorter than {}", body_size, kSdkCheckpointBody));
      size_t path_len = Get16(body + 8);
      if (path_len < 1 || path_len > kSdkMaxPathBytes)
        return bad(fmt::format("path length {} (must be 1..{})", path_len, kSdkMaxPathBytes));
      ANXIN_TRY(exact(kSdkCheckpointBody + path_len));
      if (!std::holds_alternative<SdkCheckpoint>(event.body)) event.body = SdkCheckpoint{};
      auto& c = std::get<SdkCheckpoint>(event.body);
      c.step = Get64(body);
      return text(body + kSdkCheckpointBody, path_len, "path", c.path);
    }
    case SdkRecordType::kAllocStats: {
      ANXIN_TRY(exact(kSdkAllocStatsBody));
      SdkAllocStats s;
      s.device = static_cast<int32_t>(Get32(body));
      if (s.device < 0) return bad(fmt::format("negative device {}", s.device));
      if (Get32(body + 4) != 0) return bad("reserved bytes");
      s.reserved_bytes = Get64(body + 8);
      s.allocated_bytes = Get64(body + 16);
      s.peak_reserved_bytes = Get64(body + 24);
      uint64_t bits = Get64(body + 32);
      std::memcpy(&s.fragmentation, &bits, 8);
      if (!(s.fragmentation >= 0.0 && s.fragmentation <= 1.0))  // also refuses NaN
        return bad(fmt::format("fragmentation {} is outside 0..1", s.fragmentation));
      s.ooms = Get64(body + 40);
      s.remaps = Get64(body + 48);
      event.body = s;
      return Ok();
    }
    case SdkRecordType::kRecovery: {
      if (body_size < kSdkRecoveryBody)
        return bad(fmt::format("body of {} bytes is shorter than {}", body_size, kSdkRecoveryBody));
      size_t class_len = body[24];
      if (class_len < 1 || class_len > kSdkMaxFaultClassBytes)
        return bad(fmt::format("fault class length {} (must be 1..{})", class_len,
                               kSdkMaxFaultClassBytes));
      ANXIN_TRY(exact(kSdkRecoveryBody + class_len));
      if (!std::holds_alternative<SdkRecovery>(event.body)) event.body = SdkRecovery{};
      auto& r = std::get<SdkRecovery>(event.body);
      r.restarts_total = Get64(body);
      r.incidents_total = Get64(body + 8);
      r.recovery_ns = Get64(body + 16);
      if (r.recovery_ns > kSdkMaxDurationNs)
        return bad(fmt::format("recovery {} ns is longer than a week", r.recovery_ns));
      const uint8_t* c = body + kSdkRecoveryBody;
      for (size_t i = 0; i < class_len; ++i) {
        if (!((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') || c[i] == '_'))
          return bad("fault class is not [a-z0-9_]");
      }
      r.fault_class.assign(reinterpret_cast<const char*>(c), class_len);
      return Ok();
    }
  }
  return bad("unknown record type");
}

}  // namespace

std::string_view SdkRejectReasonName(SdkRejectReason reason) {
  switch (reason) {
    case SdkRejectReason::kMalformed:
      return "malformed";
    case SdkRejectReason::kTruncated:
      return "truncated";
    case SdkRejectReason::kOversized:
      return "oversized";
    case SdkRejectReason::kUnknownVersion:
      return "unknown_version";
  }
  return "malformed";
}

SdkRejectReason RejectReasonOf(const Error& error) {
  switch (error.code()) {
    case ErrorCode::kDataLoss:
      return SdkRejectReason::kTruncated;
    case ErrorCode::kResourceExhausted:
      return SdkRejectReason::kOversized;
    case ErrorCode::kUnimplemented:
      return SdkRejectReason::kUnknownVersion;
    default:
      return SdkRejectReason::kMalformed;
  }
}

Status DecodeSdkDatagram(std::span<const uint8_t> bytes, SdkDatagram& out) {
  const size_t n = bytes.size();
  const uint8_t* p = bytes.data();
  if (n > kSdkMaxDatagramBytes)
    return ResourceExhausted(
        fmt::format("datagram of {} bytes is over the limit of {}", n, kSdkMaxDatagramBytes));
  if (std::memcmp(p, kSdkMagic, std::min<size_t>(n, 4)) != 0)
    return Malformed(0, "not an anxin telemetry datagram (magic is not \"ANXT\")");
  if (n < 6) return Truncated(0, fmt::format("{} bytes, the header alone is {}", n, 48));
  uint16_t version = Get16(p + 4);
  if (version != kSdkWireVersion)
    return Unimplemented(fmt::format("offset 4: wire format version {}; this receiver reads {}",
                                     version, kSdkWireVersion));
  if (n < kSdkHeaderBytes)
    return Truncated(0, fmt::format("{} bytes, the header alone is {}", n, kSdkHeaderBytes));

  size_t count = Get16(p + 6);
  if (count < 1 || count > kSdkMaxRecords)
    return Malformed(6, fmt::format("record count {} (must be 1..{})", count, kSdkMaxRecords));
  SdkSender& s = out.sender;
  s.pid = Get32(p + 8);
  s.rank = static_cast<int32_t>(Get32(p + 12));
  s.world_size = static_cast<int32_t>(Get32(p + 16));
  if (s.world_size < 1 || s.world_size > kSdkMaxWorldSize)
    return Malformed(16,
                     fmt::format("world size {} (must be 1..{})", s.world_size, kSdkMaxWorldSize));
  if (s.rank < 0 || s.rank >= s.world_size)
    return Malformed(12, fmt::format("rank {} outside world size {}", s.rank, s.world_size));
  size_t job_len = p[20];
  if (job_len < 1 || job_len > kSdkMaxJobIdBytes)
    return Malformed(20,
                     fmt::format("job id length {} (must be 1..{})", job_len, kSdkMaxJobIdBytes));
  if (p[21] != 0 || p[22] != 0 || p[23] != 0) return Malformed(21, "reserved header bytes");
  s.sequence = Get64(p + 24);
  s.dropped_total = Get64(p + 32);
  s.unsent_total = Get64(p + 40);
  if (n < kSdkHeaderBytes + job_len)
    return Truncated(kSdkHeaderBytes, fmt::format("job id of {} bytes", job_len));
  for (size_t i = 0; i < job_len; ++i) {
    if (!IsJobIdChar(p[kSdkHeaderBytes + i]))
      return Malformed(kSdkHeaderBytes + i,
                       "job id holds a byte that is not printable ASCII (or is '\"' or '\\')");
  }
  s.job.assign(reinterpret_cast<const char*>(p + kSdkHeaderBytes), job_len);

  // Grow but never shrink, so that the strings inside keep their storage.
  if (out.events.size() < count) out.events.resize(count);
  size_t at = kSdkHeaderBytes + job_len;
  for (size_t r = 0; r < count; ++r) {
    if (n - at < kSdkRecordHeaderBytes)
      return Truncated(at, fmt::format("record {} of {} has no room for its header", r + 1, count));
    uint8_t type = p[at];
    if (type < 1 || type > kSdkMaxRecordType)
      return Malformed(at, fmt::format("record {}: unknown type {}", r + 1, type));
    auto where = [&] { return fmt::format("record {} ({})", r + 1, kRecordNames[type]); };
    if (p[at + 1] != 0) return Malformed(at + 1, fmt::format("{}: reserved byte", where()));
    size_t size = Get16(p + at + 2);
    if (size < kSdkRecordHeaderBytes)
      return Malformed(at + 2,
                       fmt::format("{}: size {} is shorter than its header", where(), size));
    if (size > n - at)
      return Truncated(
          at, fmt::format("{}: size {} runs past the end ({} bytes left)", where(), size, n - at));
    SdkEvent& e = out.events[r];
    e.time_ns = Get64(p + at + 4);
    if (e.time_ns == 0) return Malformed(at + 4, fmt::format("{}: time 0", where()));
    ANXIN_TRY(DecodeBody(static_cast<SdkRecordType>(type), p + at + kSdkRecordHeaderBytes,
                         size - kSdkRecordHeaderBytes, at, r, e));
    at += size;
  }
  if (at != n)
    return Malformed(at, fmt::format("{} bytes after the last of {} records", n - at, count));
  out.events.resize(count);
  return Ok();
}

Result<SdkDatagram> DecodeSdkDatagram(std::span<const uint8_t> bytes) {
  SdkDatagram d;
  ANXIN_TRY(DecodeSdkDatagram(bytes, d));
  return d;
}

Result<std::vector<uint8_t>> EncodeSdkDatagram(const SdkDatagram& d) {
  std::vector<uint8_t> buf(kSdkMaxDatagramBytes);
  if (d.sender.job.empty() || d.sender.job.size() > kSdkMaxJobIdBytes)
    return InvalidArgument(
        fmt::format("job id of {} bytes (must be 1..{})", d.sender.job.size(), kSdkMaxJobIdBytes));
  SdkDatagramWriter w(buf.data(), buf.size());
  w.BeginHeader({.pid = d.sender.pid,
                 .rank = d.sender.rank,
                 .world_size = d.sender.world_size,
                 .job = d.sender.job,
                 .sequence = d.sender.sequence,
                 .dropped_total = d.sender.dropped_total,
                 .unsent_total = d.sender.unsent_total});
  for (const SdkEvent& e : d.events) {
    bool added = std::visit(
        [&](const auto& b) -> bool {
          using T = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<T, SdkStepBegin>) {
            return w.AddStepBegin(e.time_ns, b.step);
          } else if constexpr (std::is_same_v<T, SdkStepEnd>) {
            return w.AddStepEnd(e.time_ns, b.step, b.duration_ns);
          } else if constexpr (std::is_same_v<T, SdkCollective>) {
            return b.algorithm.size() <= kSdkMaxAlgorithmBytes &&
                   w.AddCollective(e.time_ns, b.op, b.group_size, b.bytes, b.duration_ns,
                                   b.algorithm);
          } else if constexpr (std::is_same_v<T, SdkKernel>) {
            return b.name.size() <= kSdkMaxKernelNameBytes &&
                   w.AddKernel(e.time_ns, b.duration_ns, b.name);
          } else if constexpr (std::is_same_v<T, SdkHeartbeat>) {
            return w.AddHeartbeat(e.time_ns);
          } else if constexpr (std::is_same_v<T, SdkCheckpoint>) {
            return b.path.size() <= kSdkMaxPathBytes && w.AddCheckpoint(e.time_ns, b.step, b.path);
          } else if constexpr (std::is_same_v<T, SdkRecovery>) {
            return b.fault_class.size() <= kSdkMaxFaultClassBytes &&
                   w.AddRecovery(e.time_ns, b.restarts_total, b.incidents_total, b.recovery_ns,
                                 b.fault_class);
          } else {
            return w.AddAllocStats(e.time_ns, b);
          }
        },
        e.body);
    if (!added)
      return InvalidArgument(fmt::format("event {} ({}) does not fit in one datagram",
                                         &e - d.events.data() + 1, SdkEventTypeName(e.body)));
  }
  buf.resize(w.Finish());
  // The encoder writes what it is given; the decoder says whether that is valid.
  SdkDatagram check;
  ANXIN_TRY(DecodeSdkDatagram(buf, check));
  return buf;
}

std::string_view SdkCollectiveOpName(SdkCollectiveOp op) {
  switch (op) {
    case SdkCollectiveOp::kAllReduce:
      return "all_reduce";
    case SdkCollectiveOp::kAllGather:
      return "all_gather";
    case SdkCollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case SdkCollectiveOp::kAllToAll:
      return "all_to_all";
    case SdkCollectiveOp::kBroadcast:
      return "broadcast";
    case SdkCollectiveOp::kReduce:
      return "reduce";
    case SdkCollectiveOp::kSendRecv:
      return "send_recv";
    case SdkCollectiveOp::kBarrier:
      return "barrier";
    case SdkCollectiveOp::kOther:
      return "other";
  }
  return "other";
}

std::string_view SdkEventTypeName(const SdkEventBody& body) {
  return kRecordNames[body.index() + 1];
}

double BusBandwidthFactor(SdkCollectiveOp op, int64_t n) {
  if (n < 1) n = 1;
  double nd = static_cast<double>(n);
  switch (op) {
    case SdkCollectiveOp::kAllReduce:
      return 2.0 * (nd - 1) / nd;
    case SdkCollectiveOp::kAllGather:
    case SdkCollectiveOp::kReduceScatter:
    case SdkCollectiveOp::kAllToAll:
      return (nd - 1) / nd;
    case SdkCollectiveOp::kBarrier:
      return 0.0;
    case SdkCollectiveOp::kBroadcast:
    case SdkCollectiveOp::kReduce:
    case SdkCollectiveOp::kSendRecv:
    case SdkCollectiveOp::kOther:
      return 1.0;
  }
  return 1.0;
}

bool IsCleanUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    size_t len = SdkCleanCharLength(p, s.size(), i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace anxin::monitor
