#include "anxin/mem/alloc_config.h"

#include <fmt/format.h>

#include <cmath>

#include "anxin/base/config.h"
#include "anxin/base/strings.h"
#include "anxin/mem/context.h"

namespace anxin::mem {
namespace {

Result<double> ParseNumber(std::string_view key, std::string_view v) {
  std::optional<double> d = ParseDouble(v);
  if (!d) return InvalidArgument(fmt::format("{}: expected a number, got '{}'", key, v));
  return *d;
}

Result<bool> ParseBool(std::string_view key, std::string_view v) {
  if (v == "true" || v == "1" || v == "on" || v == "True") return true;
  if (v == "false" || v == "0" || v == "off" || v == "False") return false;
  return InvalidArgument(fmt::format("{}: expected true or false, got '{}'", key, v));
}

}  // namespace

Result<AllocConf> ParseAllocConf(std::string_view text) {
  AllocConf conf;
  constexpr std::string_view kKnown =
      "provider, pool_size, block_size, expand, fragment_threshold, small_size, sim_capacity, "
      "sim_virtual, sim_backed";
  while (!Trim(text).empty()) {
    size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(fmt::format("'{}' is not key:value (known keys: {})", item, kKnown));
    }
    std::string_view key = Trim(item.substr(0, colon));
    std::string_view value = Trim(item.substr(colon + 1));
    auto bytes = [&]() -> Result<uint64_t> {
      return WithContext(ParseBytes(value), std::string(key));
    };
    if (key == "provider") {
      if (value != "sim" && value != "cuda" && value != "acl") {
        return InvalidArgument(
            fmt::format("provider: unknown provider '{}' (use sim, cuda or acl)", value));
      }
      conf.provider = std::string(value);
    } else if (key == "pool_size") {
      // A bare number up to 1 is a fraction of device memory; anything else is bytes.
      auto frac = ParseNumber(key, value);
      if (frac && *frac > 0 && *frac <= 1) {
        conf.options.pool_fraction = *frac;
        conf.options.pool_bytes = 0;
      } else {
        ANXIN_ASSIGN_OR_RETURN(conf.options.pool_bytes, bytes());
        if (conf.options.pool_bytes == 0) {
          return InvalidArgument("pool_size: must be a fraction in (0, 1] or a positive size");
        }
      }
    } else if (key == "block_size") {
      ANXIN_ASSIGN_OR_RETURN(conf.options.block_size, bytes());
    } else if (key == "small_size") {
      ANXIN_ASSIGN_OR_RETURN(conf.options.small_size, bytes());
    } else if (key == "expand") {
      ANXIN_ASSIGN_OR_RETURN(conf.options.expand, ParseBool(key, value));
    } else if (key == "fragment_threshold") {
      ANXIN_ASSIGN_OR_RETURN(double t, ParseNumber(key, value));
      if (t < 0 || t > 1) {
        return InvalidArgument(fmt::format("fragment_threshold: {} is outside [0, 1]", value));
      }
      conf.options.fragment_threshold = t;
    } else if (key == "sim_capacity") {
      ANXIN_ASSIGN_OR_RETURN(conf.sim.capacity, bytes());
    } else if (key == "sim_virtual") {
      ANXIN_ASSIGN_OR_RETURN(conf.sim.virtual_memory, ParseBool(key, value));
    } else if (key == "sim_backed") {
      ANXIN_ASSIGN_OR_RETURN(conf.sim.backed, ParseBool(key, value));
    } else {
      return InvalidArgument(fmt::format("unknown key '{}' (known keys: {})", key, kKnown));
    }
  }
  return conf;
}

Result<std::unique_ptr<Provider>> MakeProvider(const AllocConf& conf, int device) {
  if (conf.provider == "sim") return MakeSimProvider(conf.sim);
  if (conf.provider == "cuda") return MakeCudaProvider(device);
  if (conf.provider == "acl") return MakeAclProvider(device);
  return InvalidArgument(
      fmt::format("unknown provider '{}' (use sim, cuda or acl)", conf.provider));
}

}  // namespace anxin::mem
