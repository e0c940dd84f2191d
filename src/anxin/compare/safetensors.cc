#include "anxin/compare/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace anxin::compare {

Result<std::vector<Tensor>> ParseSafetensors(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  auto b = file->bytes();
  if (b.size() < 8) return Corrupt(path, b.size(), "truncated: no 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | b[i];
  if (header_len > b.size() - 8)
    return Corrupt(path, b.size(),
                   fmt::format("truncated: JSON header of {} bytes runs past the end", header_len));
  std::string_view text(reinterpret_cast<const char*>(b.data() + 8), header_len);
  nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return Corrupt(path, 8, "the header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = b.size() - data_start;
  std::vector<Tensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const auto& e = it.value();
    auto bad = [&](std::string what) { return Corrupt(path, 8, "tensor '" + name + "': " + what); };
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return bad("needs dtype, shape and data_offsets [begin, end]");
    std::string dt = e["dtype"].get<std::string>();
    auto dtype = ParseDTypeName(dt);
    if (!dtype)
      return InvalidArgument(
          fmt::format("{}: tensor '{}': dtype {} is not supported", path, name, dt));
    Tensor t;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) return bad("shape holds a non-integer");
      t.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d.get<uint64_t>(), 1ull << 62)));
    }
    const auto& offs = e["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      return bad("data_offsets are not integers");
    uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    auto count = CheckedElementCount(t.shape);
    if (!count) return bad(count.error().message());
    if (end < begin) return bad("data_offsets end before they begin");
    unsigned __int128 need = static_cast<unsigned __int128>(*count) * DTypeSize(*dtype);
    if (need != end - begin)
      return bad(fmt::format("shape {} of {} needs {} bytes but data_offsets span {}",
                             ShapeString(t.shape), dt, static_cast<uint64_t>(need), end - begin));
    if (end > data_size)
      return Corrupt(path, b.size(),
                     fmt::format("truncated: tensor '{}' ends at offset {} but the file has {}",
                                 name, data_start + end, b.size()));
    t.name = name;
    t.source = path;
    t.dtype = dtype;
    t.dtype_label = dt;
    t.data = b.data() + data_start + begin;
    t.data_offset = data_start + begin;
    t.mapped = file->mapped();
    if (t.mapped) t.mapping = file->bytes();
    t.keep_alive = file;
    out.push_back(std::move(t));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Tensor& a, const Tensor& b) { return a.data_offset < b.data_offset; });
  return out;
}

Result<std::vector<Tensor>> ReadSafetensorsFile(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  auto ts = ParseSafetensors(file);
  file->ReleasePages();
  return ts;
}

}  // namespace anxin::compare
