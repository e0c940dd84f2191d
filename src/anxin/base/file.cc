#include "anxin/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <random>
#include <string>
#include <utility>

namespace anxin {
namespace {

constexpr mode_t kDefaultMode = 0644;

// A suffix for temporary names; unpredictable enough that concurrent writers
// (threads or processes) do not collide, and retried on EEXIST anyway.
std::string RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   (static_cast<uint64_t>(getpid()) << 32) ^ counter.fetch_add(1));
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 8; ++i) out += kChars[rng() % (sizeof(kChars) - 1)];
  return out;
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(ErrnoError(errno, "write " + what));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Ok();
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  return ReadFile(path, std::numeric_limits<size_t>::max());
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "open " + path));
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return InvalidArgument(path + " is a directory, not a file");
    }
    if (st.st_size > 0) {
      out.reserve(std::min(static_cast<size_t>(st.st_size), max_bytes));
    }
  }
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = ErrnoError(errno, "read " + path);
      ::close(fd);
      return std::unexpected(std::move(e));
    }
    if (n == 0) break;
    if (static_cast<size_t>(n) > max_bytes - out.size()) {
      ::close(fd);
      return InvalidArgument(path + " is larger than " + std::to_string(max_bytes) +
                             " bytes; is it the right file?");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                  size_t max_bytes) {
  const std::string where = std::string(what) + " " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(where + ": is a directory, not a file");
  }
  auto text = ReadFile(path, max_bytes);
  if (!text) {
    Error e = std::move(text).error();
    if (e.code() == ErrorCode::kNotFound)
      return std::unexpected(std::move(e).With(std::string(what)));
    return InvalidArgument(std::string(what) + ": " + e.Describe());
  }
  if (text->empty()) return InvalidArgument(where + ": the file is empty");
  return text;
}

Result<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path,
                                                std::optional<mode_t> mode) {
  if (path.empty() || path.back() == '/') {
    return InvalidArgument("'" + path + "' is not a file name");
  }
  AtomicFileWriter w;
  w.path_ = path;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  w.name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  w.dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (w.dir_fd_ < 0)
    return std::unexpected(ErrnoError(errno, "write " + path + ": directory " + dir));

  struct stat st {};
  if (::fstatat(w.dir_fd_, w.name_.c_str(), &st, 0) == 0) {
    if (S_ISDIR(st.st_mode)) return InvalidArgument(path + " is a directory, not a file");
    if (!mode) mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    return std::unexpected(ErrnoError(errno, "stat " + path));
  }
  mode_t m = mode.value_or(kDefaultMode);

  // An unnamed file disappears by itself if this process dies before Commit.
  w.fd_ = ::openat(w.dir_fd_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, m);
  if (w.fd_ < 0) {
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      return std::unexpected(
          ErrnoError(errno, "write " + path + ": create a temporary file in " + dir));
    }
    for (int attempt = 0; attempt < 100 && w.fd_ < 0; ++attempt) {
      std::string name = "." + w.name_ + ".tmp." + RandomSuffix();
      w.fd_ = ::openat(w.dir_fd_, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, m);
      if (w.fd_ >= 0) {
        w.temp_name_ = name;
      } else if (errno != EEXIST) {
        return std::unexpected(
            ErrnoError(errno, "write " + path + ": create a temporary file in " + dir));
      }
    }
    if (w.fd_ < 0)
      return std::unexpected(
          ErrnoError(EEXIST, "write " + path + ": create a temporary file in " + dir));
  }
  // The umask applied at creation; the mode asked for (or kept) is exact.
  if (::fchmod(w.fd_, m) != 0) return std::unexpected(ErrnoError(errno, "chmod " + path));
  return w;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      name_(std::move(other.name_)),
      temp_name_(std::move(other.temp_name_)),
      fd_(std::exchange(other.fd_, -1)),
      dir_fd_(std::exchange(other.dir_fd_, -1)),
      committed_(other.committed_) {
  other.temp_name_.clear();
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    Abandon();
    path_ = std::move(other.path_);
    name_ = std::move(other.name_);
    temp_name_ = std::exchange(other.temp_name_, std::string());
    fd_ = std::exchange(other.fd_, -1);
    dir_fd_ = std::exchange(other.dir_fd_, -1);
    committed_ = other.committed_;
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_name_.empty() && dir_fd_ >= 0) {
    ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
  }
  if (dir_fd_ >= 0) ::close(dir_fd_);
  fd_ = -1;
  dir_fd_ = -1;
  temp_name_.clear();
}

Status AtomicFileWriter::Write(std::string_view data) {
  if (fd_ < 0) return FailedPrecondition("write " + path_ + ": the writer is closed");
  return WriteAll(fd_, data, path_);
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0 || committed_) {
    return FailedPrecondition("commit " + path_ + ": the writer is closed");
  }
  if (::fsync(fd_) != 0) return std::unexpected(ErrnoError(errno, "fsync " + path_));
  if (temp_name_.empty()) {
    // Give the unnamed file a name; linkat cannot replace, rename can.
    std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; attempt < 100 && temp_name_.empty(); ++attempt) {
      std::string name = "." + name_ + ".tmp." + RandomSuffix();
      if (::linkat(AT_FDCWD, proc.c_str(), dir_fd_, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        temp_name_ = name;
      } else if (errno != EEXIST) {
        return std::unexpected(ErrnoError(errno, "link temporary file for " + path_));
      }
    }
    if (temp_name_.empty()) {
      return std::unexpected(ErrnoError(EEXIST, "link temporary file for " + path_));
    }
  }
  if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
    return std::unexpected(ErrnoError(errno, "rename temporary file over " + path_));
  }
  committed_ = true;
  temp_name_.clear();
  if (::fsync(dir_fd_) != 0) {
    return std::unexpected(ErrnoError(errno, "fsync the directory of " + path_));
  }
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && errno != EINTR) {
    return std::unexpected(ErrnoError(errno, "close " + path_));
  }
  return Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view contents,
                       std::optional<mode_t> mode) {
  ANXIN_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Open(path, mode));
  ANXIN_TRY(writer.Write(contents));
  return writer.Commit();
}

}  // namespace anxin
