#include "anxin/kernels/precision.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "anxin/base/testing.h"

namespace anxin::kernels {
namespace {

using ::anxin::testing::FixturePath;
using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

std::multiset<std::pair<std::string, std::string>> Flags(const PrecisionReport& r) {
  std::multiset<std::pair<std::string, std::string>> s;
  for (const PrecisionFinding& f : r.findings) s.insert({f.kind, f.tensor});
  return s;
}

TEST(CheckPrecision, FlagsEachBreachOfThePolicy) {
  auto r = CheckPrecision(FixturePath("kernels/precision-dump"), {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(Flags(*r), (std::multiset<std::pair<std::string, std::string>>{
                           {"fp16-overflow", "Module.fc1.Linear.forward.0.output.0"},
                           {"master-not-fp32", "Module.fc1.Linear.forward.0.parameters.weight"},
                           {"fp16-underflow", "Module.fc1.Linear.backward.0.input.0"},
                           {"update-lost", "Module.fc1.Linear.parameters_grad.0.weight"},
                       }));
  EXPECT_EQ(r->weights, 2u);
  EXPECT_EQ(r->gradients, 4u);
  EXPECT_EQ(r->activations, 4u);
  // A larger learning rate moves the weight: no update is lost.
  PrecisionOptions big_lr;
  big_lr.learning_rate = 1.0;
  auto r2 = CheckPrecision(FixturePath("kernels/precision-dump"), big_lr);
  ASSERT_THAT(r2, IsOk());
  for (const PrecisionFinding& f : r2->findings) EXPECT_NE(f.kind, "update-lost");
  // As if switched to half formats: the float32 bias's update is lost too.
  PrecisionOptions half;
  half.as_half = true;
  auto r3 = CheckPrecision(FixturePath("kernels/precision-dump"), half);
  ASSERT_THAT(r3, IsOk());
  EXPECT_EQ(Flags(*r3).count({"update-lost", "Module.fc1.Linear.parameters_grad.0.bias"}), 1u);
}

TEST(CheckPrecision, RealFloat32DumpIsCleanAndJudgedAsHalf) {
  // A real ResNet dump, float32 throughout: nothing breaks the policy.
  auto r = CheckPrecision(FixturePath("msprobe/gpu_dump/step0/proc2016"), {});
  ASSERT_THAT(r, IsOk());
  EXPECT_GT(r->tensors, 1000u);
  EXPECT_GT(r->weights, 50u);
  EXPECT_TRUE(r->findings.empty()) << PrecisionText(*r);
  // Its statistics judged as float16 activations and bfloat16 weights.
  PrecisionOptions half;
  half.as_half = true;
  auto h = CheckPrecision(FixturePath("msprobe/gpu_dump/step0/proc2016"), half);
  ASSERT_THAT(h, IsOk());
  for (const PrecisionFinding& f : h->findings) {
    EXPECT_THAT(f.kind, ::testing::AnyOf("fp16-overflow", "fp16-underflow", "update-lost"));
  }
}

TEST(CheckPrecision, RejectsWhatIsNotADump) {
  testing::TempDir dir;
  EXPECT_THAT(CheckPrecision(dir.path(), {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("no dump.json")));
  EXPECT_THAT(CheckPrecision(dir.path() + "/nope", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("not a directory")));
  PrecisionOptions bad;
  bad.learning_rate = 0;
  EXPECT_THAT(CheckPrecision(FixturePath("kernels/precision-dump"), bad),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("--lr")));
  dir.Write("dump.json", "{\"data\": ");
  EXPECT_FALSE(CheckPrecision(dir.path(), {}).has_value());
}

TEST(CheckPrecision, ReadsTensorDataWhenDumped) {
  compare::Dump d;
  d.path = "mem";
  // A float16 activation whose non-zero values are mostly subnormal, with data.
  static const uint16_t bits[8] = {0x0001, 0x0002, 0x0010, 0x3c00, 0, 0, 0x0003, 0x0004};
  compare::Tensor t;
  t.name = "Functional.gelu.0.forward.output.0";
  t.dtype = compare::DType::kFloat16;
  t.shape = {8};
  t.data = reinterpret_cast<const uint8_t*>(bits);
  d.tensors.push_back(t);
  PrecisionReport r = CheckDumpPrecision(d, {});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].kind, "fp16-underflow");
  EXPECT_THAT(r.findings[0].detail, HasSubstr("83.3%"));
}

}  // namespace
}  // namespace anxin::kernels
