// Fuzzes ParseNpuSmiUsages (the `npu-smi info -t usages` parser). Seeded with
// the real captures in tests/fixtures/ascend/. Besides "no crash, hang or
// sanitizer report", every value a successful reading holds must be the one
// every line with that key prints (found here by an independent scan): one
// chip's output, never a mix of two.
#include <bit>
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
  auto r = anxin::device::ascend::ParseNpuSmiUsages(text);
  if (!r) return 0;
  for (std::string_view line : anxin::SplitLines(text)) {
    auto kv = anxin::device::ascend::testing::SplitKeyValue(line);
    if (!kv) continue;
    auto it = r->values.find(kv->key);
    if (it == r->values.end()) continue;
    // The value read is the one on this line (compared as bits: g++'s
    // comparison tracing of doubles has no hook in libFuzzer's runtime).
    auto again = anxin::device::ascend::ParseNpuSmiUsages(std::string(line) + "\n");
    if (!again || again->values.size() != 1 ||
        std::bit_cast<uint64_t>(again->values.begin()->second) !=
            std::bit_cast<uint64_t>(it->second)) {
      std::fprintf(stderr, "read %s = %g, but a line says '%.*s'\n", kv->key.c_str(), it->second,
                   static_cast<int>(kv->value.size()), kv->value.data());
      std::abort();
    }
  }
  return 0;
}
