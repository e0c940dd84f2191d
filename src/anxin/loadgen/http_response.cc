#include "anxin/loadgen/http_response.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "anxin/base/strings.h"

namespace anxin::loadgen {
namespace {

// A printable excerpt of untrusted bytes for error messages.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 60)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 60) out += "...";
  return out;
}

// Calls fn on each comma-separated, trimmed token of a header value.
template <typename Fn>
void ForEachToken(std::string_view value, Fn fn) {
  while (true) {
    size_t comma = value.find(',');
    fn(Trim(value.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

Status ResponseParser::Fail(std::string message) {
  state_ = State::kFailed;
  error_ = std::move(message);
  return DataLoss(error_);
}

void ResponseParser::Reset() { *this = ResponseParser(); }

Status ResponseParser::Feed(std::string_view data, BodySink& sink) {
  size_t i = 0;
  while (i < data.size()) {
    switch (state_) {
      case State::kFailed:
        return DataLoss(error_);
      case State::kDone:
        return Fail(fmt::format("{} bytes after the end of the response: '{}'", data.size() - i,
                                Excerpt(data.substr(i))));
      case State::kBody: {
        uint64_t take = data.size() - i;
        if (!close_delimited_) take = std::min<uint64_t>(take, remaining_);
        sink.OnBody(data.substr(i, take));
        i += take;
        body_bytes_ += take;
        if (!close_delimited_) {
          remaining_ -= take;
          if (remaining_ == 0) state_ = State::kDone;
        }
        break;
      }
      case State::kChunkData: {
        uint64_t take = std::min<uint64_t>(data.size() - i, remaining_);
        sink.OnBody(data.substr(i, take));
        i += take;
        body_bytes_ += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd: {
        // Exactly CRLF (or a bare LF) after the chunk's data.
        char ch = data[i++];
        if (ch == '\r' && !chunk_cr_) {
          chunk_cr_ = true;
        } else if (ch == '\n') {
          chunk_cr_ = false;
          state_ = State::kChunkSize;
        } else {
          return Fail(fmt::format("expected CRLF after chunk data, got byte 0x{:02x}",
                                  static_cast<unsigned char>(ch)));
        }
        break;
      }
      default: {
        // Line-oriented states.
        size_t nl = data.find('\n', i);
        size_t limit = state_ == State::kChunkSize
                           ? 1024
                           : kMaxHeaderBytes - std::min(header_bytes_, kMaxHeaderBytes);
        size_t piece = (nl == std::string_view::npos ? data.size() : nl) - i;
        if (line_.size() + piece > limit) {
          return Fail(state_ == State::kChunkSize
                          ? "chunk-size line longer than 1024 bytes"
                          : fmt::format("header section longer than {} bytes", kMaxHeaderBytes));
        }
        if (nl == std::string_view::npos) {
          line_.append(data.substr(i));
          i = data.size();
          break;
        }
        std::string_view line;
        if (line_.empty()) {
          line = data.substr(i, piece);
        } else {
          line_.append(data.substr(i, piece));
          line = line_;
        }
        i = nl + 1;
        if (state_ != State::kChunkSize) {
          header_bytes_ += line.size() + 1;
        }
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        Status s;
        switch (state_) {
          case State::kStatusLine:
          case State::kHeaders:
            s = HeaderLine(line);
            break;
          case State::kChunkSize:
            s = ChunkSizeLine(line);
            break;
          case State::kTrailers:
            if (line.empty()) state_ = State::kDone;
            break;
          default:
            break;
        }
        line_.clear();
        if (!s) return s;
        break;
      }
    }
  }
  return Ok();
}

Status ResponseParser::HeaderLine(std::string_view line) {
  if (state_ == State::kStatusLine) {
    // HTTP/1.x SP 3DIGIT [SP reason]
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
        !std::isdigit(static_cast<unsigned char>(line[9])) ||
        !std::isdigit(static_cast<unsigned char>(line[10])) ||
        !std::isdigit(static_cast<unsigned char>(line[11])) ||
        (line.size() > 12 && line[12] != ' ')) {
      return Fail(fmt::format("not an HTTP/1.x status line: '{}'", Excerpt(line)));
    }
    http_minor_ = line[7] - '0';
    status_ = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    keep_alive_ = http_minor_ >= 1;
    state_ = State::kHeaders;
    return Ok();
  }
  if (line.empty()) return EndOfHeaders();
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Fail(fmt::format("header line without a name: '{}'", Excerpt(line)));
  }
  std::string_view name = line.substr(0, colon);
  std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsIgnoreCase(name, "content-length")) {
    uint64_t n = 0;
    if (value.empty() || value.size() > 15) {
      return Fail(fmt::format("bad Content-Length '{}'", Excerpt(value)));
    }
    for (char c : value) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        return Fail(fmt::format("bad Content-Length '{}'", Excerpt(value)));
      }
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (has_length_ && n != content_length_) return Fail("two different Content-Length headers");
    has_length_ = true;
    content_length_ = n;
  } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
    std::string last;
    ForEachToken(value, [&](std::string_view t) { last = ToLower(t); });
    chunked_ = last == "chunked";
    if (!chunked_) close_delimited_ = true;
  } else if (EqualsIgnoreCase(name, "connection")) {
    ForEachToken(value, [&](std::string_view t) {
      if (EqualsIgnoreCase(t, "close")) connection_close_ = true;
      if (EqualsIgnoreCase(t, "keep-alive") && http_minor_ == 0) keep_alive_ = true;
    });
  } else if (EqualsIgnoreCase(name, "content-type")) {
    content_type_ = ToLower(Trim(value.substr(0, value.find(';'))));
  }
  return Ok();
}

Status ResponseParser::EndOfHeaders() {
  if (status_ >= 100 && status_ < 200 && status_ != 101) {
    // An interim response (100 Continue): the real one follows.
    int minor = http_minor_;
    Reset();
    http_minor_ = minor;
    return Ok();
  }
  if (connection_close_) keep_alive_ = false;
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (has_length_ && !close_delimited_) {
    remaining_ = content_length_;
    state_ = content_length_ == 0 ? State::kDone : State::kBody;
  } else {
    close_delimited_ = true;
    keep_alive_ = false;
    state_ = State::kBody;
  }
  return Ok();
}

Status ResponseParser::ChunkSizeLine(std::string_view line) {
  std::string_view hex = Trim(line.substr(0, line.find(';')));
  if (hex.empty() || hex.size() > 10) {
    return Fail(fmt::format("bad chunk size '{}'", Excerpt(line)));
  }
  uint64_t n = 0;
  for (char c : hex) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                        : -1;
    if (d < 0) return Fail(fmt::format("bad chunk size '{}'", Excerpt(line)));
    n = n * 16 + static_cast<uint64_t>(d);
  }
  if (n == 0) {
    state_ = State::kTrailers;
  } else {
    remaining_ = n;
    state_ = State::kChunkData;
  }
  return Ok();
}

Status ResponseParser::Finish() {
  switch (state_) {
    case State::kDone:
      return Ok();
    case State::kBody:
      if (close_delimited_) {
        state_ = State::kDone;
        return Ok();
      }
      return Fail(
          fmt::format("connection closed after {} of {} body bytes", body_bytes_, content_length_));
    case State::kStatusLine:
    case State::kHeaders:
      return Fail(status_ == 0 && line_.empty() ? "connection closed before any response"
                                                : "connection closed inside the headers");
    case State::kFailed:
      return DataLoss(error_);
    default:
      return Fail(
          fmt::format("connection closed inside the chunked body after {} bytes", body_bytes_));
  }
}

}  // namespace anxin::loadgen
