#include "anxin/compare/dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anxin/base/file.h"
#include "anxin/compare/npz.h"
#include "anxin/compare/safetensors.h"

namespace anxin::compare {
namespace fs = std::filesystem;
namespace {

using ojson = nlohmann::ordered_json;

std::unexpected<Error> PtRejected(const std::string& path) {
  return InvalidArgument(
      path +
      ": PyTorch pickle files are not read directly (unpickling runs arbitrary code and the "
      "storage layout changes between torch versions); convert once with torch installed: "
      "python3 -c \"import sys,torch,numpy as np; t=torch.load(sys.argv[1],map_location='cpu',"
      "weights_only=True); np.save(sys.argv[1]+'.npy', t.float().numpy() if "
      "t.dtype==torch.bfloat16 "
      "else t.numpy())\" FILE.pt  (see docs/compare.md for bfloat16 and whole dump directories)");
}

bool IsTensorLeaf(const ojson& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return false;
  std::string type = j["type"].get<std::string>();
  return type.ends_with("Tensor") || type == "numpy.ndarray" || type.ends_with("Parameter");
}

std::optional<double> Number(const ojson& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  const auto& v = j[key];
  if (v.is_number()) return v.get<double>();
  // msprobe writes "inf", "-inf", "nan" as strings for non-finite statistics.
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

// Python's json module writes non-finite floats as the bare tokens NaN,
// Infinity and -Infinity, which JSON does not have (and which an overflow
// run's statistics are full of). Returns a copy of text with each such token
// outside strings quoted ("NaN", which Number reads), or nullopt when there
// is none: the usual case costs one search.
std::optional<std::string> QuoteNonFinite(std::string_view text) {
  if (text.find("NaN") == std::string_view::npos && text.find("Infinity") == std::string_view::npos)
    return std::nullopt;
  std::string out;
  out.reserve(text.size() + 64);
  bool in_string = false, changed = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    std::string_view rest = text.substr(i);
    std::string_view token;
    for (std::string_view t : {"NaN", "Infinity", "-Infinity"})
      if (rest.starts_with(t)) token = t;
    if (!token.empty()) {
      out += '"';
      out += token;
      out += '"';
      i += token.size() - 1;
      changed = true;
      continue;
    }
    out += c;
  }
  if (!changed) return std::nullopt;
  return out;
}

struct Flattener {
  const std::string& path;
  const std::string& data_dir;
  const LoadOptions& options;
  Dump& dump;

