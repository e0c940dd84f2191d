// Checks on flag values, declared where a flag is declared, so that a value
// out of range is refused before a command runs, with the flag named and
// what is wrong with the value:
//
//   #include "anxin/cli/flag_checks.h"
//
//   CLI::App app;
//   int port = 8000, np = 0;
//   double cosine = 0;
//   std::string memory, root;
//   app.add_option("--port", port, "port")->check(anxin::cli::PortNumber());
//   app.add_option("--np", np, "ranks")->check(anxin::cli::AtLeast(1));
//   app.add_option("--min-cosine", cosine, "threshold")->check(anxin::cli::InRange(-1, 1));
//   app.add_option("--device-memory", memory, "size")->check(anxin::cli::Bytes(1));
//   app.add_option("--root", root, "tree")->check(anxin::cli::ExistingDirectory());
//   // anxin x --port 70000  ->  error: --port: must be from 0 to 65535, got 70000
//   // anxin x --np 0        ->  error: --np: must be at least 1, got 0
//
// Every option that takes a number declares its range with InRange, AtLeast,
// Above or PortNumber: tests/cli/flag_sweep_test.cc walks every command's
// options, fails on a numeric option without one, and tries values outside
// each declared range (DeclaredRange reads it back).
//
// Thread safety: the validators are values; CLI11 runs them while parsing.
#ifndef ANXIN_CLI_FLAG_CHECKS_H_
#define ANXIN_CLI_FLAG_CHECKS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "anxin/base/error.h"

namespace anxin::cli {

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// The numbers a flag takes: [min, max], or (min, max] when min_exclusive.
struct FlagRange {
  double min = -kNoLimit;
  double max = kNoLimit;
  bool min_exclusive = false;
};

// min <= value <= max ("must be from 0 to 65535, got 70000"; with max
// kNoLimit, "must be at least 0").
CLI::Validator InRange(double min, double max);
// value >= min ("must be at least 1, got 0").
CLI::Validator AtLeast(double min);
// value > min ("must be above 0, got 0").
CLI::Validator Above(double min);
// A share of something: above 0 and at most 1.
CLI::Validator Share();
// A TCP port to listen on: 0 (any free one) to 65535.
CLI::Validator PortNumber();

// A size that base's ParseBytes reads, at least min_bytes (ParseBytes' own
// message for what it cannot read, e.g. the ambiguous "80GB").
CLI::Validator Bytes(uint64_t min_bytes);

// A directory that exists ("no such directory '/x'", "'/x' is a file, not a
// directory").
CLI::Validator ExistingDirectory();
// The same as a Status, for a directory that comes from elsewhere (the
// configuration, a default): kNotFound / kInvalidArgument naming origin.
[[nodiscard]] Status RequireDirectory(const std::string& path, const std::string& origin);

// The range an option declared with the validators above; nullopt when it
// declared none.
std::optional<FlagRange> DeclaredRange(CLI::Option& option);
// The smallest size a Bytes() option takes; nullopt when it has no Bytes().
std::optional<uint64_t> DeclaredMinBytes(CLI::Option& option);
// Whether CLI11 reads the option's values as numbers (INT, UINT, FLOAT).
bool TakesNumber(const CLI::Option& option);

}  // namespace anxin::cli

#endif  // ANXIN_CLI_FLAG_CHECKS_H_
