// Reader for safetensors files: u64 little-endian header length, a JSON header
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, "__metadata__": {..}},
// then the raw little-endian data.
//
//   ANXIN_ASSIGN_OR_RETURN(std::vector<Tensor> ts, ReadSafetensorsFile("model.safetensors"));
//
// Tensors come back in data order; their data is viewed in the mapped file.
#ifndef ANXIN_COMPARE_SAFETENSORS_H_
#define ANXIN_COMPARE_SAFETENSORS_H_

#include <memory>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/tensor.h"

namespace anxin::compare {

// Corrupt input -> kDataLoss "path: offset N: problem"; an unsupported dtype
// -> kInvalidArgument naming the tensor.
Result<std::vector<Tensor>> ParseSafetensors(std::shared_ptr<const MappedFile> file);
Result<std::vector<Tensor>> ReadSafetensorsFile(const std::string& path);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_SAFETENSORS_H_
