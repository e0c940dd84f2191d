#include "anxin/base/dynamic_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

#include "anxin/base/testing.h"

namespace anxin {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

TEST(DynamicLibraryTest, LibraryPathPrefersTheOptionThenTheEnvironment) {
  const char* var = "ANXIN_DYNAMIC_LIBRARY_TEST_PATH";
  unsetenv(var);
  EXPECT_EQ(LibraryPath("", var, "libx.so.1"), "libx.so.1");
  setenv(var, "", 1);  // set but empty: as if unset
  EXPECT_EQ(LibraryPath("", var, "libx.so.1"), "libx.so.1");
  setenv(var, "/opt/x/libx.so.1", 1);
  EXPECT_EQ(LibraryPath("", var, "libx.so.1"), "/opt/x/libx.so.1");
  EXPECT_EQ(LibraryPath("/usr/lib/libx.so", var, "libx.so.1"), "/usr/lib/libx.so");
  unsetenv(var);
}

TEST(DynamicLibraryTest, LoadsFunctionsOfARealLibrary) {
  Result<void*> lib = OpenLibrary("test", "libc.so.6", "");
  ASSERT_THAT(lib, IsOk());
  size_t (*length)(const char*) = nullptr;
  ASSERT_TRUE(LoadSymbol(*lib, "strlen", length));
  EXPECT_EQ(length("anxin"), 5u);
  EXPECT_FALSE(LoadSymbol(*lib, "anxin_no_such_function", length));
  EXPECT_EQ(length, nullptr);
  dlclose(*lib);
}

TEST(DynamicLibraryTest, AMissingLibraryNamesItselfTheReasonAndTheAdvice) {
  EXPECT_THAT(OpenLibrary("nvml", "/nonexistent/libnvidia-ml.so.1", "install the NVIDIA driver"),
              HasCode(ErrorCode::kUnavailable,
                      "nvml: cannot load /nonexistent/libnvidia-ml.so.1 (/nonexistent/"
                      "libnvidia-ml.so.1: cannot open shared object file: No such file or "
                      "directory): install the NVIDIA driver"));
}

TEST(DynamicLibraryTest, WhoAndAdviceAreLeftOutWhenEmpty) {
  EXPECT_THAT(OpenLibrary("", "libanxin-no-such.so", ""),
              HasCode(ErrorCode::kUnavailable,
                      "cannot load libanxin-no-such.so (libanxin-no-such.so: cannot open shared "
                      "object file: No such file or directory)"));
  EXPECT_THAT(OpenLibrary("", "libanxin-no-such.so", "", RTLD_GLOBAL),
              HasCode(ErrorCode::kUnavailable, HasSubstr("cannot load libanxin-no-such.so")));
}

}  // namespace
}  // namespace anxin
