#include "anxin/base/line_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace anxin {

LineReader::LineReader(std::string_view text)
    : data_(text.data()), pos_(0), end_(text.size()), eof_(true) {}

Result<LineReader> LineReader::OpenInput(const std::string& path, std::string_view what,
                                         size_t max_line_bytes) {
  // The same checks and words as ReadInputFile (file.cc).
  const std::string where = std::string(what) + " " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(where + ": is a directory, not a file");
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Error e = ErrnoError(errno, "open " + path);
    if (e.code() == ErrorCode::kNotFound)
      return std::unexpected(std::move(e).With(std::string(what)));
    return InvalidArgument(std::string(what) + ": " + e.Describe());
  }
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint only
  LineReader r;
  r.fd_ = fd;
  r.eof_ = false;
  r.path_ = path;
  r.what_ = std::string(what);
  r.max_line_bytes_ = max_line_bytes;
  r.capacity_ = kBlockBytes;
  r.buffer_ = std::make_unique_for_overwrite<char[]>(r.capacity_);
  r.data_ = r.buffer_.get();
  ANXIN_TRY(r.Fill());
  if (r.eof_ && r.end_ == 0) return InvalidArgument(where + ": the file is empty");
  return r;
}

LineReader::LineReader(LineReader&& other) noexcept { *this = std::move(other); }

LineReader& LineReader::operator=(LineReader&& other) noexcept {
  if (this != &other) {
    Close();
    data_ = std::exchange(other.data_, nullptr);
    pos_ = std::exchange(other.pos_, 0);
    end_ = std::exchange(other.end_, 0);
    line_number_ = std::exchange(other.line_number_, 0);
    eof_ = std::exchange(other.eof_, true);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
    capacity_ = std::exchange(other.capacity_, 0);
    max_line_bytes_ = other.max_line_bytes_;
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

LineReader::~LineReader() { Close(); }

void LineReader::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<bool> LineReader::NextAcrossBlocks(std::string_view& line) {
  for (;;) {
    // Next found no '\n' in [pos_, end_); Fill keeps that text and adds a block.
    const size_t searched = end_ - pos_;
    if (eof_) {
      if (searched == 0) return false;
      return Take(end_, end_, line);
    }
    ANXIN_TRY(Fill());
    const size_t from = pos_ + searched;
    if (from < end_) {
      const void* nl = std::memchr(data_ + from, '\n', end_ - from);
      if (nl != nullptr) return TakeThrough(static_cast<const char*>(nl) - data_, line);
    }
  }
}

Result<bool> LineReader::TooLong() const {
  return InvalidArgument(fmt::format("{}:{}: a line longer than {} bytes; is it the right file?",
                                     path_, line_number_ + 1, max_line_bytes_));
}

Status LineReader::Fill() {
  const size_t tail = end_ - pos_;
  if (tail > max_line_bytes_) return std::unexpected(TooLong().error());
  if (pos_ > 0) {
    std::memmove(buffer_.get(), buffer_.get() + pos_, tail);
    pos_ = 0;
    end_ = tail;
  }
  // At least half the buffer free, so that reads stay large while one line grows.
  if (capacity_ - end_ < capacity_ / 2) {
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity_ * 2);
    std::memcpy(bigger.get(), buffer_.get(), end_);
    buffer_ = std::move(bigger);
    capacity_ *= 2;
  }
  data_ = buffer_.get();
  for (;;) {
    ssize_t n = ::read(fd_, buffer_.get() + end_, capacity_ - end_);
    if (n < 0) {
      if (errno == EINTR) continue;
      return InvalidArgument(what_ + ": " + ErrnoError(errno, "read " + path_).Describe());
    }
    if (n == 0) {
      eof_ = true;
      Close();
    } else {
      end_ += static_cast<size_t>(n);
    }
    return Ok();
  }
}

}  // namespace anxin
