// libFuzzer target: msprobe dump.json, stack.json and construct.json parsing,
// then a statistics comparison of the dump with itself, with the input's
// module tree when it parses as one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/compare/dump_compare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::compare;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseMsprobeStacks(text, "stack.json");
  auto parents = ParseMsprobeConstruct(text, "construct.json");
  // No data directory: tensor files named in the input are not opened.
  auto dump = ParseMsprobeDump(text, "dump.json", "", {});
  if (!dump) return 0;
  if (parents) {
    dump->parents = *parents;
    for (const auto& [op, parent] : *parents) (void)EnclosingModules(*dump, op);
  }
  CompareOptions opts;
  opts.threads = 1;
  (void)CompareDumps(*dump, *dump, opts);
  return 0;
}
