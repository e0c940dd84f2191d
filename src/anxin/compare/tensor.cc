#include "anxin/compare/tensor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace anxin::compare {

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  return Open(path, 0, nullptr);
}

namespace {

// pread until n bytes or end of file.
Status PreadAll(int fd, const std::string& path, uint64_t n, std::vector<uint8_t>* out) {
  out->resize(n);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out->data() + got, n - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return std::unexpected(ErrnoError(errno, "read " + path));
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  out->resize(got);
  return Ok();
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path,
                                                           uint64_t prefix_bytes,
                                                           std::vector<uint8_t>* prefix) {
  // O_NONBLOCK: a FIFO in a dump would otherwise block the open until some
  // process writes to it; here it is refused as not a regular file. Reads of
  // regular files ignore the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::unexpected(ErrnoError(errno, "open " + path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return std::unexpected(ErrnoError(e, "stat " + path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (prefix) {
    if (Status s = PreadAll(fd, path, std::min(prefix_bytes, size), prefix); !s) {
      ::close(fd);
      return std::unexpected(s.error());
    }
  }
  return FromFd(path, fd, size);
}

Result<std::shared_ptr<const MappedFile>> MappedFile::FromFd(std::string name, int fd,
                                                             uint64_t size) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(name);
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return std::unexpected(ErrnoError(e, "mmap " + f->path_));
    }
    // Dumps are read front to back once: ask for aggressive read-ahead.
    ::madvise(p, size, MADV_SEQUENTIAL);
    f->data_ = static_cast<const uint8_t*>(p);
    f->size_ = size;
    f->mapped_ = true;
  }
  ::close(fd);
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::FromBytes(std::string name,
                                                        std::span<const uint8_t> b) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(name);
  f->owned_.assign(b.begin(), b.end());
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  return f;
}

void MappedFile::ReleasePages() const {
  if (mapped_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

uint64_t Tensor::NumElements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void Tensor::ReadDoubles(uint64_t first, size_t count, double* out) const {
  const size_t size = DTypeSize(*dtype);
  if (!fortran_order || shape.size() < 2) {
    ConvertToDouble(*dtype, data + first * size, swap_bytes, count, out);
    return;
  }
  // Column-major storage: map each row-major index to its storage offset.
  // Rare in dumps, so clarity beats speed here.
  const size_t nd = shape.size();
  std::vector<uint64_t> idx(nd);
  uint64_t rest = first;
  for (size_t d = nd; d-- > 0;) {
    idx[d] = rest % static_cast<uint64_t>(shape[d]);
    rest /= static_cast<uint64_t>(shape[d]);
  }
  for (size_t i = 0; i < count; ++i) {
    uint64_t off = 0, stride = 1;
    for (size_t d = 0; d < nd; ++d) {
      off += idx[d] * stride;
      stride *= static_cast<uint64_t>(shape[d]);
    }
    ConvertToDouble(*dtype, data + off * size, swap_bytes, 1, out + i);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < static_cast<uint64_t>(shape[d])) break;
      idx[d] = 0;
    }
  }
}

std::span<const uint8_t> Tensor::ReleaseRange(uint64_t first, uint64_t count) const {
  if (!mapped || count == 0) return {};
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // A page fault may map a whole page-cache folio (naturally aligned, at most
  // 2 MiB) around the faulting page, including pages of a neighbouring range
  // that another thread has already released. Rounding out to 2 MiB catches
  // every page this range's faults can have mapped, so once the last reader
  // of each 2 MiB block has released it, nothing stays mapped. A neighbour
  // still reading inside the block faults its pages back in from the page
  // cache: the mapping is private and read-only, never written. The range is
  // kept within this tensor's file mapping.
  constexpr uintptr_t kBlock = uintptr_t{2} << 20;
  const size_t size = DTypeSize(*dtype);
  uintptr_t begin = reinterpret_cast<uintptr_t>(data + first * size);
  uintptr_t end = begin + count * size;
  begin &= ~(kBlock - 1);
  end = (end + kBlock - 1) & ~(kBlock - 1);
  const uintptr_t map_begin = reinterpret_cast<uintptr_t>(mapping.data());
  const uintptr_t map_end = (map_begin + mapping.size() + kPage - 1) & ~(kPage - 1);
  begin = std::max(begin, map_begin);
  end = std::min(end, map_end);
  if (end <= begin) return {};
  return {reinterpret_cast<const uint8_t*>(begin), end - begin};
}

namespace {

// A descriptor of this process for process_madvise, or -1 where there is
// none (opened once; kept for the life of the process).
int SelfPidfd() {
  static const int fd = [] {
#if defined(SYS_pidfd_open) && defined(SYS_process_madvise)
    return static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
#else
    return -1;
#endif
  }();
  return fd;
}

// Cleared the first time the kernel refuses MADV_DONTNEED through
// process_madvise (older kernels accept only a few advices there).
std::atomic<bool> batched_release_works{true};

}  // namespace

void PageReleaser::Add(const Tensor& t, uint64_t first, uint64_t count) {
  auto r = t.ReleaseRange(first, count);
  if (r.empty()) return;
  auto* b = const_cast<uint8_t*>(r.data());
  uint8_t* e = b + r.size();
  auto* lb = ranges_.empty() ? nullptr : static_cast<uint8_t*>(ranges_.back().iov_base);
  if (lb && b <= lb + ranges_.back().iov_len && e >= lb) {
    // Overlaps the last range (consecutive pieces of one tensor): merge.
    iovec& last = ranges_.back();
    pending_ -= last.iov_len;
    e = std::max(e, lb + last.iov_len);
    b = std::min(b, lb);
    last = {b, static_cast<size_t>(e - b)};
  } else {
    ranges_.push_back({b, r.size()});
  }
  pending_ += ranges_.back().iov_len;
  // process_madvise takes at most UIO_MAXIOV (1024) ranges per call.
  if (pending_ >= batch_bytes_ || ranges_.size() >= 512) Flush();
}

void PageReleaser::Flush() {
  if (ranges_.empty()) return;
  bool done = false;
#if defined(SYS_process_madvise)
  if (batched_ && batched_release_works.load(std::memory_order_relaxed) && SelfPidfd() >= 0) {
    const long r = ::syscall(SYS_process_madvise, SelfPidfd(), ranges_.data(), ranges_.size(),
                             MADV_DONTNEED, 0u);
    if (r >= 0 && static_cast<uint64_t>(r) == pending_) {
      done = true;
    } else if (r < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM)) {
      batched_release_works.store(false, std::memory_order_relaxed);
    }
  }
#endif
  if (!done) {
    for (const iovec& r : ranges_) ::madvise(r.iov_base, r.iov_len, MADV_DONTNEED);
  }
  ranges_.clear();
  pending_ = 0;
}

std::unexpected<Error> Corrupt(const std::string& where, uint64_t offset, std::string_view what) {
  return DataLoss(fmt::format("{}: offset {}: {}", where, offset, what));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<uint64_t> CheckedElementCount(const std::vector<int64_t>& shape) {
  unsigned __int128 n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(fmt::format("negative dimension {} in shape", d));
    n *= static_cast<uint64_t>(d);
    if (n > (static_cast<unsigned __int128>(1) << 62))
      return InvalidArgument("shape " + ShapeString(shape) + " has too many elements");
  }
  return static_cast<uint64_t>(n);
}

}  // namespace anxin::compare
