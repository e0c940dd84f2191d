#include "anxin/mem/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "anxin/base/testing.h"
#include "anxin/mem/replay_report.h"
#include "anxin/mem/trace.h"

namespace anxin::mem {
namespace {

using ::anxin::testing::IsOk;

std::string Snapshot(const std::string& name) {
  return std::string(ANXIN_SOURCE_DIR) + "/tests/fixtures/mem-traces/" + name;
}

double RelDiff(double a, double b) { return std::abs(a - b) / b; }

class RealSnapshotTest : public ::testing::TestWithParam<std::string> {};

// The PyTorch model is a fair baseline only if it behaves like the real
// allocator did: same number of segments created and the same peak reserved,
// within 2%, on each recorded snapshot.
TEST_P(RealSnapshotTest, PyTorchModelReproducesTheRecordedAllocator) {
  auto trace = ReadTrace(Snapshot(GetParam()));
  ASSERT_THAT(trace, IsOk());
  ReplayOptions o;
  o.run_anxin = false;
  auto r = Replay(*trace, o);
  ASSERT_THAT(r, IsOk());
  const PolicyResult* actual = r->Find("pytorch-actual");
  const PolicyResult* model = r->Find("pytorch-model");
  ASSERT_NE(actual, nullptr);
  ASSERT_NE(model, nullptr);
  std::printf("%s: segments %lu (trace) vs %lu (model); peak reserved %lu vs %lu\n",
              GetParam().c_str(), r->trace_segment_allocs, model->device_allocs,
              actual->peak_reserved, model->peak_reserved);
  EXPECT_LE(std::abs(static_cast<double>(model->device_allocs) -
                     static_cast<double>(r->trace_segment_allocs)),
            0.02 * static_cast<double>(r->trace_segment_allocs));
  EXPECT_LE(RelDiff(static_cast<double>(model->peak_reserved),
                    static_cast<double>(actual->peak_reserved)),
            0.02);
}

TEST_P(RealSnapshotTest, AnxinNeverReservesMoreThanPyTorchDid) {
  auto trace = ReadTrace(Snapshot(GetParam()));
  ASSERT_THAT(trace, IsOk());
  ReplayOptions o;
  o.run_model = false;
  auto r = Replay(*trace, o);
  ASSERT_THAT(r, IsOk());
  const PolicyResult* actual = r->Find("pytorch-actual");
  const PolicyResult* anxin = r->Find("anxin");
  ASSERT_NE(anxin, nullptr);
  std::printf(
      "%s: peak live %lu, anxin peak reserved %lu (frag %.4f, unmaps %lu), actual %lu "
      "(frag %.4f)\n",
      GetParam().c_str(), r->peak_live, anxin->peak_reserved, anxin->fragmentation, anxin->unmaps,
      actual->peak_reserved, actual->fragmentation);
  EXPECT_LE(anxin->peak_reserved, actual->peak_reserved);
  EXPECT_EQ(anxin->ooms, 0u);
  EXPECT_GE(anxin->peak_reserved, r->peak_live);
}

TEST(ReplayTest, SmallDeviceCountsOoms) {
  auto trace = ReadTrace(Snapshot("cs336-memory_ctx256_forward_.pickle"));
  ASSERT_THAT(trace, IsOk());
  ReplayOptions o;
  o.capacity = 20 * kGiB;
  auto r = Replay(*trace, o);
  ASSERT_THAT(r, IsOk());
  for (const char* name : {"pytorch-model", "anxin"}) {
    const PolicyResult* p = r->Find(name);
    ASSERT_NE(p, nullptr);
    EXPECT_GT(p->ooms, 0u) << name;
    EXPECT_LE(p->peak_reserved, 20 * kGiB) << name;
    EXPECT_GE(p->fragmentation, 0.0) << name;
  }
  // The report says so first and claims no saving for a policy that failed.
  std::string text = ReplayText(*r);
  EXPECT_THAT(text, ::testing::StartsWith("OOM: pytorch-model failed "));
  EXPECT_THAT(text, ::testing::HasSubstr("\nOOM: anxin failed "));
  EXPECT_THAT(text, ::testing::HasSubstr("within --capacity 20.00 GiB"));
  EXPECT_THAT(text, ::testing::HasSubstr("anxin vs recorded PyTorch: not compared"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("less)")));
}

INSTANTIATE_TEST_SUITE_P(Snapshots, RealSnapshotTest,
                         ::testing::Values("cs336-memory_ctx128_fullstep.pickle",
                                           "cs336-memory_ctx256_forward_.pickle",
                                           "cs336b-memory_forward_bf16_128.pickle"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace anxin::mem
