// Fuzzes ParseNpuSmiHealth (the `npu-smi info -t health` parser): any bytes give a result or an
// error, never a crash, a hang or a sanitizer report. Seeded with the real
// captures in tests/fixtures/ascend/.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/device/ascend/npu_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = anxin::device::ascend::ParseNpuSmiHealth(
      std::string_view(reinterpret_cast<const char*>(data), size));
  (void)r;
  return 0;
}
