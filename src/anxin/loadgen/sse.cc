#include "anxin/loadgen/sse.h"

#include <cstring>

namespace anxin::loadgen {

Status SseParser::Feed(std::string_view bytes, SseSink& sink) {
  if (failed_) return DataLoss("event stream already malformed");
  size_t i = 0;
  if (after_cr_ && !bytes.empty()) {
    after_cr_ = false;
    if (bytes[0] == '\n') i = 1;
  }
  while (i < bytes.size()) {
    const char* start = bytes.data() + i;
    size_t left = bytes.size() - i;
    const char* end = static_cast<const char*>(std::memchr(start, '\n', left));
    const char* cr = static_cast<const char*>(std::memchr(start, '\r', end ? end - start : left));
    if (cr) end = cr;
    if (!end) {
      if (line_.size() + left + data_.size() > kMaxEventBytes) {
        failed_ = true;
        return DataLoss("event longer than 16 MiB");
      }
      line_.append(start, left);
      break;
    }
    size_t n = static_cast<size_t>(end - start);
    if (line_.empty()) {
      Line(std::string_view(start, n), sink);
    } else {
      line_.append(start, n);
      std::string line = std::move(line_);
      line_.clear();
      Line(line, sink);
    }
    i += n + 1;
    if (*end == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        after_cr_ = true;
      }
    }
    if (data_.size() > kMaxEventBytes) {
      failed_ = true;
      return DataLoss("event longer than 16 MiB");
    }
  }
  return Ok();
}

void SseParser::Line(std::string_view line, SseSink& sink) {
  if (line.empty()) {
    if (has_data_) {
      sink.OnEvent(data_);
      data_.clear();
      has_data_ = false;
    }
    return;
  }
  if (line.front() == ':') return;  // comment
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace anxin::loadgen
