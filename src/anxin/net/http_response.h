// An incremental reader of HTTP/1.1 responses as they arrive on a socket, for
// clients on the event loop (the load tester): the head through
// ParseResponseHead, then a body delimited by Content-Length, the chunked
// coding (ChunkedDecoder) or the end of the connection, handed to a BodySink
// as slices of what was read.
//
//   ResponseReader reader;
//   struct Print : BodySink {
//     void OnBody(std::string_view b) override { std::fwrite(b.data(), 1, b.size(), stdout); }
//   } sink;
//   std::vector<std::string> reads = {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "lo"};
//   bool at_eof = false;                 // the peer closed the connection
//   for (const std::string& bytes : reads) {
//     if (auto s = reader.Feed(bytes, sink); !s) { /* malformed: s.error() */ }
//     if (reader.done()) break;          // the whole response is in
//   }
//   if (at_eof) ANXIN_TRY(reader.Finish());  // a body cut short is kDataLoss
//
// Interim responses (1xx other than 101) are skipped; 204 and 304 have no
// body. Until its head is complete a response's bytes are copied into a head
// buffer (at most kMaxHeadBytes); after it, body bytes are handed over as
// slices, never copied or buffered.
//
// Thread safety: an object is used by one thread at a time.
#ifndef ANXIN_NET_HTTP_RESPONSE_H_
#define ANXIN_NET_HTTP_RESPONSE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "anxin/base/error.h"
#include "anxin/net/http_wire.h"

namespace anxin::net {

class ResponseReader {
 public:
  static constexpr size_t kMaxHeadBytes = 64 * 1024;

  // Consumes all of data. Errors (kDataLoss) name what was wrong; after one
  // the reader stays failed until Reset.
  [[nodiscard]] Status Feed(std::string_view data, BodySink& sink);
  // The peer closed the connection: completes a close-delimited body; any
  // other incomplete response is kDataLoss ("connection closed after N of M
  // body bytes").
  [[nodiscard]] Status Finish();
  // Ready for the next response on the same connection.
  void Reset();

  bool headers_done() const { return state_ > State::kHead; }
  bool done() const { return state_ == State::kDone; }
  // Valid once headers_done().
  const ResponseHead& head() const { return head_; }
  int status() const { return head_.status; }
  // "text/event-stream" (lower case, parameters dropped), or "".
  std::string content_type() const { return head_.MediaType(); }
  // Whether the connection may carry another request after this response.
  bool keep_alive() const { return head_.keep_alive && state_ != State::kUntilClose; }
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  enum class State { kHead, kLength, kChunked, kUntilClose, kDone, kFailed };
  std::unexpected<Error> Fail(std::string message);
  // Parses the head in head_bytes_, whose last `fresh` bytes are the
  // start of data; returns how many bytes of data belong to the head, or -1
  // while it is incomplete.
  Result<int64_t> ReadHead(size_t fresh, BodySink& sink);

  State state_ = State::kHead;
  std::string head_bytes_;
  ResponseHead head_;
  ChunkedDecoder chunked_;
  uint64_t remaining_ = 0;
  uint64_t body_bytes_ = 0;
  std::string error_;
};

}  // namespace anxin::net

#endif  // ANXIN_NET_HTTP_RESPONSE_H_
