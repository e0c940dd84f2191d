// Loading one side of a comparison: a tensor file, an archive, a plain
// directory of tensor files, or an msprobe dump directory.
//
//   LoadOptions opts;
//   ANXIN_ASSIGN_OR_RETURN(Dump npu, LoadDump("npu_dump/step0/rank0", opts));
//   for (const Tensor& t : npu.tensors) {   // in execution order
//     std::printf("%s\n", t.name.c_str());
//   }
//
// What a path is, is decided from the path itself:
//   *.npy, *.npz, *.safetensors         one file
//   a directory holding dump.json       msprobe dump (stack.json, construct.json and
//                                       dump_tensor_data/ beside it)
//   any other directory                 every tensor file below it, in path order
//   *.pt, *.pth                          rejected with the conversion command (docs/compare.md)
#ifndef ANXIN_COMPARE_DUMP_H_
#define ANXIN_COMPARE_DUMP_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/compare/npy.h"
#include "anxin/compare/tensor.h"

namespace anxin::compare {

struct LoadOptions {
  NpyOptions npy;  // how to read <V2 / |V1 when no sidecar or dump.json says
};

struct Dump {
  std::string path;
  std::string kind;             // "msprobe", "directory", "npy", "npz", "safetensors"
  std::string task;             // msprobe: "statistics" or "tensor"
  std::vector<Tensor> tensors;  // execution order
  // msprobe stack.json: op name -> call stack lines (innermost first).
  std::map<std::string, std::vector<std::string>> stacks;
  // msprobe construct.json: op or module call -> the module call it ran in
  // (absent or "" at the top).
  std::map<std::string, std::string> parents;
};

Result<Dump> LoadDump(const std::string& path, const LoadOptions& options);

// Parses msprobe's dump.json text (path names it in messages). Tensor files
// named by data_name are looked up in data_dir; pass "" to keep only
// statistics. The order of ops in the file is the execution order.
Result<Dump> ParseMsprobeDump(std::string_view json_text, const std::string& path,
                              const std::string& data_dir, const LoadOptions& options);

// Parses stack.json in either layout msprobe has written:
// {"0": [[op names], [stack lines]]} or {"op name": [stack lines]}.
Result<std::map<std::string, std::vector<std::string>>> ParseMsprobeStacks(
    std::string_view json_text, const std::string& path);

// Parses construct.json: {"Functional.conv2d.0.forward":
// "Module.conv1.Conv2d.forward.0", "Module.conv1.Conv2d.forward.0": null}.
// Entries whose value is neither a string nor null are skipped.
Result<std::map<std::string, std::string>> ParseMsprobeConstruct(std::string_view json_text,
                                                                 const std::string& path);

// The module calls around op in d.parents, innermost first; stops at the top,
// at a cycle, or after 256 levels.
std::vector<std::string> EnclosingModules(const Dump& d, const std::string& op);

}  // namespace anxin::compare

#endif  // ANXIN_COMPARE_DUMP_H_
