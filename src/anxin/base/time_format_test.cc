#include "anxin/base/time_format.h"

#include <gtest/gtest.h>

namespace anxin {
namespace {

using namespace std::chrono_literals;
using std::chrono::system_clock;

TEST(TimeFormatTest, Rfc3339WithMillisecondsInUtc) {
  const auto t = system_clock::from_time_t(1796218130) + 250ms;
  EXPECT_EQ(FormatRfc3339(t), "2026-12-02T13:28:50.250Z");
  EXPECT_EQ(FormatRfc3339(t + 999us), "2026-12-02T13:28:50.250Z");  // finer digits dropped
  EXPECT_EQ(FormatRfc3339(system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(system_clock::from_time_t(1'800'000'000) + 7ms),
            "2027-01-15T08:00:00.007Z");
}

TEST(TimeFormatTest, Rfc3339WithSeconds) {
  const auto t = system_clock::from_time_t(1796218130) + 999ms;
  EXPECT_EQ(FormatRfc3339(t, TimePrecision::kSeconds), "2026-12-02T13:28:50Z");
  EXPECT_EQ(FormatRfc3339(system_clock::from_time_t(951782400), TimePrecision::kSeconds),
            "2000-02-29T00:00:00Z");
}

TEST(TimeFormatTest, BeforeTheEpochCountsDown) {
  EXPECT_EQ(FormatRfc3339(system_clock::time_point{} - 500ms), "1969-12-31T23:59:59.500Z");
  EXPECT_EQ(FormatRfc3339(system_clock::time_point{} - 500ms, TimePrecision::kSeconds),
            "1969-12-31T23:59:59Z");
}

}  // namespace
}  // namespace anxin
