#include "anxin/compare/npy.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace anxin::compare {
namespace {

// A tiny parser for the Python literal dict in the header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& label, uint64_t base)
      : s_(text), label_(label), base_(base) {}

  struct Header {
    std::string descr;
    bool fortran = false;
    std::vector<int64_t> shape;
  };

  Result<Header> Parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    Skip();
    if (!Eat('{')) return Fail("header does not start with '{'");
    while (true) {
      Skip();
      if (Eat('}')) break;
      ANXIN_ASSIGN_OR_RETURN(std::string key, String());
      Skip();
      if (!Eat(':')) return Fail("expected ':' after key '" + key + "'");
      Skip();
      if (key == "descr") {
        if (Peek() != '\'' && Peek() != '"')
          return Fail("structured dtypes are not supported (descr is not a string)");
        ANXIN_ASSIGN_OR_RETURN(h.descr, String());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (s_.substr(pos_, 4) == "True") {
          h.fortran = true;
          pos_ += 4;
        } else if (s_.substr(pos_, 5) == "False") {
          pos_ += 5;
        } else {
          return Fail("fortran_order is neither True nor False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        if (!Eat('(')) return Fail("shape is not a tuple");
        while (true) {
          Skip();
          if (Eat(')')) break;
          if (!std::isdigit(static_cast<unsigned char>(Peek())))
            return Fail("shape holds a non-integer");
          int64_t v = 0;
          while (std::isdigit(static_cast<unsigned char>(Peek()))) {
            if (v > (int64_t{1} << 55)) return Fail("shape dimension too large");
            v = v * 10 + (s_[pos_++] - '0');
          }
          if (Peek() == 'L') ++pos_;
          h.shape.push_back(v);
          Skip();
          if (Eat(')')) break;
          if (!Eat(',')) return Fail("expected ',' in shape");
        }
        have_shape = true;
      } else {
        return Fail("unexpected key '" + key + "' in header");
      }
      Skip();
      if (Eat('}')) break;
      if (!Eat(',')) return Fail("expected ',' between header entries");
    }
    if (!have_descr || !have_fortran || !have_shape)
      return Fail("header lacks one of descr, fortran_order, shape");
    return h;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  Result<std::string> String() {
    char q = Peek();
    if (q != '\'' && q != '"') return Fail("expected a quoted string");
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Fail("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  std::unexpected<Error> Fail(std::string what) {
    return Corrupt(label_, base_ + pos_, "bad .npy header: " + what);
  }

  std::string_view s_;
  const std::string& label_;
  uint64_t base_;
  size_t pos_ = 0;
};

struct DescrResult {
  DType dtype;
  bool swap;
};

Result<DescrResult> ParseDescr(const std::string& descr, const std::string& label,
                               const NpyOptions& options) {
  if (descr.size() >= 2 && descr[1] == 'O')
    return InvalidArgument(fmt::format(
        "{}: dtype '{}' holds Python objects, which cannot be read safely: save a numeric array "
        "instead",
        label, descr));
  if (descr.size() < 3) return InvalidArgument(label + ": unsupported dtype '" + descr + "'");
  char order = descr[0];
  char kind = descr[1];
  int size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i])) || size > 100)
      return InvalidArgument(label + ": unsupported dtype '" + descr + "'");
    size = size * 10 + (descr[i] - '0');
  }
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return InvalidArgument(label + ": unsupported dtype '" + descr + "'");
  bool swap = order == '>' && size > 1;
  auto unsupported = [&](std::string why) -> std::unexpected<Error> {
    return InvalidArgument(fmt::format("{}: dtype '{}' {}", label, descr, why));
  };
  switch (kind) {
    case 'b':
      if (size == 1) return DescrResult{DType::kBool, false};
      break;
    case 'i':
      if (size == 1) return DescrResult{DType::kInt8, false};
      if (size == 2) return DescrResult{DType::kInt16, swap};
      if (size == 4) return DescrResult{DType::kInt32, swap};
      if (size == 8) return DescrResult{DType::kInt64, swap};
      break;
    case 'u':
      if (size == 1) return DescrResult{DType::kUInt8, false};
      if (size == 2) return DescrResult{DType::kUInt16, swap};
      if (size == 4) return DescrResult{DType::kUInt32, swap};
      if (size == 8) return DescrResult{DType::kUInt64, swap};
      break;
    case 'f':
      if (size == 2) return DescrResult{DType::kFloat16, swap};
      if (size == 4) return DescrResult{DType::kFloat32, swap};
      if (size == 8) return DescrResult{DType::kFloat64, swap};
      return unsupported("(extended precision) is not supported: save as float64");
    case 'c':
      return unsupported("is complex: compare real and imaginary parts as separate float tensors");
    case 'O':
      return unsupported(
          "holds Python objects, which cannot be read safely: save a numeric array instead");
    case 'V':
      if (options.void_as && DTypeSize(*options.void_as) == static_cast<size_t>(size))
        return DescrResult{*options.void_as, swap};
      if (size == 2)
        return unsupported(
            "holds raw 2-byte values (how ml_dtypes saves bfloat16): say what they are with "
            "--void-as bfloat16 or a sidecar file '<file>.dtype' containing 'bfloat16'");
      if (size == 1)
        return unsupported(
            "holds raw 1-byte values (how ml_dtypes saves fp8): say what they are with "
            "--void-as float8_e4m3fn|float8_e5m2 or a sidecar file '<file>.dtype'");
      break;
    default:
      break;
  }
  return unsupported("is not a supported numeric type");
}