  Status Leaf(const std::string& op, const std::string& name, const ojson& j) {
    Tensor t;
    t.name = name;
    t.op = op;
    t.source = path;
    if (j.contains("dtype") && j["dtype"].is_string()) {
      t.dtype_label = j["dtype"].get<std::string>();
      t.dtype = ParseDTypeName(t.dtype_label);
    }
    if (j.contains("shape") && j["shape"].is_array()) {
      for (const auto& d : j["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          return InvalidArgument(fmt::format("{}: {}: shape holds a non-integer", path, name));
        t.shape.push_back(d.get<int64_t>());
      }
    }
    auto mx = Number(j, "Max"), mn = Number(j, "Min"), mean = Number(j, "Mean"),
         norm = Number(j, "Norm");
    if (mx && mn && mean && norm) t.stats = TensorStats{*mx, *mn, *mean, *norm};
    if (!data_dir.empty() && j.contains("data_name") && j["data_name"].is_string()) {
      std::string file = (fs::path(data_dir) / j["data_name"].get<std::string>()).string();
      if (file.ends_with(".pt")) return PtRejected(file);
      NpyOptions npy = options.npy;
      // dump.json says what the raw <V2 elements are.
      if (t.dtype && (*t.dtype == DType::kBFloat16 || *t.dtype == DType::kFloat8E4M3 ||
                      *t.dtype == DType::kFloat8E5M2))
        npy.void_as = *t.dtype;
      Result<Tensor> read = ReadNpyFile(file, npy);
      if (!read && read.error().code() == ErrorCode::kNotFound) {
        // A dump copied in part: the pair is compared on the statistics in
        // dump.json and says so, rather than failing the whole comparison.
        t.missing_file = file;
        dump.tensors.push_back(std::move(t));
        return Ok();
      }
      if (!read) return std::unexpected(read.error());
      Tensor data = std::move(*read);
      data.name = t.name;
      data.op = t.op;
      data.stats = t.stats;
      t = std::move(data);
    }
    dump.tensors.push_back(std::move(t));
    return Ok();
  }

  // Arguments nest a few levels (lists of tuples of tensors); a corrupt or
  // hostile file can nest millions, which would exhaust the stack.
  static constexpr int kMaxDepth = 64;

  Status Walk(const std::string& op, const std::string& name, const ojson& j, int depth = 0) {
    if (j.is_null()) return Ok();
    if (IsTensorLeaf(j)) return Leaf(op, name, j);
    if ((j.is_array() || j.is_object()) && depth == kMaxDepth)
      return DataLoss(
          fmt::format("{}: {}: arguments nested more than {} levels deep (corrupt "
                      "dump.json?)",
                      path, name, kMaxDepth));
    if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i)
        ANXIN_TRY(Walk(op, name + "." + std::to_string(i), j[i], depth + 1));
    } else if (j.is_object() && !j.contains("type")) {
      for (auto it = j.begin(); it != j.end(); ++it)
        ANXIN_TRY(Walk(op, name + "." + it.key(), it.value(), depth + 1));
    }
    // Other leaves (ints, slices, strings) carry no tensor.
    return Ok();
  }
};

// "model-00001-of-00004" -> "model": the shards of one checkpoint (Hugging
// Face's naming) share a prefix, so that tensors match whatever the number of
// shards on each side. Anything else is kept.
std::string WithoutShardSuffix(const std::string& stem) {
  auto digits_back = [&](size_t end) {  // start of the digit run ending at end
    size_t b = end;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(stem[b - 1]))) --b;
    return b;
  };
  const size_t total = digits_back(stem.size());
  if (total == stem.size() || total < 4 || stem.compare(total - 4, 4, "-of-") != 0) return stem;
  const size_t index = digits_back(total - 4);
  if (index == total - 4 || index < 2 || stem[index - 1] != '-') return stem;
  return stem.substr(0, index - 1);
}

Status AddTensorFile(const fs::path& file, const std::string& prefix, const LoadOptions& options,
                     Dump& dump) {
  std::string ext = file.extension().string();
  std::string p = file.string();
  if (ext == ".npy") {
    ANXIN_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(p, options.npy));
    t.name = prefix.empty() ? file.stem().string() : prefix;
    t.op = t.name;
    dump.tensors.push_back(std::move(t));
  } else if (ext == ".npz" || ext == ".safetensors") {
    std::vector<Tensor> ts;
    if (ext == ".npz") {
      ANXIN_ASSIGN_OR_RETURN(ts, ReadNpzFile(p, options.npy));
    } else {
      ANXIN_ASSIGN_OR_RETURN(ts, ReadSafetensorsFile(p));
    }
    const std::string base = WithoutShardSuffix(prefix);
    for (Tensor& t : ts) {
      if (!base.empty()) t.name = base + "/" + t.name;
      t.op = t.name;
      dump.tensors.push_back(std::move(t));
    }
  } else if (ext == ".pt" || ext == ".pth") {
    return PtRejected(p);
  }
  return Ok();
}

}  // namespace

