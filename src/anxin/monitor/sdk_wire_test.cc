#include "anxin/monitor/sdk_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "anxin/base/testing.h"

namespace anxin::monitor {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

constexpr uint64_t kT = 1'764'000'000'000'000'000ULL;  // 2025-11-24, ns

SdkDatagram Sample() {
  SdkDatagram d;
  d.sender = {.pid = 4242,
              .rank = 3,
              .world_size = 8,
              .job = "llama-7b/run-2",
              .sequence = 17,
              .dropped_total = 2,
              .unsent_total = 5};
  d.events.push_back({kT + 1, SdkStepBegin{100}});
  d.events.push_back({kT + 2, SdkStepEnd{100, 250'000'000}});
  d.events.push_back(
      {kT + 3, SdkCollective{SdkCollectiveOp::kAllReduce, 0, 1 << 30, 12'000'000, "ring"}});
  d.events.push_back({kT + 4, SdkKernel{1'500'000, "flash_attn_fwd<bf16, 128>"}});
  d.events.push_back({kT + 5, SdkHeartbeat{}});
  d.events.push_back({kT + 6, SdkCheckpoint{100, "/ckpt/iter_0000100"}});
  d.events.push_back({kT + 7, SdkAllocStats{.device = 3,
                                            .reserved_bytes = 60ULL << 30,
                                            .allocated_bytes = 50ULL << 30,
                                            .peak_reserved_bytes = 62ULL << 30,
                                            .fragmentation = 0.125,
                                            .ooms = 1,
                                            .remaps = 9}});
  d.events.push_back({kT + 8, SdkRecovery{.restarts_total = 4,
                                          .incidents_total = 2,
                                          .recovery_ns = 12'500'000'000,
                                          .fault_class = "collective_timeout"}});
  return d;
}

std::vector<uint8_t> Encode(const SdkDatagram& d) {
  auto bytes = EncodeSdkDatagram(d);
  EXPECT_THAT(bytes, IsOk());
  return bytes ? *bytes : std::vector<uint8_t>{};
}

// Offset of the i-th record (0-based) in an encoding of Sample().
size_t RecordOffset(const std::vector<uint8_t>& b, size_t i) {
  size_t at = kSdkHeaderBytes + b[20];
  for (size_t k = 0; k < i; ++k) at += b[at + 2] | (b[at + 3] << 8);
  return at;
}

TEST(SdkWireTest, EveryRecordTypeRoundTrips) {
  SdkDatagram in = Sample();
  std::vector<uint8_t> bytes = Encode(in);
  auto out = DecodeSdkDatagram(bytes);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->sender.pid, 4242u);
  EXPECT_EQ(out->sender.rank, 3);
  EXPECT_EQ(out->sender.world_size, 8);
  EXPECT_EQ(out->sender.job, "llama-7b/run-2");
  EXPECT_EQ(out->sender.sequence, 17u);
  EXPECT_EQ(out->sender.dropped_total, 2u);
  EXPECT_EQ(out->sender.unsent_total, 5u);
  ASSERT_EQ(out->events.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(out->events[i].time_ns, kT + 1 + i);
    EXPECT_EQ(out->events[i].body.index(), i);
  }
  EXPECT_EQ(std::get<SdkStepBegin>(out->events[0].body).step, 100u);
  EXPECT_EQ(std::get<SdkStepEnd>(out->events[1].body).duration_ns, 250'000'000u);
  const auto& c = std::get<SdkCollective>(out->events[2].body);
  EXPECT_EQ(c.op, SdkCollectiveOp::kAllReduce);
  EXPECT_EQ(c.bytes, 1u << 30);
  EXPECT_EQ(c.duration_ns, 12'000'000u);
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_EQ(std::get<SdkKernel>(out->events[3].body).name, "flash_attn_fwd<bf16, 128>");
  EXPECT_EQ(std::get<SdkCheckpoint>(out->events[5].body).path, "/ckpt/iter_0000100");
  const auto& a = std::get<SdkAllocStats>(out->events[6].body);
  EXPECT_EQ(a.device, 3);
  EXPECT_EQ(a.allocated_bytes, 50ULL << 30);
  EXPECT_EQ(a.fragmentation, 0.125);
  EXPECT_EQ(a.remaps, 9u);
  const auto& rec = std::get<SdkRecovery>(out->events[7].body);
  EXPECT_EQ(rec.restarts_total, 4u);
  EXPECT_EQ(rec.incidents_total, 2u);
  EXPECT_EQ(rec.recovery_ns, 12'500'000'000u);
  EXPECT_EQ(rec.fault_class, "collective_timeout");
  // Canonical: encoding what was decoded gives the same bytes.
  EXPECT_EQ(Encode(*out), bytes);
}

TEST(SdkWireTest, DecodingIntoOneObjectReplacesItsContents) {
  SdkDatagram d;
  ASSERT_THAT(DecodeSdkDatagram(Encode(Sample()), d), IsOk());
  SdkDatagram small;
  small.sender = {.pid = 1, .rank = 0, .world_size = 1, .job = "j"};
  small.events.push_back({kT, SdkKernel{5, "k"}});
  ASSERT_THAT(DecodeSdkDatagram(Encode(small), d), IsOk());
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(std::get<SdkKernel>(d.events[0].body).name, "k");
  EXPECT_EQ(d.sender.job, "j");
}

TEST(SdkWireTest, EveryShorterPrefixIsRefused) {
  std::vector<uint8_t> bytes = Encode(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = DecodeSdkDatagram(std::span(bytes.data(), n));
    ASSERT_FALSE(r.has_value()) << "prefix of " << n << " bytes accepted";
    SdkRejectReason why = RejectReasonOf(r.error());
    // A cut inside a record's body can also leave a record count that the
    // bytes cannot hold: truncated either way, never "ok".
    EXPECT_EQ(why, SdkRejectReason::kTruncated) << n << ": " << r.error().Describe();
  }
}

TEST(SdkWireTest, OversizedDatagramIsRefused) {
  std::vector<uint8_t> bytes(kSdkMaxDatagramBytes + 1, 0);
  auto r = DecodeSdkDatagram(bytes);
  ASSERT_THAT(r, HasCode(ErrorCode::kResourceExhausted, HasSubstr("65537 bytes")));
  EXPECT_EQ(RejectReasonOf(r.error()), SdkRejectReason::kOversized);
}

TEST(SdkWireTest, UnknownVersionIsRefused) {
  std::vector<uint8_t> bytes = Encode(Sample());
  bytes[4] = 2;
  auto r = DecodeSdkDatagram(bytes);
  ASSERT_THAT(r, HasCode(ErrorCode::kUnimplemented, HasSubstr("version 2")));
  EXPECT_EQ(RejectReasonOf(r.error()), SdkRejectReason::kUnknownVersion);
  EXPECT_EQ(SdkRejectReasonName(RejectReasonOf(r.error())), "unknown_version");
}

// One byte changed at a time; each must be refused as malformed with a
// message naming the rule.
struct Corruption {
  const char* name;
  size_t record;  // SIZE_MAX: a header offset
  size_t offset;  // within the header, or within the record
  uint8_t value;
  const char* message;
};

class SdkWireCorruptionTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(SdkWireCorruptionTest, IsMalformed) {
  const Corruption& c = GetParam();
  std::vector<uint8_t> bytes = Encode(Sample());
  size_t at = c.record == SIZE_MAX ? c.offset : RecordOffset(bytes, c.record) + c.offset;
  bytes[at] = c.value;
  auto r = DecodeSdkDatagram(bytes);
  ASSERT_FALSE(r.has_value()) << c.name;
  EXPECT_EQ(RejectReasonOf(r.error()), SdkRejectReason::kMalformed) << r.error().Describe();
  EXPECT_THAT(r.error().Describe(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, SdkWireCorruptionTest,
    ::testing::Values(Corruption{"magic", SIZE_MAX, 0, 'B', "magic"},
                      Corruption{"zero records", SIZE_MAX, 6, 0, "record count 0"},
                      Corruption{"rank past world", SIZE_MAX, 12, 8, "rank 8 outside world size 8"},
                      Corruption{"negative rank", SIZE_MAX, 15, 0xff, "outside world size"},
                      Corruption{"world size 0", SIZE_MAX, 16, 0, "world size 0"},
                      Corruption{"empty job id", SIZE_MAX, 20, 0, "job id length 0"},
                      Corruption{"job id too long", SIZE_MAX, 20, 65, "job id length 65"},
                      Corruption{"reserved header", SIZE_MAX, 22, 1, "reserved header"},
                      Corruption{"quote in job id", SIZE_MAX, 50, '"', "printable ASCII"},
                      Corruption{"newline in job id", SIZE_MAX, 50, '\n', "printable ASCII"},
                      Corruption{"record type 0", 0, 0, 0, "unknown type 0"},
                      Corruption{"record type 9", 0, 0, 9, "unknown type 9"},
                      Corruption{"record reserved", 1, 1, 1, "reserved byte"},
                      Corruption{"record size below header", 0, 2, 4, "shorter than its header"},
                      Corruption{"step body too long", 0, 2, 21, "body of 9 bytes, expected 8"},
                      Corruption{"op 0", 2, 12, 0, "unknown collective op 0"},
                      Corruption{"op 10", 2, 12, 10, "unknown collective op 10"},
                      Corruption{"algorithm too long", 2, 13, 33, "algorithm length 33"},
                      Corruption{"algorithm control char", 2, 36, 0x07, "algorithm is not UTF-8"},
                      Corruption{"collective reserved", 2, 14, 1, "reserved bytes"},
                      Corruption{"group size huge", 2, 19, 0x7f, "group size"},
                      Corruption{"kernel duration over a week", 3, 19, 0x7f, "longer than a week"},
                      Corruption{"kernel name length 0", 3, 20, 0, "kernel name length 0"},
                      Corruption{"kernel name not UTF-8", 3, 21, 0xff, "kernel name is not UTF-8"},
                      Corruption{"heartbeat with a body", 4, 2, 13, "body of 1 bytes, expected 0"},
                      Corruption{"checkpoint path length 0", 5, 20, 0, "path length 0"},
                      Corruption{"checkpoint path DEL", 5, 22, 0x7f, "path is not UTF-8"},
                      Corruption{"negative device", 6, 15, 0x80, "negative device"},
                      Corruption{"fragmentation above 1", 6, 51, 0x40, "fragmentation"},
                      Corruption{"alloc reserved", 6, 16, 1, "reserved bytes"},
                      Corruption{"recovery over a week", 7, 35, 0x7f, "longer than a week"},
                      Corruption{"fault class length 0", 7, 36, 0, "fault class length 0"},
                      Corruption{"fault class length 33", 7, 36, 33, "fault class length 33"},
                      Corruption{"fault class upper case", 7, 37, 'C', "fault class is not"},
                      Corruption{"fault class space", 7, 40, ' ', "fault class is not"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(SdkWireTest, MoreRecordsThanBytesIsTruncated) {
  std::vector<uint8_t> bytes = Encode(Sample());
  bytes[6] = 9;
  auto r = DecodeSdkDatagram(bytes);
  ASSERT_THAT(r, HasCode(ErrorCode::kDataLoss, HasSubstr("record 9 of 9 has no room")));
  EXPECT_EQ(RejectReasonOf(r.error()), SdkRejectReason::kTruncated);
}

TEST(SdkWireTest, TimeZeroAndTrailingBytesAreMalformed) {
  std::vector<uint8_t> bytes = Encode(Sample());
  size_t hb = RecordOffset(bytes, 4);
  for (int i = 0; i < 8; ++i) bytes[hb + 4 + i] = 0;
  EXPECT_THAT(DecodeSdkDatagram(bytes), HasCode(ErrorCode::kInvalidArgument, HasSubstr("time 0")));

  bytes = Encode(Sample());
  bytes.push_back(0);
  EXPECT_THAT(DecodeSdkDatagram(bytes),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("1 bytes after the last of 8")));
}

TEST(SdkWireTest, FragmentationNaNIsMalformed) {
  SdkDatagram d = Sample();
  std::get<SdkAllocStats>(d.events[6].body).fragmentation = std::nan("");
  EXPECT_THAT(EncodeSdkDatagram(d),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("fragmentation nan")));
}

TEST(SdkWireTest, EncoderRefusesWhatDoesNotFit) {
  SdkDatagram d = Sample();
  std::get<SdkKernel>(d.events[3].body).name = std::string(97, 'k');
  EXPECT_THAT(EncodeSdkDatagram(d), HasCode(ErrorCode::kInvalidArgument, HasSubstr("event 4")));

  SdkDatagram big;
  big.sender = {.pid = 1, .rank = 0, .world_size = 1, .job = "j"};
  for (int i = 0; i < 20; ++i)
    big.events.push_back({kT, SdkCheckpoint{1, std::string(kSdkMaxPathBytes, 'p')}});
  EXPECT_THAT(EncodeSdkDatagram(big), HasCode(ErrorCode::kInvalidArgument, HasSubstr("fit")));
}

TEST(SdkWireTest, WriterStopsAtTheRecordLimit) {
  std::vector<uint8_t> buf(kSdkMaxDatagramBytes);
  SdkDatagramWriter w(buf.data(), buf.size());
  w.BeginHeader({.pid = 1, .rank = 0, .world_size = 1, .job = "j"});
  size_t added = 0;
  while (w.AddHeartbeat(kT)) ++added;
  EXPECT_EQ(added, kSdkMaxRecords);
  size_t n = w.Finish();
  auto d = DecodeSdkDatagram(std::span(buf.data(), n));
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->events.size(), kSdkMaxRecords);
}

TEST(SdkWireTest, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kBarrier, 8), 0.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(SdkCollectiveOp::kAllReduce, 0), 0.0);
}

TEST(SdkWireTest, CleanUtf8) {
  EXPECT_TRUE(IsCleanUtf8(""));
  EXPECT_TRUE(IsCleanUtf8("matmul_bf16"));
  EXPECT_TRUE(IsCleanUtf8("\xe6\xa0\xb8\xe5\x87\xbd\xe6\x95\xb0"));  // 核函数
  EXPECT_TRUE(IsCleanUtf8("\xf0\x9f\x98\x80"));                      // U+1F600
  EXPECT_FALSE(IsCleanUtf8("a\tb"));
  EXPECT_FALSE(IsCleanUtf8(std::string_view("a\0b", 3)));
  EXPECT_FALSE(IsCleanUtf8("\x7f"));
  EXPECT_FALSE(IsCleanUtf8("\xc2\x85"));          // U+0085, a C1 control
  EXPECT_FALSE(IsCleanUtf8("\xc2\x80"));          // U+0080, the first C1 control
  EXPECT_FALSE(IsCleanUtf8("\xc2\x9f"));          // U+009F, the last
  EXPECT_TRUE(IsCleanUtf8("\xc2\xa0"));           // U+00A0, the first after them
  EXPECT_FALSE(IsCleanUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsCleanUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsCleanUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsCleanUtf8("\xe6\xa0"));          // cut short
  EXPECT_FALSE(IsCleanUtf8("\x80"));
}

TEST(SdkWireTest, Names) {
  EXPECT_EQ(SdkCollectiveOpName(SdkCollectiveOp::kAllReduce), "all_reduce");
  EXPECT_EQ(SdkCollectiveOpName(SdkCollectiveOp::kAllToAll), "all_to_all");
  EXPECT_EQ(SdkEventTypeName(SdkKernel{}), "kernel");
  EXPECT_EQ(SdkEventTypeName(SdkAllocStats{}), "alloc_stats");
  EXPECT_EQ(SdkEventTypeName(SdkRecovery{}), "recovery");
}

}  // namespace
}  // namespace anxin::monitor
