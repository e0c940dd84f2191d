// Tests of the HTTP/1.1 response reader: every framing in any split, and
// what it refuses.
#include "anxin/net/http_response.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "anxin/base/testing.h"

namespace anxin::net {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using ::testing::HasSubstr;

struct Collect : BodySink {
  std::string body;
  int heads = 0;
  int status_at_head = 0;
  void OnHead(const ResponseHead& h) override {
    ++heads;
    status_at_head = h.status;
  }
  void OnBody(std::string_view b) override {
    EXPECT_GT(heads, 0) << "body before its head";
    body.append(b);
  }
};

// Feeds text in pieces of `step` bytes (1 = byte by byte).
Status FeedInPieces(ResponseReader& p, std::string_view text, size_t step, Collect& sink) {
  for (size_t i = 0; i < text.size(); i += step) {
    ANXIN_TRY(p.Feed(text.substr(i, step), sink));
  }
  return Ok();
}

TEST(ResponseReader, ContentLengthBodyInAnySplit) {
  std::string resp =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Content-Length: 11\r\n\r\nhello world";
  for (size_t step : {1u, 2u, 7u, 1000u}) {
    ResponseReader p;
    Collect c;
    ASSERT_THAT(FeedInPieces(p, resp, step, c), IsOk()) << step;
    EXPECT_TRUE(p.done());
    EXPECT_EQ(p.status(), 200);
    EXPECT_EQ(p.content_type(), "application/json");
    EXPECT_TRUE(p.keep_alive());
    EXPECT_EQ(c.body, "hello world");
  }
}

TEST(ResponseReader, ChunkedBodyWithExtensionsAndTrailers) {
  std::string resp =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  for (size_t step : {1u, 3u, 1000u}) {
    ResponseReader p;
    Collect c;
    ASSERT_THAT(FeedInPieces(p, resp, step, c), IsOk());
    EXPECT_TRUE(p.done());
    EXPECT_EQ(c.body, "hello world");
    EXPECT_EQ(p.body_bytes(), 11u);
  }
}

TEST(ResponseReader, CloseDelimitedBodyEndsAtFinish) {
  ResponseReader p;
  Collect c;
  ASSERT_THAT(p.Feed("HTTP/1.0 200 OK\r\n\r\nabc", c), IsOk());
  EXPECT_FALSE(p.done());
  EXPECT_FALSE(p.keep_alive());
  ASSERT_THAT(p.Finish(), IsOk());
  EXPECT_TRUE(p.done());
  EXPECT_EQ(c.body, "abc");
}

TEST(ResponseReader, ConnectionCloseAndInterimResponses) {
  ResponseReader p;
  Collect c;
  ASSERT_THAT(p.Feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nConnection: close\r\n"
                     "Content-Length: 2\r\n\r\nno",
                     c),
              IsOk());
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.status(), 503);
  EXPECT_FALSE(p.keep_alive());
  EXPECT_EQ(c.body, "no");
}

TEST(ResponseReader, TruncatedBodiesAreDataLoss) {
  {
    ResponseReader p;
    Collect c;
    ASSERT_THAT(p.Feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", c), IsOk());
    EXPECT_THAT(p.Finish(), HasCode(ErrorCode::kDataLoss, HasSubstr("3 of 10 body bytes")));
  }
  {
    ResponseReader p;
    Collect c;
    ASSERT_THAT(p.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", c), IsOk());
    EXPECT_THAT(p.Finish(), HasCode(ErrorCode::kDataLoss, HasSubstr("chunked body")));
  }
  {
    ResponseReader p;
    EXPECT_THAT(p.Finish(), HasCode(ErrorCode::kDataLoss, HasSubstr("before any response")));
  }
}

TEST(ResponseReader, MalformedInputIsRejected) {
  const char* bad[] = {
      "HELLO\r\n",  // refused before the head ends
      "HTTP/1.1 2x0 OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab",
  };
  for (const char* text : bad) {
    ResponseReader p;
    Collect c;
    EXPECT_THAT(p.Feed(text, c), HasCode(ErrorCode::kDataLoss)) << text;
    // Stays failed.
    EXPECT_THAT(p.Feed("x", c), HasCode(ErrorCode::kDataLoss));
  }
}

TEST(ResponseReader, HeaderSectionIsBounded) {
  ResponseReader p;
  Collect c;
  ASSERT_THAT(p.Feed("HTTP/1.1 200 OK\r\n", c), IsOk());
  std::string big(ResponseReader::kMaxHeadBytes, 'a');
  EXPECT_THAT(p.Feed("X: " + big, c), HasCode(ErrorCode::kDataLoss, HasSubstr("head longer")));
}

TEST(ResponseReader, ResetReadsTheNextResponse) {
  ResponseReader p;
  Collect c;
  ASSERT_THAT(p.Feed("HTTP/1.1 204 No Content\r\n\r\n", c), IsOk());
  EXPECT_TRUE(p.done());
  p.Reset();
  ASSERT_THAT(p.Feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz", c), IsOk());
  EXPECT_TRUE(p.done());
  EXPECT_EQ(c.body, "z");
}

TEST(ResponseReader, HeadComesOnceBeforeTheBodyAndInterimHeadsAreNotReported) {
  ResponseReader p;
  Collect c;
  ASSERT_THAT(p.Feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: "
                     "Text/Event-Stream; charset=utf-8\r\nContent-Length: 3\r\n\r\nabc",
                     c),
              IsOk());
  EXPECT_EQ(c.heads, 1);
  EXPECT_EQ(c.status_at_head, 200);
  EXPECT_EQ(p.content_type(), "text/event-stream");
  EXPECT_EQ(c.body, "abc");
}

TEST(ResponseReader, ChunkedErrorsNameWhatWasWrong) {
  ResponseReader p;
  Collect c;
  EXPECT_THAT(p.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd", c),
              HasCode(ErrorCode::kDataLoss, HasSubstr("longer than its size")));
}

}  // namespace
}  // namespace anxin::net
