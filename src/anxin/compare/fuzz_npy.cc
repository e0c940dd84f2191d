// libFuzzer target: the .npy reader must turn any bytes into a tensor whose
// every element can be read, or into an error; never a crash.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "anxin/compare/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::compare;
  auto file = MappedFile::FromBytes("fuzz.npy", {data, size});
  for (auto void_as : {std::optional<DType>(), std::optional<DType>(DType::kBFloat16)}) {
    auto t = ParseNpy(file, file->bytes(), "fuzz.npy", {.void_as = void_as});
    if (!t) continue;
    std::vector<double> buf(256);
    for (uint64_t i = 0; i < t->NumElements(); i += buf.size())
      t->ReadDoubles(i, std::min<uint64_t>(buf.size(), t->NumElements() - i), buf.data());
  }
  return 0;
}
