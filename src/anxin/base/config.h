// Configuration files: YAML read into typed structs with validation, where
// every problem names the place it comes from.
//
// A ConfigNode is one node of a YAML document that remembers its source file,
// line, column and key path, so each error reads
// "file:line:col: key.path: problem" (code kInvalidArgument):
//
//   const std::string path = "scenario.yaml";
//   ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
//   ANXIN_TRY(root.CheckKeys({"seed", "devices"}));
//   ANXIN_ASSIGN_OR_RETURN(uint64_t seed, root.Get<uint64_t>("seed", 1));
//   ANXIN_ASSIGN_OR_RETURN(auto devices, root.Child("devices"));
//   ANXIN_ASSIGN_OR_RETURN(auto list, devices.Elements());
//   for (const ConfigNode& d : list) {
//     ANXIN_TRY(d.CheckKeys({"model", "count", "hbm"}));
//     ANXIN_ASSIGN_OR_RETURN(int count, d.GetInRange<int>("count", 1, 64, 1));
//     ANXIN_ASSIGN_OR_RETURN(auto hbm, d.Child("hbm"));
//     ANXIN_ASSIGN_OR_RETURN(uint64_t hbm_bytes, hbm.AsBytes());   // "64GiB"
//   }
//   // e.g. "scenario.yaml:7:5: devices[2]: unknown key 'modle' (known: model, count, hbm)"
//
// Supported T for As/Get: bool, int, unsigned, int64_t, uint64_t, double,
// std::string, and std::vector of each of those. GetInRange: the numeric ones.
// A null node (an empty file, or `key:` with no value) reads as an empty map
// for lookups, and Get(key, default) treats a null value as absent.
//
// Thread safety: a ConfigNode is an immutable value; distinct copies may be
// used from different threads, and one object may be read concurrently.
#ifndef ANXIN_BASE_CONFIG_H_
#define ANXIN_BASE_CONFIG_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "anxin/base/error.h"

namespace anxin {

class ConfigNode {
 public:
  // Missing file -> kNotFound; unreadable -> the errno code; a directory or a
  // file with nothing in it -> kInvalidArgument; YAML syntax ->
  // kInvalidArgument "file:line:col: YAML syntax error: ...". Duplicate keys in
  // a map are rejected as well (YAML allows them silently, people never mean them).
  static Result<ConfigNode> LoadFile(const std::string& path);
  // source_name is what errors print in place of a file name.
  static Result<ConfigNode> Parse(std::string_view yaml, std::string source_name);

  bool IsMap() const;
  bool IsSequence() const;
  bool IsScalar() const;
  bool IsNull() const;
  // The scalar text as written (without quotes); "" for other kinds.
  const std::string& ScalarText() const;
  // "a map", "a list", "a scalar 'x'", "nothing (null)": for error messages.
  std::string DescribeKind() const;

  // REQUIRES map (or null). Unknown key ->
  // "f:l:c: devices[2]: unknown key 'modle' (known: model, count)", pointing at the key.
  Status CheckKeys(std::initializer_list<std::string_view> known) const;
  Status CheckKeys(const std::vector<std::string_view>& known) const;
  bool Has(std::string_view key) const;
  // Missing -> "f:l:c: devices[2]: missing required key 'model'".
  Result<ConfigNode> Child(std::string_view key) const;
  std::optional<ConfigNode> Find(std::string_view key) const;
  // Elements of a sequence, with paths "events[3]". A null node has none.
  Result<std::vector<ConfigNode>> Elements() const;
  // Entries of a map, in file order.
  Result<std::vector<std::pair<std::string, ConfigNode>>> Entries() const;

  // Scalars. Wrong type -> "f:l:c: a.b: expected an integer, got 'abc'".
  template <typename T>
  Result<T> As() const;
  // Required key.
  template <typename T>
  Result<T> Get(std::string_view key) const;
  // Optional key: default_value when absent or null.
  template <typename T>
  Result<T> Get(std::string_view key, T default_value) const;
  // Range-checked (inclusive): "f:l:c: a.b: 150 is out of range [0, 100]".
  template <typename T>
  Result<T> GetInRange(std::string_view key, T lo, T hi) const;
  template <typename T>
  Result<T> GetInRange(std::string_view key, T lo, T hi, T default_value) const;

  // A size in bytes: 1024, "64GiB", "512MiB", "2M", "1.5GiB", "64 KiB".
  // Units (case-insensitive): B; KiB MiB GiB TiB PiB and the bare K M G T P
  // (powers of 1024). kB MB GB TB PB are refused with a hint (ParseBytes).
  Result<uint64_t> AsBytes() const;
  // A duration in seconds: 3, 2.5, "250ms", "30s", "5m", "1h". Units: ns, us,
  // ms, s, m (or min), h, d. Negative durations are rejected.
  Result<double> AsSeconds() const;
  // Keyed forms of the two above; the second returns default_value when absent.
  Result<uint64_t> GetBytes(std::string_view key) const;
  Result<uint64_t> GetBytes(std::string_view key, uint64_t default_value) const;
  Result<double> GetSeconds(std::string_view key) const;
  Result<double> GetSeconds(std::string_view key, double default_value) const;

  // kInvalidArgument with the "f:l:c: path: " prefix (no path part at the root).
  Error MakeError(std::string problem) const;
  // "devices[2].model"; "" for the root.
  const std::string& path() const { return path_; }
  // 1-based position of this node in its source.
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& source() const;

  // Implementation details (the parsed YAML and how nodes are made); config.cc.
  struct Rep;
  friend struct ConfigNodeAccess;

 private:
  ConfigNode(std::shared_ptr<const Rep> rep, std::string path, int line, int column);

  std::shared_ptr<const Rep> rep_;
  std::string path_;
  int line_ = 1;
  int column_ = 1;
};

// The parsers behind AsBytes and AsSeconds, for flags and environment
// variables. Errors are kInvalidArgument messages without a position, e.g.
// "expected a size like 512MiB or 64GiB, got '12XB'".
//
// Sizes have one meaning everywhere: KiB..PiB and the bare K..P are powers
// of 1024. "80GB" is refused, naming both readings ("write 80GiB for
// 85899345920 bytes, or 80000000000"): a device sold as 80 GB has 80 GiB,
// while GB means 10^9 elsewhere, and a size must never be read as the other.
Result<uint64_t> ParseBytes(std::string_view text);
Result<double> ParseSeconds(std::string_view text);

}  // namespace anxin

#endif  // ANXIN_BASE_CONFIG_H_
