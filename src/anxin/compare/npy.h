// Reader for NumPy .npy files (format versions 1, 2 and 3).
//
//   ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open("out.npy"));
//   ANXIN_ASSIGN_OR_RETURN(Tensor t, ParseNpy(file, file->bytes(), "out.npy", {}));
//   // or, with the PATH.dtype sidecar honoured:
//   ANXIN_ASSIGN_OR_RETURN(Tensor u, ReadNpyFile("out.npy", {}));
//
// Every numeric dtype in either byte order, Fortran order and 0-d arrays are
// accepted; object arrays (|O) and structured dtypes are rejected. Raw
// two-byte voids (<V2, how ml_dtypes' bfloat16 is saved) and one-byte voids
// (|V1, fp8) are read only when the caller names their type, because nothing
// in the file says what they are.
#ifndef ANXIN_COMPARE_NPY_H_
#define ANXIN_COMPARE_NPY_H_

#include <memory>
#include <optional>
#include <span>

#include "anxin/base/error.h"
#include "anxin/compare/tensor.h"

namespace anxin::compare {

struct NpyOptions {
  // The type of <V2 / |V1 elements (bfloat16 / float16, or fp8), from a flag,
  // a sidecar file or the dump's own metadata.
  std::optional<DType> void_as;
};

// Parses bytes, the contents of the .npy named by owner->path() (or an archive
// member: label names it in messages). The tensor keeps owner alive.
// Truncated or corrupt input -> kDataLoss "label: offset N: problem".
Result<Tensor> ParseNpy(std::shared_ptr<const MappedFile> owner, std::span<const uint8_t> bytes,
                        const std::string& label, const NpyOptions& options);

// Opens and parses a file; a sidecar "PATH.dtype" holding a dtype name (for
// example "bfloat16") sets void_as when options leave it unset (it is read
// only for raw void elements). The header is read with pread and the data
// mapped but not touched.
Result<Tensor> ReadNpyFile(const std::string& path, const NpyOptions& options);

// Reads the dtype named in the sidecar file PATH.dtype, if there is one.
Result<std::optional<DType>> ReadDTypeSidecar(const std::string& path);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_NPY_H_
