#include "anxin/net/http_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "anxin/base/strings.h"

namespace anxin::net {
namespace {

bool IsTokenChar(char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// True when the comma-separated list holds token (case-insensitive).
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (EqualsIgnoreCase(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// The last item of a comma-separated list.
std::string_view LastItem(std::string_view list) {
  size_t comma = list.rfind(',');
  return Trim(comma == std::string_view::npos ? list : list.substr(comma + 1));
}

// Splits the head into lines (CRLF) and parses the headers after the first
// line. Returns false with *error set on malformed input.
bool ParseHeaders(std::string_view block, std::vector<Header>* out, std::string* error) {
  while (!block.empty()) {
    size_t end = block.find("\r\n");
    std::string_view line = block.substr(0, end);
    block.remove_prefix(end == std::string_view::npos ? block.size() : end + 2);
    if (line.empty()) continue;
    if (line.front() == ' ' || line.front() == '\t') {
      *error = "folded header line";
      return false;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      *error = "header line without a name and colon";
      return false;
    }
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), IsTokenChar)) {
      *error = "bad character in a header name";
      return false;
    }
    std::string_view value = Trim(line.substr(colon + 1));
    if (value.find_first_of(std::string_view("\0\r\n", 3)) != std::string_view::npos) {
      *error = "control character in a header value";
      return false;
    }
    if (out->size() >= 128) {
      *error = "more than 128 headers";
      return false;
    }
    out->push_back({std::string(name), std::string(value)});
  }
  return true;
}

std::optional<std::string_view> FindHeader(const std::vector<Header>& hs, std::string_view name) {
  for (const Header& h : hs)
    if (EqualsIgnoreCase(h.name, name)) return std::string_view(h.value);
  return std::nullopt;
}

// Content-Length and Transfer-Encoding: both, repeats that disagree, or a
// coding other than chunked last are refused (they are how requests are
// smuggled past proxies).
bool Framing(const std::vector<Header>& hs, bool* chunked, std::optional<uint64_t>* length,
             std::string* error) {
  for (const Header& h : hs) {
    if (EqualsIgnoreCase(h.name, "transfer-encoding")) {
      if (!EqualsIgnoreCase(LastItem(h.value), "chunked")) {
        *error = "transfer coding other than chunked";
        return false;
      }
      *chunked = true;
    } else if (EqualsIgnoreCase(h.name, "content-length")) {
      uint64_t v = 0;
      std::string_view s = h.value;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
        *error = "bad Content-Length";
        return false;
      }
      if (*length && **length != v) {
        *error = "conflicting Content-Length headers";
        return false;
      }
      *length = v;
    }
  }
  if (*chunked && *length) {
    *error = "both Content-Length and Transfer-Encoding";
    return false;
  }
  return true;
}

bool KeepAlive(const std::vector<Header>& hs, int minor) {
  auto c = FindHeader(hs, "connection");
  if (minor >= 1) return !(c && ListHas(*c, "close"));
  return c && ListHas(*c, "keep-alive");
}

bool ParseVersion(std::string_view v, int* minor) {
  if (v.size() != 8 || v.substr(0, 7) != "HTTP/1.") return false;
  if (v[7] != '0' && v[7] != '1') return false;
  *minor = v[7] - '0';
  return true;
}

WireStatus FindHeadEnd(std::string_view in, size_t max_bytes, size_t* end) {
  size_t pos = in.find("\r\n\r\n");
  if (pos == std::string_view::npos || pos + 4 > max_bytes) {
    return in.size() >= max_bytes ? WireStatus::kTooLarge : WireStatus::kNeedMore;
  }
  *end = pos + 4;
  return WireStatus::kOk;
}

// The first line of a head that FindHeadEnd found to end at `end`, and the
// header lines after it.
struct HeadText {
  std::string_view first_line;
  std::string_view header_lines;
};
HeadText SplitHead(std::string_view in, size_t end) {
  std::string_view block = in.substr(0, end - 2);
  size_t eol = block.find("\r\n");
  if (eol == std::string_view::npos) return {block, {}};
  return {block.substr(0, eol), block.substr(eol + 2)};
}

}  // namespace

std::optional<std::string_view> RequestHead::Find(std::string_view name) const {
  return FindHeader(headers, name);
}
std::optional<std::string_view> ResponseHead::Find(std::string_view name) const {
  return FindHeader(headers, name);
}
std::string ResponseHead::MediaType() const {
  auto ct = Find("content-type");
  return ct ? ToLower(Trim(ct->substr(0, ct->find(';')))) : std::string();
}

WireStatus ParseRequestHead(std::string_view in, size_t max_bytes, RequestHead* head,
                            size_t* used) {
  // Empty lines before a request are allowed (RFC 9112 2.2).
  size_t skip = 0;
  while (skip + 1 < in.size() && in[skip] == '\r' && in[skip + 1] == '\n') skip += 2;
  in.remove_prefix(skip);
  size_t end = 0;
  WireStatus s = FindHeadEnd(in, max_bytes, &end);
  if (s != WireStatus::kOk) return s;
  *head = RequestHead{};
  *used = skip + end;
  const HeadText text = SplitHead(in, end);
  std::string_view line = text.first_line;
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    head->error = "malformed request line";
    return WireStatus::kBad;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), IsTokenChar)) {
    head->error = "bad method";
    return WireStatus::kBad;
  }
  if (target.empty() || target.front() != '/' ||
      std::any_of(target.begin(), target.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    head->error = "request target must be a path starting with /";
    return WireStatus::kBad;
  }
  if (!ParseVersion(line.substr(sp2 + 1), &head->minor_version)) {
    head->error = "unsupported HTTP version (HTTP/1.0 and 1.1 are served)";
    return WireStatus::kBad;
  }
  head->method = std::string(method);
  head->target = std::string(target);
  head->path = std::string(target.substr(0, target.find('?')));
  if (!ParseHeaders(text.header_lines, &head->headers, &head->error)) {
    return WireStatus::kBad;
  }
  std::optional<uint64_t> length;
  if (!Framing(head->headers, &head->chunked, &length, &head->error)) return WireStatus::kBad;
  head->content_length = length.value_or(0);
  head->keep_alive = KeepAlive(head->headers, head->minor_version);
  return WireStatus::kOk;
}