Result<std::map<std::string, std::vector<std::string>>> ParseMsprobeStacks(
    std::string_view text, const std::string& path) {
  ojson j = ojson::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return DataLoss(path + ": not a JSON object (truncated or corrupt stack.json)");
  std::map<std::string, std::vector<std::string>> out;
  auto lines = [](const ojson& a) {
    std::vector<std::string> v;
    if (a.is_array())
      for (const auto& s : a)
        if (s.is_string()) v.push_back(s.get<std::string>());
    return v;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (v.is_array() && v.size() == 2 && v[0].is_array() && v[1].is_array()) {
      auto stack = lines(v[1]);
      for (const auto& n : v[0])
        if (n.is_string()) out[n.get<std::string>()] = stack;
    } else if (v.is_array()) {
      out[it.key()] = lines(v);
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseMsprobeConstruct(std::string_view text,
                                                                 const std::string& path) {
  ojson j = ojson::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return DataLoss(path + ": not a JSON object (truncated or corrupt construct.json)");
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_string())
      out[it.key()] = it.value().get<std::string>();
    else if (it.value().is_null())
      out[it.key()] = "";
  }
  return out;
}

std::vector<std::string> EnclosingModules(const Dump& d, const std::string& op) {
  std::vector<std::string> chain;
  std::string at = op;
  for (size_t level = 0; level < 256; ++level) {
    auto it = d.parents.find(at);
    if (it == d.parents.end() || it->second.empty() || it->second == op) break;
    if (std::find(chain.begin(), chain.end(), it->second) != chain.end()) break;
    chain.push_back(it->second);
    at = it->second;
  }
  return chain;
}

Result<Dump> ParseMsprobeDump(std::string_view text, const std::string& path,
                              const std::string& data_dir, const LoadOptions& options) {
  Dump dump;
  dump.path = path;
  dump.kind = "msprobe";
  Flattener f{path, data_dir, options, dump};
  Status status = Ok();
  // Each op under "data" is flattened as soon as the parser has it and then
  // dropped from the document, so memory does not grow with the dump.
  std::string top_key, op;
  bool in_data = false;
  auto each = [&](int depth, ojson::parse_event_t event, ojson& parsed) {
    using E = ojson::parse_event_t;
    if (depth == 1 && event == E::key) {
      top_key = parsed.get<std::string>();
    } else if (depth == 1 && event == E::object_start) {
      in_data = top_key == "data";
    } else if (depth == 1 && event == E::object_end) {
      in_data = false;
    } else if (in_data && depth == 2 && event == E::key) {
      op = parsed.get<std::string>();
    } else if (in_data && depth == 2 && (event == E::object_end || event == E::value)) {
      if (!status || !parsed.is_object()) return false;
      for (auto field = parsed.begin(); field != parsed.end() && status; ++field) {
        std::string key = field.key();
        // msprobe's compare names forward arguments and keyword arguments "input".
        if (key == "input_args" || key == "input_kwargs") key = "input";
        status = f.Walk(op, op + "." + key, field.value());
      }
      return false;
    }
    return true;
  };
  const std::optional<std::string> quoted = QuoteNonFinite(text);
  if (quoted) text = *quoted;
  ojson j;
  try {
    j = ojson::parse(text, each, true);
  } catch (const ojson::parse_error& e) {
    // The offset (from 0) of the byte the parser stopped at, the size for a
    // cut file; in the text with NaN and Infinity quoted when it had them
    // (two bytes further per token before it).
    return DataLoss(
        fmt::format("{}: offset {}: not valid JSON (truncated or corrupt dump.json): {}", path,
                    e.byte ? e.byte - 1 : 0, e.what()));
  } catch (const ojson::exception& e) {
    return DataLoss(fmt::format("{}: not valid JSON (corrupt dump.json): {}", path, e.what()));
  }
  if (j.is_discarded()) return DataLoss(path + ": not valid JSON (truncated or corrupt dump.json)");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_object())
    return InvalidArgument(path + ": no \"data\" object: is this an msprobe dump.json?");
  if (!status) return std::unexpected(status.error());
  if (j.contains("task") && j["task"].is_string()) dump.task = j["task"].get<std::string>();
  return dump;
}

