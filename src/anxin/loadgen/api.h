// The request bodies and streamed responses of the server APIs the load
// tester speaks: OpenAI-compatible /v1/completions and /v1/chat/completions
// (SSE chunks, `data: [DONE]`, the usage chunk), and Triton's generate
// extension (/v2/models/NAME/generate and generate_stream).
//
//   RequestSpec spec{.api = Api::kChat, .model = "llama"};
//   std::string body = BuildBody(spec, "Hello", 128);
//   Chunk c = ParseChunk(Api::kChat, R"({"choices":[{"delta":{"content":"Hi"}}]})", false);
//   // c.kind == Chunk::kData, c.text_bytes == 2
//
// Thread safety: free functions on values.
#ifndef ANXIN_LOADGEN_API_H_
#define ANXIN_LOADGEN_API_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin::loadgen {

enum class Api { kCompletions, kChat, kTriton };

// "completions", "chat", "triton".
[[nodiscard]] Result<Api> ParseApi(std::string_view name);
std::string_view ApiName(Api api);

struct RequestSpec {
  Api api = Api::kCompletions;
  std::string model{};
  bool stream = true;
  // vLLM's ignore_eos (and Triton's input of the same name is not sent): the
  // server generates exactly max_tokens, so runs are comparable.
  bool ignore_eos = false;
  // Merged into every body at the top level (objects are merged key by key),
  // for server-specific fields such as {"temperature":0} or Triton's
  // {"parameters":{...}}.
  nlohmann::json extra_body = nlohmann::json::object();
};

// The URL path when none is given: /v1/completions, /v1/chat/completions,
// /v2/models/MODEL/generate_stream (or /generate without streaming).
std::string DefaultPath(const RequestSpec& spec);

// The JSON body of one request. Streaming OpenAI requests ask for the usage
// chunk (stream_options.include_usage).
std::string BuildBody(const RequestSpec& spec, std::string_view prompt, int64_t max_tokens);

// One decoded event (an SSE data field, or a whole non-streamed body).
struct Chunk {
  enum Kind { kData, kDone, kError, kMalformed };
  Kind kind = kData;
  // Bytes of generated text in this chunk (0 for a usage-only chunk).
  size_t text_bytes = 0;
  // The text itself, only when asked for (to count tokens with a tokenizer).
  std::string text;
  // From a usage object, when present; -1 otherwise.
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  // kError: the server's message; kMalformed: what was wrong.
  std::string message;
};

// Decodes one event: the fast scanner for the usual chunks, the full JSON
// parser for everything else (both give the same result; the fuzzer checks).
Chunk ParseChunk(Api api, std::string_view data, bool keep_text);

namespace internal {
// nullopt when the event is not a plain chunk (chunk_scanner.cc).
std::optional<Chunk> FastParseChunk(Api api, std::string_view data, bool keep_text);
Chunk FullParseChunk(Api api, std::string_view data, bool keep_text);
}  // namespace internal

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_API_H_
