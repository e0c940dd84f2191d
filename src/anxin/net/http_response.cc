#include "anxin/net/http_response.h"

#include <fmt/format.h>

#include <algorithm>

namespace anxin::net {
namespace {

// A printable excerpt of untrusted bytes for error messages.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 60)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 60) out += "...";
  return out;
}

}  // namespace

std::unexpected<Error> ResponseReader::Fail(std::string message) {
  state_ = State::kFailed;
  error_ = std::move(message);
  return DataLoss(error_);
}

void ResponseReader::Reset() {
  state_ = State::kHead;
  head_bytes_.clear();  // keeps its capacity for the next response
  head_ = ResponseHead{};
  chunked_ = ChunkedDecoder{};
  remaining_ = body_bytes_ = 0;
  error_.clear();
}

Result<int64_t> ResponseReader::ReadHead(size_t fresh, BodySink& sink) {
  // Only the new bytes (and the three before them) can complete the head:
  // a head that arrives a byte at a time costs linear time, not quadratic.
  const size_t from = head_bytes_.size() - fresh;
  const bool ended = head_bytes_.find("\r\n\r\n", from < 3 ? 0 : from - 3) != std::string::npos;
  size_t used = 0;
  switch (ended || head_bytes_.size() > kMaxHeadBytes
              ? ParseResponseHead(head_bytes_, kMaxHeadBytes, &head_, &used)
              : WireStatus::kNeedMore) {
    case WireStatus::kNeedMore: {
      // Not a response at all: say so now rather than when the peer closes.
      constexpr std::string_view kStart = "HTTP/1.";
      const size_t n = std::min(head_bytes_.size(), kStart.size());
      if (std::string_view(head_bytes_).substr(0, n) != kStart.substr(0, n)) {
        return Fail(fmt::format("not an HTTP/1.x response: '{}'", Excerpt(head_bytes_)));
      }
      return -1;
    }
    case WireStatus::kTooLarge:
      return Fail(fmt::format("response head longer than {} bytes", kMaxHeadBytes));
    case WireStatus::kBad:
      return Fail(
          fmt::format("malformed response head ({}): '{}'", head_.error, Excerpt(head_bytes_)));
    case WireStatus::kOk:
      break;
  }
  const int64_t of_data =
      static_cast<int64_t>(used) - static_cast<int64_t>(head_bytes_.size() - fresh);
  head_bytes_.clear();
  if (head_.status < 200 && head_.status != 101) {
    head_ = ResponseHead{};  // an interim response (100 Continue): the real one follows
    return of_data;
  }
  if (head_.status == 204 || head_.status == 304) {
    state_ = State::kDone;
  } else if (head_.chunked) {
    state_ = State::kChunked;
  } else if (head_.content_length) {
    remaining_ = *head_.content_length;
    state_ = remaining_ == 0 ? State::kDone : State::kLength;
  } else {
    state_ = State::kUntilClose;
  }
  sink.OnHead(head_);
  return of_data;
}

Status ResponseReader::Feed(std::string_view data, BodySink& sink) {
  while (!data.empty()) {
    switch (state_) {
      case State::kFailed:
        return DataLoss(error_);
      case State::kDone:
        return Fail(fmt::format("{} bytes after the end of the response: '{}'", data.size(),
                                Excerpt(data)));
      case State::kHead: {
        // Copy no more than a head can hold; what is past its end is body.
        const size_t room = kMaxHeadBytes + 1 - std::min(head_bytes_.size(), kMaxHeadBytes + 1);
        const size_t fresh = std::min(room, data.size());
        head_bytes_.append(data.substr(0, fresh));
        ANXIN_ASSIGN_OR_RETURN(int64_t of_data, ReadHead(fresh, sink));
        if (of_data < 0) {
          if (fresh < data.size()) {
            return Fail(fmt::format("response head longer than {} bytes", kMaxHeadBytes));
          }
          return Ok();
        }
        data.remove_prefix(static_cast<size_t>(of_data));
        break;
      }
      case State::kLength: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
        sink.OnBody(data.substr(0, take));
        body_bytes_ += take;
        remaining_ -= take;
        data.remove_prefix(take);
        if (remaining_ == 0) state_ = State::kDone;
        break;
      }
      case State::kUntilClose:
        sink.OnBody(data);
        body_bytes_ += data.size();
        data = {};
        break;
      case State::kChunked: {
        size_t consumed = 0;
        const uint64_t before = chunked_.payload_bytes();
        const WireStatus s = chunked_.Feed(data, &consumed, sink);
        body_bytes_ += chunked_.payload_bytes() - before;
        if (s != WireStatus::kOk) {
          return Fail(fmt::format("malformed chunked body after {} bytes: {}", body_bytes_,
                                  chunked_.error()));
        }
        data.remove_prefix(consumed);
        if (chunked_.done()) state_ = State::kDone;
        break;
      }
    }
  }
  return Ok();
}

Status ResponseReader::Finish() {
  switch (state_) {
    case State::kDone:
      return Ok();
    case State::kUntilClose:
      state_ = State::kDone;
      return Ok();
    case State::kLength:
      return Fail(fmt::format("connection closed after {} of {} body bytes", body_bytes_,
                              body_bytes_ + remaining_));
    case State::kHead:
      return Fail(head_bytes_.empty() ? "connection closed before any response"
                                      : "connection closed inside the response head");
    case State::kChunked:
      return Fail(
          fmt::format("connection closed inside the chunked body after {} bytes", body_bytes_));
    case State::kFailed:
      return DataLoss(error_);
  }
  return DataLoss(error_);
}

}  // namespace anxin::net
