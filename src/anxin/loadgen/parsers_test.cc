// Tests of the SSE parser and of the API chunk decoding (the HTTP response
// reader is net's: net/http_response_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "anxin/base/testing.h"
#include "anxin/loadgen/api.h"
#include "anxin/loadgen/sse.h"

namespace anxin::loadgen {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Collect : SseSink {
  std::vector<std::string> events;
  void OnEvent(std::string_view d) override { events.emplace_back(d); }
};

TEST(SseParser, EventsAcrossArbitrarySplitsAndLineEndings) {
  std::string stream =
      ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\nid: 7\ndata:two\ndata: lines\n\n"
      "data: [DONE]\r\rdata: cr\r\n\r\n";
  for (size_t step : {1u, 2u, 5u, 1000u}) {
    SseParser p;
    Collect c;
    for (size_t i = 0; i < stream.size(); i += step) {
      ASSERT_THAT(p.Feed(std::string_view(stream).substr(i, step), c), IsOk());
    }
    EXPECT_THAT(c.events, ElementsAre("{\"a\":1}", "two\nlines", "[DONE]", "cr")) << step;
    EXPECT_FALSE(p.has_pending());
  }
}

TEST(SseParser, PendingEventAndSizeLimit) {
  SseParser p;
  Collect c;
  ASSERT_THAT(p.Feed("data: partial", c), IsOk());
  EXPECT_TRUE(p.has_pending());
  EXPECT_TRUE(c.events.empty());
  SseParser big;
  std::string huge(SseParser::kMaxEventBytes + 10, 'x');
  EXPECT_THAT(big.Feed("data: " + huge, c), HasCode(ErrorCode::kDataLoss));
}

TEST(Api, BuildsOpenAiAndTritonBodies) {
  RequestSpec spec{.api = Api::kCompletions, .model = "m", .ignore_eos = true};
  auto body = nlohmann::json::parse(BuildBody(spec, "hi", 16));
  EXPECT_EQ(body["prompt"], "hi");
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(DefaultPath(spec), "/v1/completions");

  spec.api = Api::kChat;
  spec.extra_body = {{"temperature", 0}, {"stream_options", {{"continuous_usage_stats", true}}}};
  body = nlohmann::json::parse(BuildBody(spec, "hi", 16));
  EXPECT_EQ(body["messages"][0]["content"], "hi");
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["stream_options"]["continuous_usage_stats"], true);
  EXPECT_EQ(DefaultPath(spec), "/v1/chat/completions");

  RequestSpec triton{.api = Api::kTriton, .model = "ensemble"};
  body = nlohmann::json::parse(BuildBody(triton, "hi", 8));
  EXPECT_EQ(body["text_input"], "hi");
  EXPECT_EQ(body["max_tokens"], 8);
  EXPECT_EQ(DefaultPath(triton), "/v2/models/ensemble/generate_stream");
  triton.stream = false;
  EXPECT_EQ(DefaultPath(triton), "/v2/models/ensemble/generate");
  EXPECT_THAT(ParseApi("grpc"), HasCode(ErrorCode::kInvalidArgument));
}

TEST(Api, DecodesChunks) {
  Chunk c = ParseChunk(Api::kCompletions,
                       R"({"choices":[{"index":0,"text":" the","finish_reason":null}]})", true);
  EXPECT_EQ(c.kind, Chunk::kData);
  EXPECT_EQ(c.text_bytes, 4u);
  EXPECT_EQ(c.text, " the");
  c = ParseChunk(Api::kChat, R"({"choices":[{"delta":{"role":"assistant","content":"Hi"}}]})",
                 false);
  EXPECT_EQ(c.text_bytes, 2u);
  EXPECT_TRUE(c.text.empty());
  c = ParseChunk(Api::kChat, R"({"choices":[{"delta":{"role":"assistant"}}]})", false);
  EXPECT_EQ(c.kind, Chunk::kData);
  EXPECT_EQ(c.text_bytes, 0u);
  c = ParseChunk(Api::kChat,
                 R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}})", false);
  EXPECT_EQ(c.prompt_tokens, 12);
  EXPECT_EQ(c.completion_tokens, 34);
  EXPECT_EQ(ParseChunk(Api::kChat, "[DONE]", false).kind, Chunk::kDone);
  c = ParseChunk(Api::kChat, R"({"error":{"message":"overloaded","code":503}})", false);
  EXPECT_EQ(c.kind, Chunk::kError);
  EXPECT_EQ(c.message, "overloaded");
  c = ParseChunk(Api::kCompletions, R"({"object":"error","message":"bad","code":400})", false);
  EXPECT_EQ(c.kind, Chunk::kError);
  EXPECT_EQ(c.message, "bad");
  EXPECT_EQ(ParseChunk(Api::kChat, "{not json", false).kind, Chunk::kMalformed);
  EXPECT_EQ(ParseChunk(Api::kChat, R"({"id":"x"})", false).kind, Chunk::kMalformed);
  c = ParseChunk(Api::kTriton, R"({"model_name":"e","text_output":"abc"})", false);
  EXPECT_EQ(c.text_bytes, 3u);
  c = ParseChunk(Api::kTriton, R"({"error":"model not ready"})", false);
  EXPECT_EQ(c.kind, Chunk::kError);
  EXPECT_EQ(c.message, "model not ready");
  // Non-streamed chat bodies carry the whole message.
  c = ParseChunk(Api::kChat,
                 R"({"choices":[{"message":{"content":"hello"}}],"usage":{"completion_tokens":2}})",
                 false);
  EXPECT_EQ(c.text_bytes, 5u);
  EXPECT_EQ(c.completion_tokens, 2);
}

