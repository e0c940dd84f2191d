// An incremental parser of Server-Sent Events (the text/event-stream format
// that OpenAI-compatible servers and Triton's generate_stream use), fed with
// the HTTP body as it arrives.
//
//   SseParser sse;
//   struct Sink : SseSink {
//     int events = 0;
//     void OnEvent(std::string_view data) override { events += !data.empty(); }
//   } sink;
//   ANXIN_TRY(sse.Feed("data: {\"x\":1}\n\nda", sink));  // one event delivered
//   ANXIN_TRY(sse.Feed("ta: [DONE]\n\n", sink));         // and another
//
// Per the WHATWG rules: lines end in LF, CRLF or CR; "data:" lines of one
// event are joined with LF; a blank line dispatches the event; comment lines
// (":...") and other fields (event, id, retry) are ignored; an event without
// data is not delivered. One event may hold at most kMaxEventBytes; past that
// the stream is malformed (kDataLoss).
//
// Thread safety: an object is used by one thread at a time.
#ifndef ANXIN_LOADGEN_SSE_H_
#define ANXIN_LOADGEN_SSE_H_

#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin::loadgen {

class SseSink {
 public:
  virtual ~SseSink() = default;
  virtual void OnEvent(std::string_view data) = 0;
};

class SseParser {
 public:
  static constexpr size_t kMaxEventBytes = 16 * 1024 * 1024;

  [[nodiscard]] Status Feed(std::string_view bytes, SseSink& sink);
  // Bytes of an unfinished line or event are pending (the stream stopped
  // mid-event).
  bool has_pending() const { return !line_.empty() || has_data_; }
  void Reset() { *this = SseParser(); }

 private:
  void Line(std::string_view line, SseSink& sink);

  std::string line_;  // a line split across reads
  std::string data_;  // the data of the event being built
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte seen was CR (a following LF is part of it)
  bool failed_ = false;
};

}  // namespace anxin::loadgen

#endif  // ANXIN_LOADGEN_SSE_H_
