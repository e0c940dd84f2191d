// Fuzzes ParseHccnLink (the `hccn_tool -link -g` parser). Seeded with the
// real captures in tests/fixtures/ascend/. Besides "no crash, hang or
// sanitizer report", a reading that succeeds must be what every
// "link status" line of the input says (found here by an independent scan):
// one port's output, never the first of two that disagree.
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
  auto r = anxin::device::ascend::ParseHccnLink(text);
  if (!r) return 0;
  int lines = 0;
  for (std::string_view line : anxin::SplitLines(text)) {
    auto kv = anxin::device::ascend::testing::SplitKeyValue(line);
    if (!kv || kv->key != "link status") continue;
    ++lines;
    std::string value = anxin::ToLower(kv->value);
    if (value != (*r ? "up" : "down")) {
      std::fprintf(stderr, "read %s, but a line says '%s'\n", *r ? "UP" : "DOWN", value.c_str());
      std::abort();
    }
  }
  if (lines == 0) {
    std::fprintf(stderr, "read a link status from an input without a 'link status' line\n");
    std::abort();
  }
  return 0;
}