// Path order with runs of digits compared as numbers: rank2 before rank10.
static bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      // Without leading zeros, a longer run is a larger number.
      std::string_view x(a.data() + i, ie - i), y(b.data() + j, je - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// A directory holding msprobe dumps below it (a step directory: rank0/,
// rank1/, ...): each is loaded and its names are prefixed with its path from
// dir ("rank1/Functional.conv2d.0.forward.input.0"), so that two steps or two
// runs match rank by rank. The dumps follow each other in path order, numbers
// by value (rank2 before rank10).
static Result<Dump> LoadDumpTree(const fs::path& dir, std::vector<fs::path> dumps,
                                 const LoadOptions& options) {
  std::sort(dumps.begin(), dumps.end(), [](const fs::path& a, const fs::path& b) {
    return NaturalLess(a.string(), b.string());
  });
  Dump d;
  d.path = dir.string();
  d.kind = "msprobe";
  for (const auto& sub : dumps) {
    ANXIN_ASSIGN_OR_RETURN(Dump one, LoadDump(sub.string(), options));
    const std::string prefix = fs::relative(sub, dir).string() + "/";
    if (d.task.empty()) d.task = one.task;
    for (Tensor& t : one.tensors) {
      t.name = prefix + t.name;
      t.op = prefix + t.op;
      d.tensors.push_back(std::move(t));
    }
    for (auto& [op, stack] : one.stacks) d.stacks[prefix + op] = std::move(stack);
    for (auto& [op, parent] : one.parents)
      d.parents[prefix + op] = parent.empty() ? std::string() : prefix + parent;
  }
  return d;
}

Result<Dump> LoadDump(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return NotFound(path + ": no such file or directory");
  if (fs::is_directory(st)) {
    fs::path dir(path);
    if (fs::exists(dir / "dump.json")) {
      std::string dj = (dir / "dump.json").string();
      // Parsed straight from the mapping (no copy), which is dropped after.
      ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(dj));
      auto b = file->bytes();
      std::string data_dir = (dir / "dump_tensor_data").string();
      ANXIN_ASSIGN_OR_RETURN(
          Dump d,
          ParseMsprobeDump(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), dj,
                           data_dir, options));
      file.reset();
      d.path = path;
      if (fs::exists(dir / "stack.json")) {
        std::string sj = (dir / "stack.json").string();
        ANXIN_ASSIGN_OR_RETURN(std::string stext, ReadFile(sj));
        ANXIN_ASSIGN_OR_RETURN(d.stacks, ParseMsprobeStacks(stext, sj));
      }
      if (fs::exists(dir / "construct.json")) {
        std::string cj = (dir / "construct.json").string();
        ANXIN_ASSIGN_OR_RETURN(std::string ctext, ReadFile(cj));
        ANXIN_ASSIGN_OR_RETURN(d.parents, ParseMsprobeConstruct(ctext, cj));
      }
      return d;
    }
    Dump d;
    d.path = path;
    d.kind = "directory";
    std::vector<fs::path> files, dumps;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_directory(ec) && fs::exists(it->path() / "dump.json", ec)) {
        dumps.push_back(it->path());  // an msprobe dump: its files are its own
        it.disable_recursion_pending();
      } else if (it->is_regular_file(ec)) {
        files.push_back(it->path());
      }
    }
    if (ec) return std::unexpected(ErrnoError(ec.value(), "list " + path));
    if (!dumps.empty()) return LoadDumpTree(dir, std::move(dumps), options);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string rel = fs::relative(f, dir).string();
      std::string ext = f.extension().string();
      if (ext == ".npy")
        rel.resize(rel.size() - 4);
      else if (ext == ".npz")
        rel.resize(rel.size() - 4);
      else if (ext == ".safetensors")
        rel.resize(rel.size() - 12);
      ANXIN_TRY(AddTensorFile(f, rel, options, d));
    }
    if (d.tensors.empty())
      return InvalidArgument(path +
                             ": no tensor files (.npy, .npz, .safetensors) and no dump.json");
    return d;
  }
  fs::path f(path);
  std::string ext = f.extension().string();
  if (ext != ".npy" && ext != ".npz" && ext != ".safetensors" && ext != ".pt" && ext != ".pth")
    return InvalidArgument(path +
                           ": unknown file type (expected .npy, .npz, .safetensors, or a "
                           "dump directory)");
  Dump d;
  d.path = path;
  d.kind = ext.substr(1);
  ANXIN_TRY(AddTensorFile(f, "", options, d));
  return d;
}

}  // namespace anxin::compare
