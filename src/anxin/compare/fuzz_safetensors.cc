// libFuzzer target: the safetensors reader.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "anxin/compare/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::compare;
  auto ts = ParseSafetensors(MappedFile::FromBytes("fuzz.safetensors", {data, size}));
  if (!ts) return 0;
  std::vector<double> buf(256);
  for (const Tensor& t : *ts)
    for (uint64_t i = 0; i < t.NumElements(); i += buf.size())
      t.ReadDoubles(i, std::min<uint64_t>(buf.size(), t.NumElements() - i), buf.data());
  return 0;
}
