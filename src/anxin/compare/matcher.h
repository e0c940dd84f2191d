// Pairs the tensors of two dumps.
//
//   #include "anxin/compare/dump.h"
//
//   ANXIN_ASSIGN_OR_RETURN(Dump npu, LoadDump("npu/step0/rank0", {}));
//   ANXIN_ASSIGN_OR_RETURN(Dump gpu, LoadDump("gpu/step0/rank0", {}));
//   MatchOptions opts;
//   opts.fuzzy = true;                                   // msprobe's fuzzy mode
//   ANXIN_ASSIGN_OR_RETURN(opts.renames, LoadRenames("map.yaml"));
//   MatchResult m = MatchTensors(npu.tensors, gpu.tensors, opts);
//
// Exact mode pairs equal names. Fuzzy mode drops the call index
// ("Functional.conv2d.3.forward.input.0" -> "Functional.conv2d.forward.input.0",
// "Module.layer1.Conv2d.forward.2.output.0" -> "Module.layer1.Conv2d.forward.output.0",
// "Module.fc.Linear.parameters_grad.1.weight" -> "Module.fc.Linear.parameters_grad.weight")
// and pairs the k-th occurrence on one side with the k-th on the other. A
// rename file maps layer names on the output side to the reference's names:
//
//   [yaml]
//   # out name fragment: ref name fragment (applied in order, first match wins)
//   Module.block1.conv_a: Module.layer1.0.conv1
//
// Shapes are not part of the key: a pair with different shapes is reported
// as a shape mismatch rather than as two unmatched tensors.
#ifndef ANXIN_COMPARE_MATCHER_H_
#define ANXIN_COMPARE_MATCHER_H_

#include <string>
#include <utility>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/tensor.h"

namespace anxin::compare {

struct MatchOptions {
  bool fuzzy = false;
  std::vector<std::pair<std::string, std::string>> renames;
};

struct MatchResult {
  std::vector<std::pair<size_t, size_t>> pairs;  // (out index, ref index), in output order
  std::vector<size_t> unmatched_out;
  std::vector<size_t> unmatched_ref;
};

// The fuzzy-mode key of a tensor name.
std::string FuzzyKey(const std::string& name);

Result<std::vector<std::pair<std::string, std::string>>> ParseRenames(std::string_view yaml,
                                                                      const std::string& source);
Result<std::vector<std::pair<std::string, std::string>>> LoadRenames(const std::string& path);

MatchResult MatchTensors(const std::vector<Tensor>& out, const std::vector<Tensor>& ref,
                         const MatchOptions& options);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_MATCHER_H_
