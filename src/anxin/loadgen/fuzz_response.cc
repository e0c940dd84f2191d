// libFuzzer target: an HTTP response as a server might send it, split into
// reads at fuzzer-chosen points, through net's response reader, the SSE parser
// and the chunk decoder of every API, as the client's loop drives them; and
// the chunk decoder's fast scanner against its full JSON parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anxin/loadgen/api.h"
#include "anxin/loadgen/sse.h"
#include "anxin/net/http_response.h"

namespace {

using namespace anxin::loadgen;

struct Sink final : anxin::net::BodySink, SseSink {
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
      // The fast scanner must agree with the full parser whenever it answers.
      for (bool keep : {true, false}) {
        auto fast = internal::FastParseChunk(api, data, keep);
        if (!fast) continue;
        Chunk full = internal::FullParseChunk(api, data, keep);
        if (fast->kind != full.kind || fast->text_bytes != full.text_bytes ||
            fast->text != full.text || fast->prompt_tokens != full.prompt_tokens ||
            fast->completion_tokens != full.completion_tokens) {
          __builtin_trap();
        }
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte: its top bit sends the rest straight to the chunk decoder
  // as one event; the other bits choose the read size (1..128 bytes), as a
  // socket might.
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  Sink sink;
  if (data[0] & 0x80) {
    sink.OnEvent(input);
    return 0;
  }
  size_t step = static_cast<size_t>(data[0] & 0x7f) + 1;
  anxin::net::ResponseReader parser;
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
