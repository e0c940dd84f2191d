// HTTP/1.1 message framing for the serving simulator and the gate
// (internal to serve): incremental parsers of request and response heads, a
// chunked-body decoder, and the writers they need. Only framing: bodies are
// handed through as bytes.
//
//   std::string buffer = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";   // what was read so far
//   RequestHead head;
//   size_t used = 0;
//   WireStatus s = ParseRequestHead(buffer, /*max_bytes=*/64 << 10, &head, &used);
//   if (s == WireStatus::kNeedMore) { /* read more */ }
//   if (s == WireStatus::kBad) { /* respond 400 and close */ }
//
//   ChunkedDecoder dec;                                 // response body framing
//   std::string bytes = "5\r\nhello\r\n0\r\n\r\n", payload;
//   size_t consumed = 0;
//   WireStatus c = dec.Feed(bytes, &consumed, &payload);
//   if (dec.done()) { /* the last chunk and trailers passed; payload == "hello" */ }
//
// Thread safety: values; no shared state.
#ifndef ANXIN_NET_HTTP_WIRE_H_
#define ANXIN_NET_HTTP_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anxin::net {

enum class WireStatus { kOk, kNeedMore, kBad, kTooLarge };

struct Header {
  std::string name, value;
};

struct RequestHead {
  std::string method;
  std::string target;  // as sent: "/v1/completions?x=1"
  std::string path;    // target without the query
  int minor_version = 1;
  std::vector<Header> headers;
  // Framing, from the headers.
  bool chunked = false;
  uint64_t content_length = 0;
  bool keep_alive = true;
  std::string error;  // for kBad: what was wrong
  std::optional<std::string_view> Find(std::string_view name) const;
};

struct ResponseHead {
  int status = 0;
  int minor_version = 1;
  std::vector<Header> headers;
  bool chunked = false;
  std::optional<uint64_t> content_length;
  bool keep_alive = true;
  std::string error;
  std::optional<std::string_view> Find(std::string_view name) const;
  // Content-Type without parameters, in lower case ("text/event-stream"), or "".
  std::string MediaType() const;
};

// Parses a head that ends with an empty line. *used: bytes of the head.
// kTooLarge when max_bytes pass without its end.
WireStatus ParseRequestHead(std::string_view in, size_t max_bytes, RequestHead* head, size_t* used);
WireStatus ParseResponseHead(std::string_view in, size_t max_bytes, ResponseHead* head,
                             size_t* used);

// Receives a response body piece by piece (framing removed), as slices of
// what was read: nothing is copied. OnHead comes once, before the first body
// byte, so that a sink can route the body by status and content type.
class BodySink {
 public:
  virtual ~BodySink() = default;
  virtual void OnHead(const ResponseHead& /*head*/) {}
  virtual void OnBody(std::string_view bytes) = 0;
};

// Decodes a chunked body incrementally: Feed returns the bytes it consumed
// from in (all of it unless the body ended inside) and appends the payload to
// *payload when given, or hands it to sink as slices of in. After kBad,
// error() says what was wrong.
class ChunkedDecoder {
 public:
  WireStatus Feed(std::string_view in, size_t* consumed, std::string* payload = nullptr);
  WireStatus Feed(std::string_view in, size_t* consumed, BodySink& sink);
  bool done() const { return state_ == State::kDone; }
  uint64_t payload_bytes() const { return total_; }
  const char* error() const { return error_; }

 private:
  enum class State { kSize, kSizeLineEnd, kData, kDataCr, kDataLf, kTrailer, kDone };
  template <typename OnData>
  WireStatus Decode(std::string_view in, size_t* consumed, OnData on_data);
  WireStatus Bad(const char* why, size_t at, size_t* consumed) {
    error_ = why;
    *consumed = at;
    return WireStatus::kBad;
  }
  const char* error_ = "";
  State state_ = State::kSize;
  uint64_t remaining_ = 0, total_ = 0;
  int size_digits_ = 0;
  bool in_extension_ = false;
  int trailer_line_len_ = 0;
  int line_bytes_ = 0;
};

// "HTTP/1.1 200 OK\r\n" ... "\r\n" with Content-Length, or chunked when
// body_length is empty.
std::string ResponseHeadBytes(int status, std::string_view content_type,
                              std::optional<size_t> body_length, bool keep_alive,
                              const std::vector<Header>& extra = {});
std::string_view StatusText(int status);
// One chunk of a chunked body ("1a\r\n...\r\n"); empty data is the last chunk.
std::string ChunkBytes(std::string_view data);

}  // namespace anxin::net

#endif  // ANXIN_NET_HTTP_WIRE_H_
