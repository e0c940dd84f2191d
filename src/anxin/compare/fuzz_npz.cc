// libFuzzer target: the .npz (zip) reader, stored, deflated and ZIP64.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "anxin/compare/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::compare;
  auto file = MappedFile::FromBytes("fuzz.npz", {data, size});
  auto ts = ParseNpz(file, {});
  if (!ts) return 0;
  std::vector<double> buf(256);
  for (const Tensor& t : *ts)
    for (uint64_t i = 0; i < t.NumElements(); i += buf.size())
      t.ReadDoubles(i, std::min<uint64_t>(buf.size(), t.NumElements() - i), buf.data());
  return 0;
}
