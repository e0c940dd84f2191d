#include "anxin/cli/flag_checks.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "anxin/base/config.h"

namespace anxin::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRangePrefix = "anxin-range ";
constexpr std::string_view kBytesPrefix = "anxin-bytes ";

std::string Num(double v) { return fmt::format("{:.15g}", v); }

// What a value must be, e.g. "from 0 to 65535" or "at least 1".
std::string Requirement(const FlagRange& r) {
  if (r.min_exclusive) {
    return std::isinf(r.max) ? "above " + Num(r.min)
                             : fmt::format("above {} and at most {}", Num(r.min), Num(r.max));
  }
  if (std::isinf(r.min)) return "at most " + Num(r.max);
  if (std::isinf(r.max)) return "at least " + Num(r.min);
  return fmt::format("from {} to {}", Num(r.min), Num(r.max));
}

CLI::Validator RangeValidator(FlagRange r) {
  // The range rides in the validator's name so that DeclaredRange can read it
  // back from the option alone.
  std::string name =
      fmt::format("{}{:.17g} {:.17g} {}", kRangePrefix, r.min, r.max, r.min_exclusive ? 1 : 0);
  std::string requirement = Requirement(r);
  CLI::Validator v(
      [r, requirement](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long double value = std::strtold(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) {
          return fmt::format("must be a number {}, got '{}'", requirement, text);
        }
        if (!std::isfinite(value)) {
          return fmt::format("must be a finite number {}, got '{}'", requirement, text);
        }
        const bool below = r.min_exclusive ? !(value > r.min) : value < r.min;
        if (below || value > r.max) return fmt::format("must be {}, got {}", requirement, text);
        return std::string();
      },
      requirement, name);
  return v;
}

// The first of the option's validators whose name starts with `prefix`.
const CLI::Validator* ValidatorNamed(CLI::Option& option, std::string_view prefix) {
  for (int i = 0;; ++i) {
    try {
      const CLI::Validator* v = option.get_validator(i);
      if (v->get_name().starts_with(prefix)) return v;
    } catch (const CLI::OptionNotFound&) {
      return nullptr;
    }
  }
}

}  // namespace

CLI::Validator InRange(double min, double max) { return RangeValidator({min, max, false}); }
CLI::Validator AtLeast(double min) { return RangeValidator({min, kNoLimit, false}); }
CLI::Validator Above(double min) { return RangeValidator({min, kNoLimit, true}); }
CLI::Validator Share() { return RangeValidator({0, 1, true}); }
CLI::Validator PortNumber() { return InRange(0, 65535); }

CLI::Validator Bytes(uint64_t min_bytes) {
  std::string name = fmt::format("{}{}", kBytesPrefix, min_bytes);
  std::string description = min_bytes > 0 ? fmt::format("size >= {}", min_bytes) : "size";
  return CLI::Validator(
      [min_bytes](std::string& text) -> std::string {
        auto bytes = ParseBytes(text);
        if (!bytes) return bytes.error().message();
        if (*bytes < min_bytes) {
          return fmt::format("must be at least {} byte{}, e.g. 80GiB, got '{}'", min_bytes,
                             min_bytes == 1 ? "" : "s", text);
        }
        return std::string();
      },
      description, name);
}

Status RequireDirectory(const std::string& path, const std::string& origin) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  const std::string from = origin.empty() ? "" : origin + ": ";
  if (ec || !fs::exists(status)) {
    return NotFound(fmt::format("{}no such directory '{}'", from, path));
  }
  if (!fs::is_directory(status)) {
    return InvalidArgument(fmt::format("{}'{}' is a file, not a directory", from, path));
  }
  return Ok();
}

CLI::Validator ExistingDirectory() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto s = RequireDirectory(text, "");
        return s ? std::string() : s.error().message();
      },
      "DIR", "anxin-directory");
}

std::optional<FlagRange> DeclaredRange(CLI::Option& option) {
  const CLI::Validator* v = ValidatorNamed(option, kRangePrefix);
  if (v == nullptr) return std::nullopt;
  FlagRange r;
  int exclusive = 0;
  if (std::sscanf(v->get_name().c_str() + kRangePrefix.size(), "%lf %lf %d", &r.min, &r.max,
                  &exclusive) != 3) {
    return std::nullopt;
  }
  r.min_exclusive = exclusive != 0;
  return r;
}

std::optional<uint64_t> DeclaredMinBytes(CLI::Option& option) {
  const CLI::Validator* v = ValidatorNamed(option, kBytesPrefix);
  if (v == nullptr) return std::nullopt;
  return std::strtoull(v->get_name().c_str() + kBytesPrefix.size(), nullptr, 10);
}

bool TakesNumber(const CLI::Option& option) {
  if (option.get_items_expected_max() == 0) return false;  // a flag
  std::string type = option.get_type_name();
  type = type.substr(0, type.find(':'));
  return type == "INT" || type == "UINT" || type == "FLOAT" || type == "NUMBER";
}

}  // namespace anxin::cli