WireStatus ParseResponseHead(std::string_view in, size_t max_bytes, ResponseHead* head,
                             size_t* used) {
  size_t end = 0;
  WireStatus s = FindHeadEnd(in, max_bytes, &end);
  if (s != WireStatus::kOk) return s;
  *head = ResponseHead{};
  *used = end;
  const HeadText text = SplitHead(in, end);
  std::string_view line = text.first_line;
  if (line.size() < 12 || !ParseVersion(line.substr(0, 8), &head->minor_version) ||
      line[8] != ' ' || (line.size() > 12 && line[12] != ' ')) {
    head->error = "malformed status line";
    return WireStatus::kBad;
  }
  int status = 0;
  auto [p, ec] = std::from_chars(line.data() + 9, line.data() + 12, status);
  if (ec != std::errc() || p != line.data() + 12 || status < 100) {
    head->error = "bad status code";
    return WireStatus::kBad;
  }
  head->status = status;
  if (!ParseHeaders(text.header_lines, &head->headers, &head->error)) {
    return WireStatus::kBad;
  }
  if (!Framing(head->headers, &head->chunked, &head->content_length, &head->error)) {
    return WireStatus::kBad;
  }
  head->keep_alive = KeepAlive(head->headers, head->minor_version);
  return WireStatus::kOk;
}

WireStatus ChunkedDecoder::Feed(std::string_view in, size_t* consumed, std::string* payload) {
  return Decode(in, consumed, [payload](std::string_view d) {
    if (payload) payload->append(d);
  });
}

WireStatus ChunkedDecoder::Feed(std::string_view in, size_t* consumed, BodySink& sink) {
  return Decode(in, consumed, [&sink](std::string_view d) { sink.OnBody(d); });
}

template <typename OnData>
WireStatus ChunkedDecoder::Decode(std::string_view in, size_t* consumed, OnData on_data) {
  size_t i = 0;
  while (i < in.size() && state_ != State::kDone) {
    const char c = in[i];
    switch (state_) {
      case State::kSize: {
        int digit = -1;
        if (c >= '0' && c <= '9')
          digit = c - '0';
        else if (c >= 'a' && c <= 'f')
          digit = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
          digit = c - 'A' + 10;
        if (digit >= 0 && !in_extension_) {
          if (++size_digits_ > 15) return Bad("chunk size of more than 15 hex digits", i, consumed);
          remaining_ = remaining_ * 16 + digit;
        } else if (c == ';' || c == ' ' || c == '\t' || in_extension_) {
          if (size_digits_ == 0) return Bad("chunk-size line without a size", i, consumed);
          if (c == '\r') {
            state_ = State::kSizeLineEnd;
          } else {
            in_extension_ = true;
            if (++line_bytes_ > 4096) return Bad("chunk-size line longer than 4 KiB", i, consumed);
          }
        } else if (c == '\r' && size_digits_ > 0) {
          state_ = State::kSizeLineEnd;
        } else {
          return Bad("bad chunk size (not a hex digit)", i, consumed);
        }
        ++i;
        break;
      }
      case State::kSizeLineEnd:
        if (c != '\n') return Bad("chunk-size line not ended by CRLF", i, consumed);
        ++i;
        size_digits_ = 0;
        line_bytes_ = 0;
        in_extension_ = false;
        state_ = remaining_ == 0 ? State::kTrailer : State::kData;
        trailer_line_len_ = 0;
        break;
      case State::kData: {
        const size_t n = std::min<uint64_t>(remaining_, in.size() - i);
        on_data(in.substr(i, n));
        remaining_ -= n;
        total_ += n;
        i += n;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return Bad("chunk data longer than its size (expected CRLF)", i, consumed);
        ++i;
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return Bad("chunk data not ended by CRLF", i, consumed);
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        ++i;
        if (c == '\n') {
          if (trailer_line_len_ == 0) state_ = State::kDone;
          trailer_line_len_ = 0;
        } else if (c != '\r') {
          ++trailer_line_len_;
          if (++line_bytes_ > 8192) return Bad("trailer section longer than 8 KiB", i, consumed);
        }
        break;
      case State::kDone:
        break;
    }
  }
  *consumed = i;
  return WireStatus::kOk;
}

std::string_view StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

std::string ResponseHeadBytes(int status, std::string_view content_type,
                              std::optional<size_t> body_length, bool keep_alive,
                              const std::vector<Header>& extra) {
  std::string s = fmt::format("HTTP/1.1 {} {}\r\n", status, StatusText(status));
  if (!content_type.empty()) s += fmt::format("Content-Type: {}\r\n", content_type);
  if (body_length) {
    s += fmt::format("Content-Length: {}\r\n", *body_length);
  } else {
    s += "Transfer-Encoding: chunked\r\n";
  }
  if (!keep_alive) s += "Connection: close\r\n";
  for (const Header& h : extra) s += fmt::format("{}: {}\r\n", h.name, h.value);
  s += "\r\n";
  return s;
}

std::string ChunkBytes(std::string_view data) {
  if (data.empty()) return "0\r\n\r\n";
  std::string s = fmt::format("{:x}\r\n", data.size());
  s.append(data);
  s += "\r\n";
  return s;
}

}  // namespace anxin::net
