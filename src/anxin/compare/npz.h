// Reader for NumPy .npz archives (zip files of .npy members), stored or
// deflated, including ZIP64 archives over 4 GiB.
//
//   ANXIN_ASSIGN_OR_RETURN(std::vector<Tensor> ts, ReadNpzFile("run.npz", {}));
//   // ts[i].name is the member name without ".npy", in archive order.
//
// Stored members are viewed in place in the mapped archive. Deflated members
// are inflated once into an unlinked temporary file under $TMPDIR (default
// /tmp) and mapped from there, so memory stays bounded whatever their size.
#ifndef ANXIN_COMPARE_NPZ_H_
#define ANXIN_COMPARE_NPZ_H_

#include <memory>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/npy.h"
#include "anxin/compare/tensor.h"

namespace anxin::compare {

// Parses the archive held by file. Corrupt input -> kDataLoss naming
// file->path() (and the member) and the byte offset.
Result<std::vector<Tensor>> ParseNpz(std::shared_ptr<const MappedFile> file,
                                     const NpyOptions& options);
Result<std::vector<Tensor>> ReadNpzFile(const std::string& path, const NpyOptions& options);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_NPZ_H_
