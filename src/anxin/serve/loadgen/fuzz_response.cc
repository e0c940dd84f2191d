// libFuzzer target: an HTTP response as a server might send it, split into
// reads at fuzzer-chosen points, through the response parser, the SSE parser
// and the chunk decoder of every API, as the client's loop drives them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/serve/loadgen/api.h"
#include "anxin/serve/loadgen/http_response.h"
#include "anxin/serve/loadgen/sse.h"

namespace {

using namespace anxin::loadgen;

struct Sink final : BodySink, SseSink {
  SseParser sse;
  bool sse_failed = false;
  size_t events = 0;
  void OnBody(std::string_view bytes) override {
    if (!sse_failed && !sse.Feed(bytes, *this)) sse_failed = true;
  }
  void OnEvent(std::string_view data) override {
    ++events;
    for (Api api : {Api::kCompletions, Api::kChat, Api::kTriton}) {
      Chunk c = ParseChunk(api, data, true);
      if (c.kind == Chunk::kData && c.text.size() != c.text_bytes) __builtin_trap();
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte chooses the read size (1..256 bytes), as a socket might.
  size_t step = static_cast<size_t>(data[0]) + 1;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  ResponseParser parser;
  Sink sink;
  bool failed = false;
  for (size_t i = 0; i < input.size() && !failed; i += step) {
    if (!parser.Feed(input.substr(i, step), sink)) failed = true;
  }
  if (!failed) {
    (void)parser.Finish();
  }
  if (parser.body_bytes() > input.size()) __builtin_trap();
  return 0;
}
