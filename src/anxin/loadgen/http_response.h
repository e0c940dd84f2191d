// An incremental parser of HTTP/1.1 responses as they arrive on a socket, for
// the load tester's event loop: status line, headers, and a body delimited by
// Content-Length, chunked transfer coding, or the end of the connection.
//
//   ResponseParser parser;
//   struct Print : BodySink {
//     void OnBody(std::string_view b) override { std::fwrite(b.data(), 1, b.size(), stdout); }
//   } sink;
//   std::vector<std::string> reads = {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "lo"};
//   bool at_eof = false;                 // the peer closed the connection
//   for (const std::string& bytes : reads) {
//     if (auto s = parser.Feed(bytes, sink); !s) { /* malformed: s.error() */ }
//     if (parser.done()) break;          // the whole response is in
//   }
//   if (at_eof) ANXIN_TRY(parser.Finish());  // a body cut short is kDataLoss
//
// The parser copies nothing but the header section; body bytes go to the sink
// as slices of the input. Limits: 64 KiB of headers, chunk sizes below 2^40;
// past them the response is malformed. Nothing here blocks or allocates per
// body byte.
//
// Thread safety: an object is used by one thread at a time.
#ifndef ANXIN_LOADGEN_HTTP_RESPONSE_H_
#define ANXIN_LOADGEN_HTTP_RESPONSE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin::loadgen {

// Receives the decoded body (chunk framing removed) piece by piece.
class BodySink {
 public:
  virtual ~BodySink() = default;
  virtual void OnBody(std::string_view bytes) = 0;
};

class ResponseParser {
 public:
  static constexpr size_t kMaxHeaderBytes = 64 * 1024;

  // Consumes all of data. Errors (kDataLoss) name what was wrong; after one
  // the parser stays failed until Reset.
  [[nodiscard]] Status Feed(std::string_view data, BodySink& sink);
  // The peer closed the connection: completes a close-delimited body; any
  // other incomplete response is kDataLoss ("connection closed after N body
  // bytes of M").
  [[nodiscard]] Status Finish();
  // Ready for the next response on the same connection.
  void Reset();

  bool headers_done() const { return state_ > State::kHeaders; }
  bool done() const { return state_ == State::kDone; }
  int status() const { return status_; }
  // "text/event-stream" (lower case, parameters dropped), or "".
  const std::string& content_type() const { return content_type_; }
  // Whether the connection may carry another request after this response.
  bool keep_alive() const { return keep_alive_; }
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  enum class State {
    kStatusLine,
    kHeaders,
    kBody,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kDone,
    kFailed
  };
  Status Fail(std::string message);
  Status HeaderLine(std::string_view line);
  Status EndOfHeaders();
  Status ChunkSizeLine(std::string_view line);

  State state_ = State::kStatusLine;
  std::string line_;  // a header or chunk-size line split across reads
  size_t header_bytes_ = 0;
  int status_ = 0;
  int http_minor_ = 1;
  std::string content_type_;
  bool chunked_ = false;
  bool has_length_ = false;
  bool close_delimited_ = false;
  bool keep_alive_ = true;
  bool connection_close_ = false;
  bool chunk_cr_ = false;
  uint64_t remaining_ = 0;  // in the body or the current chunk
  uint64_t content_length_ = 0;
  uint64_t body_bytes_ = 0;
  std::string error_;
};

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_HTTP_RESPONSE_H_
