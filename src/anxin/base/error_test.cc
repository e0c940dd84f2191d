#include "anxin/base/error.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

Result<int> Parse(int x) {
  if (x < 0) return InvalidArgument("negative value " + std::to_string(x));
  return x * 2;
}

Result<int> Twice(int x) {
  ANXIN_ASSIGN_OR_RETURN(int a, Parse(x));
  ANXIN_ASSIGN_OR_RETURN(int b, Parse(a));
  return b;
}

Status Check(int x) {
  ANXIN_TRY(Parse(x));
  return Ok();
}

TEST(ErrorTest, MacrosPropagateValuesAndErrors) {
  EXPECT_EQ(Twice(3).value(), 12);
  EXPECT_THAT(Twice(-1), HasCode(ErrorCode::kInvalidArgument, HasSubstr("negative value -1")));
  EXPECT_THAT(Check(1), IsOk());
  EXPECT_THAT(Check(-5), Not(IsOk()));
}

TEST(ErrorTest, ContextChainReadsOutermostFirst) {
  Error e(ErrorCode::kNotFound, "no such device 9");
  e.With("sampling").With("agent");
  EXPECT_EQ(e.Describe(), "agent: sampling: no such device 9");
  EXPECT_EQ(e.ToString(), "not found: agent: sampling: no such device 9");
}

TEST(ErrorTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoError(ENOENT, "open x").code(), ErrorCode::kNotFound);
  EXPECT_EQ(ErrnoError(EACCES, "open x").code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError(ENOSPC, "write x").code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(ErrnoError(ENOENT, "open x").message(), HasSubstr("open x: No such file"));
}

TEST(ErrorTest, ExitCodes) {
  EXPECT_EQ(ExitCodeFor(Error(ErrorCode::kInvalidArgument, "")), 2);
  EXPECT_EQ(ExitCodeFor(Error(ErrorCode::kDataLoss, "")), 2);
  EXPECT_EQ(ExitCodeFor(Error(ErrorCode::kUnavailable, "")), 3);
  EXPECT_EQ(ExitCodeFor(Error(ErrorCode::kUnimplemented, "")), 3);
}

}  // namespace
}  // namespace anxin