TEST(Api, FastScannerAgreesWithTheFullParser) {
  struct Case {
    Api api;
    const char* data;
    // The scanner answers (else it leaves the event to the parser): 1 always,
    // 2 only when the text itself is not asked for.
    int fast;
  };
  const Case cases[] = {
      {Api::kCompletions,
       R"({"id":"x","choices":[{"index":0,"text":" the","logprobs":null}],"usage":null})", 1},
      {Api::kCompletions, R"({"choices":[{"text":"caf\u00e9 \"q\"\n\ud83d\ude00"}]})", 1},
      {Api::kCompletions, "{\"choices\":[{\"text\":\"\xe4\xbd\xa0\"}]}", 1},
      {Api::kCompletions, R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":-3}})",
       1},
      {Api::kCompletions, R"({"choices":[{"text":5},{"text":{"a":1}},7,{"text":"ab"}]})", 1},
      {Api::kChat, R"({"choices":[{"delta":{"content":"a","reasoning_content":"bc"}}]})", 2},
      {Api::kChat,
       R"({"choices":[{"message":{"content":"hello"}}],"usage":{"completion_tokens":2.0}})", 1},
      {Api::kTriton, R"({"model_name":"e","text_output":"abc","usage":{"completion_tokens":9}})",
       1},
      {Api::kCompletions, R"({"error":null,"choices":[{"text":"a"}]})", 1},
      // Left to the parser: errors, odd keys, repeats, exponents, bad JSON.
      {Api::kCompletions, R"({"error":{"message":"x"}})", 0},
      {Api::kCompletions, R"({"object":"error","message":"x"})", 0},
      {Api::kCompletions, R"({"object":"err\u006fr","message":"x"})", 0},
      {Api::kCompletions, R"({"choices":[{"te\u0078t":"a"}]})", 0},
      {Api::kCompletions, R"({"choices":[{"text":"a","text":"bb"}]})", 0},
      {Api::kCompletions, R"({"choices":[],"usage":{"completion_tokens":1e2}})", 0},
      {Api::kCompletions, R"({"choices":[{"text":"a"}],})", 0},
      {Api::kCompletions, "{\"choices\":[{\"text\":\"\xc0\xaf\"}]}", 0},
      {Api::kCompletions, R"({"choices":[{"text":"\ud800"}]})", 0},
      {Api::kCompletions, R"({"usage":{"completion_tokens":3}})", 0},
      {Api::kCompletions, R"({"choices":[{"text":"a"}]} x)", 0},
      {Api::kTriton, R"({"model_name":"e"})", 0},
      {Api::kChat, "[1,2]", 0},
  };
  for (const Case& c : cases) {
    for (bool keep : {false, true}) {
      auto fast = internal::FastParseChunk(c.api, c.data, keep);
      Chunk full = internal::FullParseChunk(c.api, c.data, keep);
      EXPECT_EQ(fast.has_value(), c.fast == 1 || (c.fast == 2 && !keep)) << c.data;
      if (!fast) continue;
      EXPECT_EQ(fast->kind, full.kind) << c.data;
      EXPECT_EQ(fast->text_bytes, full.text_bytes) << c.data;
      EXPECT_EQ(fast->text, full.text) << c.data;
      EXPECT_EQ(fast->prompt_tokens, full.prompt_tokens) << c.data;
      EXPECT_EQ(fast->completion_tokens, full.completion_tokens) << c.data;
    }
  }
}

}  // namespace
}  // namespace anxin::loadgen
