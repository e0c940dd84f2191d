// Lines of a file, read in large blocks, or of text already in memory, handed
// out as views into one buffer: no allocation per line, so a 10-million-line
// input costs the scan and little else.
//
//   std::string path = "lengths.txt";
//   ANXIN_ASSIGN_OR_RETURN(LineReader r, LineReader::OpenInput(path, "--lengths"));
//   std::string_view line;
//   for (;;) {
//     ANXIN_ASSIGN_OR_RETURN(bool more, r.Next(line));
//     if (!more) break;
//     if (line.empty())
//       return InvalidArgument(path + ":" + std::to_string(r.line_number()) + ": a blank line");
//   }
//
//   LineReader m("a\r\nb");   // "a", "b": the same lines from memory
//
// Lines follow SplitLines (strings.h): without their '\n' and a '\r' before
// it; a last line without '\n' is a line; text that ends in '\n' has no empty
// last line.
//
// Thread safety: one thread at a time per reader.
#ifndef ANXIN_BASE_LINE_READER_H_
#define ANXIN_BASE_LINE_READER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin {

class LineReader {
 public:
  // Bytes read from the file at a time.
  static constexpr size_t kBlockBytes = size_t{1} << 20;
  // Longest line OpenInput accepts unless told otherwise.
  static constexpr size_t kDefaultMaxLineBytes = size_t{1} << 30;

  // The lines of text, which must outlive the reader (it is not copied).
  explicit LineReader(std::string_view text);

  // A file the user named as input, with ReadInputFile's errors (file.h),
  // each naming `what`: missing -> kNotFound ("--lengths: open x: No such
  // file or directory"); a directory, an unreadable file, an empty file ->
  // kInvalidArgument. A line longer than max_line_bytes is kInvalidArgument
  // naming the file and line (so /dev/zero cannot exhaust memory).
  static Result<LineReader> OpenInput(const std::string& path, std::string_view what,
                                      size_t max_line_bytes = kDefaultMaxLineBytes);

  LineReader(LineReader&& other) noexcept;
  LineReader& operator=(LineReader&& other) noexcept;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  ~LineReader();

  // The next line into `line` (valid until the next call); false after the
  // last one; an error when the file cannot be read or the line is too long.
  Result<bool> Next(std::string_view& line) {
    if (pos_ < end_) {
      const void* nl = std::memchr(data_ + pos_, '\n', end_ - pos_);
      if (nl != nullptr) return TakeThrough(static_cast<const char*>(nl) - data_, line);
    }
    return NextAcrossBlocks(line);
  }

  // 1-based number of the line Next returned last (0 before the first).
  size_t line_number() const { return line_number_; }

 private:
  LineReader() = default;
  std::string_view Cut(size_t begin, size_t end) const {
    if (end > begin && data_[end - 1] == '\r') --end;
    return std::string_view(data_ + begin, end - begin);
  }
  // The line in [pos_, end) into `line`, reading on at `next`.
  Result<bool> Take(size_t end, size_t next, std::string_view& line) {
    if (end - pos_ > max_line_bytes_) return TooLong();
    line = Cut(pos_, end);
    pos_ = next;
    ++line_number_;
    return true;
  }
  // The line that ends at the '\n' at `newline`.
  Result<bool> TakeThrough(std::ptrdiff_t newline, std::string_view& line) {
    const size_t at = static_cast<size_t>(newline);
    return Take(at, at + 1, line);
  }
  Result<bool> NextAcrossBlocks(std::string_view& line);
  // The error for the line after line_number_.
  Result<bool> TooLong() const;
  // Moves the unread tail to the front and reads one block after it; sets eof_.
  Status Fill();
  void Close();

  const char* data_ = nullptr;  // text_ or buffer_
  size_t pos_ = 0;              // start of the unread text
  size_t end_ = 0;              // end of the text read so far
  size_t line_number_ = 0;
  bool eof_ = true;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t max_line_bytes_ = SIZE_MAX;  // OpenInput sets it
  std::string path_, what_;
};

}  // namespace anxin

#endif  // ANXIN_BASE_LINE_READER_H_