// Where the header text of a .npy of size bytes lies, from b, the file's
// first bytes (at least 12, or all of a shorter file).
struct HeaderSpan {
  uint64_t start, len;
};
Result<HeaderSpan> LocateHeader(std::span<const uint8_t> b, uint64_t size,
                                const std::string& label) {
  static constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10) return Corrupt(label, size, "truncated: a .npy needs at least 10 bytes");
  if (std::memcmp(b.data(), kMagic, 6) != 0)
    return Corrupt(label, 0, "not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = b[6];
  uint64_t header_len, header_start;
  if (major == 1) {
    header_len = b[8] | (static_cast<uint64_t>(b[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return Corrupt(label, size, "truncated inside the header length");
    header_len = b[8] | (static_cast<uint64_t>(b[9]) << 8) | (static_cast<uint64_t>(b[10]) << 16) |
                 (static_cast<uint64_t>(b[11]) << 24);
    header_start = 12;
  } else {
    return Corrupt(label, 6, fmt::format("unsupported .npy format version {}", major));
  }
  if (header_start + header_len > size)
    return Corrupt(label, size,
                   fmt::format("truncated: header of {} bytes at offset {} runs past the end",
                               header_len, header_start));
  return HeaderSpan{header_start, header_len};
}

// Parses the header in head (at least the whole header) of a file of size
// bytes whose contents are owner->bytes() (or data, for archive members).
// sidecar: the file whose "PATH.dtype" says what raw void elements are, when
// options leave it open ("" for none); read only for such elements.
Result<Tensor> ParseWithHeader(std::shared_ptr<const MappedFile> owner, const uint8_t* data,
                               std::span<const uint8_t> head, uint64_t size,
                               const std::string& label, NpyOptions options,
                               const std::string& sidecar = "") {
  ANXIN_ASSIGN_OR_RETURN(HeaderSpan span, LocateHeader(head, size, label));
  const uint64_t header_start = span.start, header_len = span.len;
  if (header_start + header_len > head.size())
    return Corrupt(label, head.size(), "changed while being read (header cut short)");
  std::string_view text(reinterpret_cast<const char*>(head.data() + header_start), header_len);
  HeaderParser parser(text, label, header_start);
  ANXIN_ASSIGN_OR_RETURN(auto header, parser.Parse());
  if (!options.void_as && !sidecar.empty() && header.descr.size() > 1 && header.descr[1] == 'V') {
    ANXIN_ASSIGN_OR_RETURN(options.void_as, ReadDTypeSidecar(sidecar));
  }
  ANXIN_ASSIGN_OR_RETURN(auto descr, ParseDescr(header.descr, label, options));
  auto count = CheckedElementCount(header.shape);
  if (!count) return Corrupt(label, header_start, count.error().message());
  uint64_t data_start = header_start + header_len;
  unsigned __int128 need = static_cast<unsigned __int128>(*count) * DTypeSize(descr.dtype);
  if (need > size - data_start)
    return Corrupt(label, size,
                   fmt::format("truncated: shape {} of {} needs {} data bytes from offset {}, "
                               "but the file ends after {}",
                               ShapeString(header.shape), DTypeName(descr.dtype),
                               static_cast<uint64_t>(need), data_start, size - data_start));
  Tensor t;
  t.source = label;
  t.dtype = descr.dtype;
  t.dtype_label = header.descr;
  t.shape = std::move(header.shape);
  t.data = data + data_start;
  t.data_offset = data_start;
  t.swap_bytes = descr.swap;
  t.fortran_order = header.fortran;
  t.mapped = owner->mapped();
  if (t.mapped) t.mapping = owner->bytes();
  t.keep_alive = std::move(owner);
  return t;
}

}  // namespace

Result<Tensor> ParseNpy(std::shared_ptr<const MappedFile> owner, std::span<const uint8_t> b,
                        const std::string& label, const NpyOptions& options) {
  return ParseWithHeader(std::move(owner), b.data(), b, b.size(), label, options);
}

// Bytes read from the start of a file for its header (NumPy pads headers to
// 64 or 4096 bytes; longer ones are read in a second call).
constexpr uint64_t kHeadBytes = 4096;

Result<std::optional<DType>> ReadDTypeSidecar(const std::string& path) {
  std::string side = path + ".dtype";
  std::error_code ec;
  if (!std::filesystem::exists(side, ec)) return std::optional<DType>();
  std::ifstream in(side);
  std::string word;
  in >> word;
  auto dt = ParseDTypeName(word);
  if (!dt)
    return InvalidArgument(
        fmt::format("{}: unknown dtype '{}' (use bfloat16, float16, float8_e4m3fn or float8_e5m2)",
                    side, word));
  return std::optional<DType>(*dt);
}

Result<Tensor> ReadNpyFile(const std::string& path, const NpyOptions& options) {
  // The header is read with pread and the data mapped untouched, so opening
  // thousands of files maps no pages (and leaves none to release).
  std::vector<uint8_t> head;
  ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path, kHeadBytes, &head));
  const uint64_t size = file->bytes().size();
  if (auto span = LocateHeader(head, size, path); span && span->start + span->len > head.size()) {
    // A header longer than the first read (rare): taken from the mapping; its
    // pages go with the first 2 MiB block of the data when that is released.
    const uint8_t* b = file->bytes().data();
    head.assign(b, b + span->start + span->len);
  }
  // The sidecar is looked for only when the elements are raw voids.
  return ParseWithHeader(file, file->bytes().data(), head, size, path, options, path);
}

}  // namespace anxin::compare
