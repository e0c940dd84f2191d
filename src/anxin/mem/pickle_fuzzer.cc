// libFuzzer target for the pickle reader and the snapshot-to-trace step: any
// input must give a document or an error, never a crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/mem/pickle.h"
#include "anxin/mem/trace.h"

namespace {

// Walks the document like a consumer would, bounded: memo references can make
// cycles.
void Walk(const anxin::mem::PickleDoc& doc, const anxin::mem::PickleNode& n, int depth,
          size_t& budget) {
  if (depth > 32 || budget == 0) return;
  --budget;
  for (uint32_t id : n.items) Walk(doc, doc.node(id), depth + 1, budget);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = anxin::mem::ParsePickle(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!doc) return 0;
  size_t budget = 100000;
  Walk(*doc, doc->root(), 0, budget);
  (void)anxin::mem::TraceFromSnapshot(*doc);
  return 0;
}
