#include "anxin/mem/pickle.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "anxin/mem/context.h"

namespace anxin::mem {
namespace {

// Names of the opcodes this reader refuses, so that errors say what was met.
std::string_view OpcodeName(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x8e:
      return "BINBYTES8";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'F':
      return "FLOAT";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'p':
      return "PUT";
    case 'g':
      return "GET";
    default:
      return "unknown";
  }
}

class Parser {
 public:
  Parser(std::string_view in, std::deque<PickleNode>& nodes) : in_(in), nodes_(nodes) {}

  Result<uint32_t> Run() {
    while (true) {
      if (pos_ >= in_.size()) return Truncated("an opcode");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.empty()) return Corrupt(at, "STOP with an empty stack");
        return stack_.back();
      }
      ANXIN_TRY(Step(op, at));
    }
  }

 private:
  // One opcode (all but STOP), read at offset `at`.
  Status Step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80:
      case 0x95:
      case 0x94:
      case 'q':
      case 'r':
      case 'h':
      case 'j':
      case '(':
      case '0':
      case '1':
      case '2':
        return StackOp(op, at);
      case '}':
      case ']':
      case ')':
      case 'N':
      case 0x88:
      case 0x89:
      case 'J':
      case 'K':
      case 'M':
      case 0x8a:
      case 0x8b:
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'G':
        return ValueOp(op, at);
      case 't':
      case 'l':
      case 0x85:
      case 0x86:
      case 0x87:
      case 'd':
      case 's':
      case 'u':
      case 'a':
      case 'e':
        return ContainerOp(op, at);
      default:
        return InvalidArgument(fmt::format(
            "pickle opcode {} ({:#04x}) at offset {} is not plain data; only dict, list, "
            "tuple, str, int, float, bool and None can be read (is this a PyTorch memory "
            "snapshot?)",
            OpcodeName(op), op, at));
    }
  }

  // The protocol and framing, the memo, marks and plain stack moves.
  Status StackOp(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        ANXIN_ASSIGN_OR_RETURN(uint64_t v, Uint(1));
        if (v < 2 || v > 5) {
          return InvalidArgument(
              fmt::format("pickle protocol {} at offset {} is not supported (2 to 5 are)", v, at));
        }
        break;
      }
      case 0x95:  // FRAME: framing only; the payload follows inline.
        ANXIN_TRY(Uint(8));
        break;
      case 0x94:  // MEMOIZE
        if (stack_.empty()) return Corrupt(at, "MEMOIZE with an empty stack");
        memo_[memo_.size()] = stack_.back();
        break;
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT
        ANXIN_ASSIGN_OR_RETURN(uint64_t idx, Uint(op == 'q' ? 1 : 4));
        if (stack_.empty()) return Corrupt(at, "PUT with an empty stack");
        memo_[idx] = stack_.back();
        break;
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        ANXIN_ASSIGN_OR_RETURN(uint64_t idx, Uint(op == 'h' ? 1 : 4));
        auto it = memo_.find(idx);
        if (it == memo_.end()) return Corrupt(at, fmt::format("GET of unknown memo {}", idx));
        stack_.push_back(it->second);
        break;
      }
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '0':  // POP
        if (stack_.empty()) return Corrupt(at, "POP with an empty stack");
        stack_.pop_back();
        break;
      case '1': {  // POP_MARK
        ANXIN_ASSIGN_OR_RETURN(size_t m, PopMark(at));
        stack_.resize(m);
        break;
      }
      case '2':  // DUP
        if (stack_.empty()) return Corrupt(at, "DUP with an empty stack");
        stack_.push_back(stack_.back());
        break;
    }
    return Ok();
  }

  // Pushes one value: an empty container, None, a bool, an int, a string or
  // a float.
  Status ValueOp(uint8_t op, size_t at) {
    switch (op) {
      case '}':
        Push(PickleNode::Kind::kDict);
        break;
      case ']':
        Push(PickleNode::Kind::kList);
        break;
      case ')':
        Push(PickleNode::Kind::kTuple);
        break;
      case 'N':
        Push(PickleNode::Kind::kNone);
        break;
      case 0x88:
      case 0x89: {
        uint32_t id = Push(PickleNode::Kind::kBool);
        nodes_[id].b = op == 0x88;
        nodes_[id].i = op == 0x88;
        break;
      }
      case 'J': {
        ANXIN_ASSIGN_OR_RETURN(uint64_t v, Uint(4));
        PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
        break;
      }
      case 'K': {
        ANXIN_ASSIGN_OR_RETURN(uint64_t v, Uint(1));
        PushInt(static_cast<int64_t>(v));
        break;
      }
      case 'M': {
        ANXIN_ASSIGN_OR_RETURN(uint64_t v, Uint(2));
        PushInt(static_cast<int64_t>(v));
        break;
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4: little-endian two's complement
        ANXIN_ASSIGN_OR_RETURN(uint64_t n, Uint(op == 0x8a ? 1 : 4));
        if (n > 8) {
          return InvalidArgument(fmt::format(
              "pickle integer of {} bytes at offset {} does not fit in 64 bits", n, at));
        }
        ANXIN_ASSIGN_OR_RETURN(uint64_t v, Uint(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        PushInt(static_cast<int64_t>(v));
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        ANXIN_ASSIGN_OR_RETURN(uint64_t n, Uint(op == 0x8c ? 1 : op == 'X' ? 4 : 8));
        if (n > in_.size() - pos_) return Truncated("a string");
        uint32_t id = Push(PickleNode::Kind::kString);
        nodes_[id].s.assign(in_.substr(pos_, n));
        pos_ += n;
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE 754
        ANXIN_ASSIGN_OR_RETURN(uint64_t bits, UintBigEndian(8));
        uint32_t id = Push(PickleNode::Kind::kFloat);
        nodes_[id].f = std::bit_cast<double>(bits);
        break;
      }
    }
    return Ok();
  }

  // Builds a tuple, list or dict from the stack, or adds items to one.
  Status ContainerOp(uint8_t op, size_t at) {
    switch (op) {
      case 't':
      case 'l': {  // TUPLE, LIST from the mark
        ANXIN_ASSIGN_OR_RETURN(size_t m, PopMark(at));
        std::vector<uint32_t> items(stack_.begin() + static_cast<long>(m), stack_.end());
        stack_.resize(m);
        uint32_t id = Push(op == 't' ? PickleNode::Kind::kTuple : PickleNode::Kind::kList);
        nodes_[id].items = std::move(items);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        size_t n = op - 0x84u;
        if (stack_.size() < n) return Corrupt(at, "TUPLE with too few items");
        std::vector<uint32_t> items(stack_.end() - static_cast<long>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        uint32_t id = Push(PickleNode::Kind::kTuple);
        nodes_[id].items = std::move(items);
        break;
      }
      case 'd': {  // DICT from the mark
        ANXIN_ASSIGN_OR_RETURN(size_t m, PopMark(at));
        if ((stack_.size() - m) % 2) return Corrupt(at, "DICT with an odd number of items");
        std::vector<uint32_t> items(stack_.begin() + static_cast<long>(m), stack_.end());
        stack_.resize(m);
        uint32_t id = Push(PickleNode::Kind::kDict);
        nodes_[id].items = std::move(items);
        break;
      }
      case 's': {  // SETITEM
        if (stack_.size() < 3) return Corrupt(at, "SETITEM with too few items");
        uint32_t target = stack_[stack_.size() - 3];
        if (nodes_[target].kind != PickleNode::Kind::kDict) {
          return Corrupt(at, "SETITEM on something that is not a dict");
        }
        nodes_[target].items.push_back(stack_[stack_.size() - 2]);
        nodes_[target].items.push_back(stack_.back());
        stack_.resize(stack_.size() - 2);
        break;
      }
      case 'u':
      case 'a':
      case 'e': {  // SETITEMS, APPEND, APPENDS
        size_t first = 0;
        if (op == 'a') {
          if (stack_.size() < 2) return Corrupt(at, "APPEND with too few items");
          first = stack_.size() - 1;
        } else {
          ANXIN_ASSIGN_OR_RETURN(first, PopMark(at));
          if (first == 0) return Corrupt(at, "no container below the mark");
        }
        uint32_t target = stack_[first - 1];
        auto want = op == 'u' ? PickleNode::Kind::kDict : PickleNode::Kind::kList;
        if (nodes_[target].kind != want) {
          return Corrupt(at, op == 'u' ? "SETITEMS on something that is not a dict"
                                       : "APPEND on something that is not a list");
        }
        if (op == 'u' && (stack_.size() - first) % 2) {
          return Corrupt(at, "SETITEMS with an odd number of items");
        }
        auto& items = nodes_[target].items;
        items.insert(items.end(), stack_.begin() + static_cast<long>(first), stack_.end());
        stack_.resize(first);
        break;
      }
    }
    return Ok();
  }
  uint32_t Push(PickleNode::Kind kind) {
    uint32_t id = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back().kind = kind;
    stack_.push_back(id);
    return id;
  }
  void PushInt(int64_t v) {
    uint32_t id = Push(PickleNode::Kind::kInt);
    nodes_[id].i = v;
  }
  Result<uint64_t> Uint(uint64_t n) {
    if (n > in_.size() - pos_) return Truncated("an argument");
    uint64_t v = 0;
    for (uint64_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(in_[pos_ + k])} << (8 * k);
    pos_ += n;
    return v;
  }
  Result<uint64_t> UintBigEndian(uint64_t n) {
    if (n > in_.size() - pos_) return Truncated("an argument");
    uint64_t v = 0;
    for (uint64_t k = 0; k < n; ++k) v = v << 8 | static_cast<uint8_t>(in_[pos_ + k]);
    pos_ += n;
    return v;
  }
  Result<size_t> PopMark(size_t at) {
    if (marks_.empty() || marks_.back() > stack_.size()) {
      return Corrupt(at, "no MARK for this opcode");
    }
    size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  std::unexpected<Error> Truncated(std::string_view what) const {
    return DataLoss(
        fmt::format("pickle ends at offset {} while reading {}: the file is "
                    "truncated; copy it again",
                    in_.size(), what));
  }
  std::unexpected<Error> Corrupt(size_t at, std::string_view what) const {
    return DataLoss(fmt::format("corrupt pickle at offset {}: {}", at, what));
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::deque<PickleNode>& nodes_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

}  // namespace

const PickleNode* PickleDoc::Find(const PickleNode& dict, std::string_view key) const {
  if (dict.kind != PickleNode::Kind::kDict) return nullptr;
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const PickleNode& kn = nodes_[dict.items[k]];
    if (kn.kind == PickleNode::Kind::kString && kn.s == key) return &nodes_[dict.items[k + 1]];
  }
  return nullptr;
}

std::optional<int64_t> PickleDoc::GetInt(const PickleNode& dict, std::string_view key) const {
  const PickleNode* n = Find(dict, key);
  if (!n || !n->IsInt()) return std::nullopt;
  return n->i;
}

std::optional<std::string_view> PickleDoc::GetString(const PickleNode& dict,
                                                     std::string_view key) const {
  const PickleNode* n = Find(dict, key);
  if (!n || n->kind != PickleNode::Kind::kString) return std::nullopt;
  return n->s;
}

Result<PickleDoc> ParsePickle(std::string_view bytes) {
  PickleDoc doc;
  Parser parser(bytes, doc.nodes_);
  ANXIN_ASSIGN_OR_RETURN(doc.root_, parser.Run());
  return doc;
}

Result<PickleDoc> ReadPickleFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::unexpected(ErrnoError(errno, "open " + path));
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string bytes = std::move(ss).str();
  return WithContext(ParsePickle(bytes), "reading " + path);
}

}  // namespace anxin::mem
