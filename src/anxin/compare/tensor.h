// A tensor as found in a dump: either a view of raw elements (usually inside a
// memory-mapped file) or only its summary statistics (msprobe statistics mode).
//
//   #include <algorithm>
//   #include "anxin/compare/npy.h"
//
//   ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open("out.npy"));
//   ANXIN_ASSIGN_OR_RETURN(Tensor t, ParseNpy(file, file->bytes(), "out.npy", {}));
//   std::vector<double> buf(4096);
//   for (uint64_t i = 0; i < t.NumElements(); i += buf.size()) {
//     size_t count = std::min<uint64_t>(buf.size(), t.NumElements() - i);
//     t.ReadDoubles(i, count, buf.data());
//   }
//
// A Tensor owns nothing but a shared reference that keeps its bytes mapped.
// Thread safety: const methods may be called from many threads at once.
#ifndef ANXIN_COMPARE_TENSOR_H_
#define ANXIN_COMPARE_TENSOR_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/dtype.h"

namespace anxin::compare {

// A read-only memory mapping of a whole file (or of an inflated archive
// member in an unlinked temporary file). Pages are read on demand, so a file
// larger than RAM works.
class MappedFile {
 public:
  // kNotFound for a missing file; an empty file maps to an empty span.
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  // Also reads the first min(prefix_bytes, size) bytes into *prefix with
  // pread, without touching the mapping (no page is mapped by reading them).
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path,
                                                        uint64_t prefix_bytes,
                                                        std::vector<uint8_t>* prefix);
  // Wraps bytes already in memory (tests, fuzzers). Copies them.
  static std::shared_ptr<const MappedFile> FromBytes(std::string name, std::span<const uint8_t> b);
  // Takes an already open descriptor of size bytes; closes it.
  static Result<std::shared_ptr<const MappedFile>> FromFd(std::string name, int fd, uint64_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // True when bytes() is a file mapping whose pages may be dropped after use.
  bool mapped() const { return mapped_; }
  // Drops every mapped page from this process (they stay in the page cache).
  // Readers call it after parsing headers: with thousands of files, the pages
  // mapped around each header would otherwise add up.
  void ReleasePages() const;
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
};

// Summary statistics as msprobe records them.
struct TensorStats {
  double max = 0, min = 0, mean = 0, norm = 0;
};

struct Tensor {
  std::string name;            // match key: "Functional.conv2d.0.forward.input.0", "w.npy"
  std::string op;              // the call it belongs to ("Functional.conv2d.0.forward"); else name
  std::string source;          // file the data lives in (for messages)
  std::string dtype_label;     // as written in the dump ("torch.float32"); may be empty
  std::optional<DType> dtype;  // unset for statistics-only entries of unknown type
  std::vector<int64_t> shape;
  // Raw elements; empty for statistics-only entries.
  const uint8_t* data = nullptr;
  uint64_t data_offset = 0;  // where data starts in source (for messages)
  bool swap_bytes = false;   // stored big-endian
  bool fortran_order = false;
  bool mapped = false;  // data is file-backed: pages can be released after reading
  // The whole file mapping data lies in, when mapped (page-aligned start).
  std::span<const uint8_t> mapping;
  std::shared_ptr<const void> keep_alive;
  std::optional<TensorStats> stats;  // from the dump, when there is no data
  // msprobe: the tensor file dump.json names, when it is not there (the
  // tensor then has only the statistics dump.json holds, if any).
  std::string missing_file;

  bool HasData() const { return data != nullptr || (dtype && NumElements() == 0 && !stats); }
  uint64_t NumElements() const;
  uint64_t NumBytes() const { return dtype ? NumElements() * DTypeSize(*dtype) : 0; }
  // Writes elements [first, first + count) in C (row-major) order as float64.
  // REQUIRES: HasData(), first + count <= NumElements().
  void ReadDoubles(uint64_t first, size_t count, double* out) const;
  // The mapped pages that hold elements [first, first + count) in storage
  // order (column-major for a Fortran-order tensor), rounded out
  // to the 2 MiB blocks around them within the file: what to drop from this
  // process once they are read (they stay in the page cache), so reading a
  // dump front to back keeps the resident set small (PageReleaser). Empty for
  // data not backed by a file. Other readers of the same pages fault them
  // back in.
  std::span<const uint8_t> ReleaseRange(uint64_t first, uint64_t count) const;
};

// Drops the pages of tensor ranges (Tensor::ReleaseRange) from this process,
// in batches. Each system call that drops pages from a multi-threaded process
// makes every other CPU running it flush its TLB (an interrupt to each, and
// in a virtual machine an exit); a batch costs one such flush where a call
// per range costs one each. Batches go through process_madvise on the
// process itself (Linux 6.16 and later flush once per batch), or madvise per
// range where that is refused. Batches hold at most batch_bytes, so the
// resident set stays bounded.
//
// Thread safety: one per thread; the tensors must stay mapped until Flush.
class PageReleaser {
 public:
  // batched = false: madvise per range (what older kernels get; for tests).
  explicit PageReleaser(uint64_t batch_bytes = uint64_t{8} << 20, bool batched = true)
      : batch_bytes_(batch_bytes), batched_(batched) {}
  ~PageReleaser() { Flush(); }
  PageReleaser(const PageReleaser&) = delete;
  PageReleaser& operator=(const PageReleaser&) = delete;

  void Add(const Tensor& t, uint64_t first, uint64_t count);
  void Flush();

 private:
  uint64_t batch_bytes_;
  bool batched_;
  uint64_t pending_ = 0;
  std::vector<iovec> ranges_;
};

// The error of a file reader that meets bytes it cannot take: a DataLoss
// naming the file (or member) and the byte offset, "x.npz: offset 30: ...".
std::unexpected<Error> Corrupt(const std::string& where, uint64_t offset, std::string_view what);

// "[2, 3, 4]".
std::string ShapeString(const std::vector<int64_t>& shape);

// Checks dims are non-negative and the element count fits in 63 bits;
// returns the element count.
Result<uint64_t> CheckedElementCount(const std::vector<int64_t>& shape);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_TENSOR_H_
