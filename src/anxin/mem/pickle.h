// A small, safe reader of Python pickles that hold plain data only: dict,
// list, tuple, str, int, float, bool and None (protocols 2 to 5). Anything
// that could run code (GLOBAL, REDUCE, BUILD, ...) or build other objects is
// an error naming the opcode and its offset, so a snapshot from an untrusted
// source can be read without Python. PyTorch's memory snapshots
// (torch.cuda.memory._snapshot()) are such pickles.
//
//   ANXIN_ASSIGN_OR_RETURN(PickleDoc doc, ReadPickleFile("snap.pickle"));
//   const PickleNode& root = doc.root();
//   if (const PickleNode* segs = doc.Find(root, "segments")) {
//     for (uint32_t id : segs->items) {
//       const PickleNode& seg = doc.node(id);
//       const PickleNode* size = doc.Find(seg, "total_size");
//       if (size && size->IsInt()) std::printf("segment of %lld bytes\n", (long long)size->i);
//     }
//   }
//
// Objects referenced twice (the pickle memo) are stored once and shared.
// Thread safety: a PickleDoc is immutable after reading.
#ifndef ANXIN_MEM_PICKLE_H_
#define ANXIN_MEM_PICKLE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::mem {

struct PickleNode {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // kList/kTuple: element ids; kDict: key, value, key, value, ...
  std::vector<uint32_t> items;

  bool IsInt() const { return kind == Kind::kInt || kind == Kind::kBool; }
  bool IsSequence() const { return kind == Kind::kList || kind == Kind::kTuple; }
};

class PickleDoc {
 public:
  const PickleNode& root() const { return nodes_[root_]; }
  const PickleNode& node(uint32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // The value of dict[key] for a string key; nullptr if absent or not a dict.
  const PickleNode* Find(const PickleNode& dict, std::string_view key) const;
  // Typed lookups with a fallback; ints accept bools.
  std::optional<int64_t> GetInt(const PickleNode& dict, std::string_view key) const;
  std::optional<std::string_view> GetString(const PickleNode& dict, std::string_view key) const;

 private:
  friend Result<PickleDoc> ParsePickle(std::string_view bytes);
  std::deque<PickleNode> nodes_;
  uint32_t root_ = 0;
};

// kDataLoss for truncated or corrupt input, kInvalidArgument for opcodes
// outside plain data.
Result<PickleDoc> ParsePickle(std::string_view bytes);
Result<PickleDoc> ReadPickleFile(const std::string& path);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_PICKLE_H_
