// gtest matchers for Result and Status.
//
//   EXPECT_THAT(LoadScenario("ok.yaml"), IsOk());
//   EXPECT_THAT(LoadScenario("bad.yaml"), HasCode(ErrorCode::kInvalidArgument));
//   EXPECT_THAT(r, HasCode(ErrorCode::kInvalidArgument, HasSubstr("line 3")));
#ifndef ANXIN_BASE_TESTING_H_
#define ANXIN_BASE_TESTING_H_

#include <gmock/gmock.h>

#include "anxin/base/error.h"

namespace anxin::testing {

MATCHER(IsOk, "is ok") {
  if (arg.has_value()) return true;
  *result_listener << "error: " << arg.error().ToString();
  return false;
}

MATCHER_P(HasCode, code,
          std::string("is an error with code ") + std::string(::anxin::ErrorCodeName(code))) {
  if (arg.has_value()) {
    *result_listener << "is ok";
    return false;
  }
  *result_listener << "error: " << arg.error().ToString();
  return arg.error().code() == code;
}

MATCHER_P2(HasCode, code, message_matcher,
           std::string("is an error with code ") + std::string(::anxin::ErrorCodeName(code))) {
  if (arg.has_value()) {
    *result_listener << "is ok";
    return false;
  }
  *result_listener << "error: " << arg.error().ToString();
  return arg.error().code() == code &&
         ::testing::ExplainMatchResult(message_matcher, arg.error().Describe(), result_listener);
}

}  // namespace anxin::testing

#endif  // ANXIN_BASE_TESTING_H_
