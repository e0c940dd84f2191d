#include "anxin/kv/kv_format.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <vector>

namespace anxin::kv {

int KvFormat::ElementBits() const {
  switch (dtype) {
    case KvDType::kFp16:
      return 16;
    case KvDType::kInt8:
      return 8;
    case KvDType::kInt4:
      return 4;
  }
  return 16;
}

int KvFormat::ParamsPerGroup() const {
  if (!quantized()) return 0;
  return scheme == KvScheme::kSymmetric ? 1 : 2;
}

double KvFormat::BitsPerValue() const {
  return ElementBits() + 16.0 * ParamsPerGroup() / group_size;
}

std::string KvFormat::Name() const {
  std::string name = dtype == KvDType::kFp16 ? "fp16" : dtype == KvDType::kInt8 ? "int8" : "int4";
  if (!quantized()) return name;
  if (scheme == KvScheme::kAsymmetric) name += "-asym";
  if (key_axis == KeyAxis::kPerChannel) name += ":kivi";
  if (group_size != 32) name += fmt::format(":g{}", group_size);
  return name;
}

Result<KvFormat> ParseKvFormat(std::string_view text) {
  static constexpr std::string_view kChoices =
      "use fp16, int8, int8-asym, int4 or int4-asym, optionally with :gN (group size) and "
      ":kivi (keys per channel), e.g. int4-asym:kivi:g64";
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  KvFormat f;
  std::string_view base = parts[0];
  if (base == "fp16" || base == "f16" || base == "float16") {
    f.dtype = KvDType::kFp16;
  } else if (base == "int8" || base == "int8-sym") {
    f.dtype = KvDType::kInt8;
  } else if (base == "int8-asym") {
    f.dtype = KvDType::kInt8;
    f.scheme = KvScheme::kAsymmetric;
  } else if (base == "int4" || base == "int4-sym" || base == "q4_0") {
    f.dtype = KvDType::kInt4;
  } else if (base == "int4-asym" || base == "q4_1") {
    f.dtype = KvDType::kInt4;
    f.scheme = KvScheme::kAsymmetric;
  } else {
    return InvalidArgument(fmt::format("unknown KV format '{}': {}", text, kChoices));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view p = parts[i];
    if (p == "kivi") {
      f.key_axis = KeyAxis::kPerChannel;
    } else if (p.size() > 1 && p[0] == 'g') {
      int g = 0;
      auto [end, ec] = std::from_chars(p.data() + 1, p.data() + p.size(), g);
      if (ec != std::errc() || end != p.data() + p.size() || g < 16 || g > 4096 || g % 16 != 0) {
        return InvalidArgument(fmt::format(
            "KV format '{}': group size '{}' must be a multiple of 16 between 16 and 4096", text,
            p.substr(1)));
      }
      f.group_size = g;
    } else {
      return InvalidArgument(
          fmt::format("KV format '{}': unknown option '{}': {}", text, p, kChoices));
    }
  }
  if (!f.quantized() && parts.size() > 1) {
    return InvalidArgument(
        fmt::format("KV format '{}': fp16 takes no options (group size and :kivi apply to int8 "
                    "and int4)",
                    text));
  }
  return f;
}

double BytesPerToken(const ModelKvShape& shape, const KvFormat& format) {
  return 2.0 * shape.layers * shape.kv_heads * shape.head_dim * format.BitsPerValue() / 8.0;
}

Status ValidateKvLayout(const KvFormat& format, int head_dim, int block_tokens) {
  if (head_dim <= 0 || head_dim % 16 != 0) {
    return InvalidArgument(
        fmt::format("head dimension {} must be a positive multiple of 16", head_dim));
  }
  if (block_tokens <= 0) {
    return InvalidArgument(fmt::format("block size {} tokens must be positive", block_tokens));
  }
  if (!format.quantized()) return Ok();
  if (head_dim % format.group_size != 0) {
    return InvalidArgument(fmt::format(
        "KV format {}: group size {} does not divide head dimension {}; pick a group size that "
        "does (e.g. :g{})",
        format.Name(), format.group_size, head_dim, head_dim % 32 == 0 ? 32 : 16));
  }
  if (format.key_axis == KeyAxis::kPerChannel && block_tokens % format.group_size != 0) {
    return InvalidArgument(fmt::format(
        "KV format {}: per-channel key groups of {} tokens must divide the block size of {} "
        "tokens",
        format.Name(), format.group_size, block_tokens));
  }
  return Ok();
}

Result<std::vector<KvFormat>> ParseKvFormatList(std::string_view names) {
  std::vector<KvFormat> formats;
  std::stringstream ss{std::string(names)};
  std::string item;
  while (std::getline(ss, item, ',')) {
    ANXIN_ASSIGN_OR_RETURN(KvFormat f, ParseKvFormat(item));
    formats.push_back(f);
  }
  return formats;
}

}  // namespace anxin::kv
