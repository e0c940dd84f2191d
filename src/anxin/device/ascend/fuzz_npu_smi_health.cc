// Fuzzes ParseNpuSmiHealth (the `npu-smi info -t health` parser). Seeded with
// the real captures in tests/fixtures/ascend/. Besides "no crash, hang or
// sanitizer report", a reading that succeeds must be what every "Health
// Status" line of the input says (found here by an independent scan): one
// chip's output, never the first of two that disagree.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "anxin/base/strings.h"
#include "anxin/device/ascend/npu_smi.h"
#include "anxin/device/ascend/npu_smi_testing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = anxin::device::ascend::ParseNpuSmiHealth(text);
  if (!r) return 0;
  for (std::string_view line : anxin::SplitLines(text)) {
    auto kv = anxin::device::ascend::testing::SplitKeyValue(line);
    if (!kv || kv->key != "health status") continue;
    std::string_view value = kv->value;
    if (value != r->health) {
      std::fprintf(stderr, "read health '%s', but a line says '%.*s'\n", r->health.c_str(),
                   static_cast<int>(value.size()), value.data());
      std::abort();
    }
  }
  return 0;
}
