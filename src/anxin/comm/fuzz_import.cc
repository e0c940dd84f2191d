// libFuzzer target: the nccl-tests, hccl_test and JSON readers of
// `anxin bench comm import` on arbitrary bytes must return a result or an
// error, never crash. Seeds: tests/fixtures/comm/ (real outputs).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/comm/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)anxin::comm::ImportText(text, "fuzz", {});
  (void)anxin::comm::ImportText(text, "fuzz", {.ranks = 4});
  return 0;
}
