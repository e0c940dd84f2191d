#include "anxin/base/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin {

struct ConfigNode::Rep {
  YAML::Node node;
  std::shared_ptr<const std::string> source;
};

// Makes nodes; a friend so that the helpers below can use the private constructor.
struct ConfigNodeAccess {
  static ConfigNode Make(const YAML::Node& node, std::shared_ptr<const std::string> source,
                         std::string path, int line, int column) {
    auto rep = std::make_shared<ConfigNode::Rep>(ConfigNode::Rep{node, std::move(source)});
    return ConfigNode(std::move(rep), std::move(path), line, column);
  }
  static const YAML::Node& Yaml(const ConfigNode& n) { return n.rep_->node; }
  static const std::shared_ptr<const std::string>& Source(const ConfigNode& n) {
    return n.rep_->source;
  }
};

namespace {

std::string JoinKey(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out = parent;
  out += '.';
  out += key;
  return out;
}

std::string JoinIndex(const std::string& parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

// yaml-cpp marks are 0-based, and a null value (`key:` with nothing after it)
// carries the position of the next token, often on the following line; the
// key's own position is the one a person wants to see then.
std::pair<int, int> Position(const YAML::Mark& mark) {
  if (mark.line < 0 || mark.column < 0) return {1, 1};
  return {mark.line + 1, mark.column + 1};
}

std::pair<int, int> ValuePosition(const YAML::Node& key, const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return Position(key.Mark());
  return Position(value.Mark());
}

// Rejects duplicate keys anywhere in the document: yaml-cpp keeps them both
// and lookups would silently pick one.
Status CheckDuplicates(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (node.IsMap()) {
    std::map<std::string, int, std::less<>> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // it-> yields a temporary pair: copy the (cheap, shared) node handles.
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      auto [line, column] = Position(key.Mark());
      if (!key.IsScalar()) {
        return InvalidArgument(fmt::format("{}:{}:{}: {}{}keys must be plain words, got a {}",
                                           source, line, column, path, path.empty() ? "" : ": ",
                                           key.IsMap() ? "map" : "list"));
      }
      auto [pos, inserted] = seen.emplace(key.Scalar(), line);
      if (!inserted) {
        return InvalidArgument(fmt::format("{}:{}:{}: {}{}duplicate key '{}' (first at line {})",
                                           source, line, column, path, path.empty() ? "" : ": ",
                                           key.Scalar(), pos->second));
      }
      ANXIN_TRY(CheckDuplicates(value, JoinKey(path, key.Scalar()), source));
    }
  } else if (node.IsSequence()) {
    size_t i = 0;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node element = *it;
      ANXIN_TRY(CheckDuplicates(element, JoinIndex(path, i), source));
      ++i;
    }
  }
  return Ok();
}

// What a type is called in "expected X, got Y".
template <typename T>
struct TypeName;
template <>
struct TypeName<bool> {
  static constexpr const char* kName = "a boolean (true or false)";
  static constexpr const char* kPlural = "booleans";
};
template <>
struct TypeName<int> {
  static constexpr const char* kName = "an integer";
  static constexpr const char* kPlural = "integers";
};
template <>
struct TypeName<unsigned> {
  static constexpr const char* kName = "a non-negative integer";
  static constexpr const char* kPlural = "non-negative integers";
};
template <>
struct TypeName<int64_t> {
  static constexpr const char* kName = "an integer";
  static constexpr const char* kPlural = "integers";
};
template <>
struct TypeName<uint64_t> {
  static constexpr const char* kName = "a non-negative integer";
  static constexpr const char* kPlural = "non-negative integers";
};
template <>
struct TypeName<double> {
  static constexpr const char* kName = "a number";
  static constexpr const char* kPlural = "numbers";
};
template <>
struct TypeName<std::string> {
  static constexpr const char* kName = "a string";
  static constexpr const char* kPlural = "strings";
};

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Parses the whole of text as T; nullopt if it is not one. Integers accept an
// optional sign and a 0x prefix; "1.0" is not an integer.
template <typename T>
std::optional<T> ParseScalar(std::string_view text) {
  text = Trim(text);
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(text);
  } else if constexpr (std::is_same_v<T, bool>) {
    std::string l = ToLower(text);
    if (l == "true" || l == "yes" || l == "on") return true;
    if (l == "false" || l == "no" || l == "off") return false;
    return std::nullopt;
  } else if constexpr (std::is_integral_v<T>) {
    bool negative = false;
    if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
      negative = text.front() == '-';
      text.remove_prefix(1);
    }
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
      base = 16;
      text.remove_prefix(2);
    }
    if (text.empty()) return std::nullopt;
    uint64_t magnitude = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
    if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
    if (negative) {
      if constexpr (std::is_unsigned_v<T>) {
        if (magnitude != 0) return std::nullopt;
        return T{0};
      } else {
        if (magnitude > static_cast<uint64_t>(std::numeric_limits<T>::max()) + 1) {
          return std::nullopt;
        }
        return static_cast<T>(-static_cast<int64_t>(magnitude - 1) - 1);
      }
    }
    if (magnitude > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(magnitude);
  } else {
    static_assert(std::is_same_v<T, double>);
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    if (text.empty()) return std::nullopt;
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
      return std::nullopt;
    }
    return value;
  }
}

// Why text is not a T, when it might be one but does not fit.
template <typename T>
std::string ScalarProblem(std::string_view text) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // An integer that is too big or negative for an unsigned type reads
    // better with the limits spelled out.
    std::string_view t = Trim(text);
    if (ParseScalar<int64_t>(t) || ParseScalar<uint64_t>(t) ||
        (!t.empty() && t.find_first_not_of("+-0123456789") == std::string_view::npos)) {
      return fmt::format("expected {} in [{}, {}], got '{}'", TypeName<T>::kName,
                         std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), text);
    }
  }
  return fmt::format("expected {}, got '{}'", TypeName<T>::kName, text);
}

// Parses number+unit pairs ("1h30m", "250ms", "2.5 GiB") against a unit table.
struct Unit {
  std::string_view name;
  double factor;
};

std::optional<long double> ParseWithUnits(std::string_view text, std::initializer_list<Unit> units,
                                          bool allow_compound) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  long double total = 0;
  int parts = 0;
  bool last_had_unit = true;
  while (!text.empty()) {
    if (!last_had_unit) return std::nullopt;  // "5 3s"
    if (text.front() == '+') text.remove_prefix(1);
    if (text.empty() ||
        !(std::isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
      return std::nullopt;
    }
    // from_chars would read "1e" of "1ex" oddly; numbers here are digits,
    // an optional fraction and an optional exponent.
    double number = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (ec != std::errc() || !std::isfinite(number)) return std::nullopt;
    text.remove_prefix(static_cast<size_t>(ptr - text.data()));
    text = Trim(text);
    size_t letters = 0;
    while (letters < text.size() && std::isalpha(static_cast<unsigned char>(text[letters]))) {
      ++letters;
    }
    std::string unit = ToLower(text.substr(0, letters));
    text.remove_prefix(letters);
    text = Trim(text);
    if (unit.empty()) {
      last_had_unit = false;
      total += number;
    } else {
      const Unit* found = nullptr;
      for (const Unit& u : units) {
        if (ToLower(u.name) == unit) found = &u;
      }
      if (found == nullptr) return std::nullopt;
      total += static_cast<long double>(number) * found->factor;
    }
    ++parts;
    if (parts > 1 && (!allow_compound || !last_had_unit)) return std::nullopt;
  }
  return total;
}

}  // namespace

Result<uint64_t> ParseBytes(std::string_view text) {
  // Plain integers are exact; going through a double would round values
  // above 2^53.
  std::string_view digits = Trim(text);
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    if (auto exact = ParseScalar<uint64_t>(digits)) return *exact;
  }
  // One meaning everywhere (flags, configuration, ANXIN_ALLOC_CONF, scenario
  // files): KiB..PiB and the bare K, M, G, T, P are powers of 1024, as
  // nccl-tests, PyTorch, npu-smi and CANN's memory options write them.
  // kB..PB are refused: vendors print GiB-sized memory as "GB", while GB is
  // 10^9 elsewhere; the message names both readings.
  constexpr double kKi = 1024.0;
  auto value = ParseWithUnits(text,
                              {{"b", 1},
                               {"k", kKi},
                               {"kib", kKi},
                               {"m", kKi * kKi},
                               {"mib", kKi * kKi},
                               {"g", kKi * kKi * kKi},
                               {"gib", kKi * kKi * kKi},
                               {"t", kKi * kKi * kKi * kKi},
                               {"tib", kKi * kKi * kKi * kKi},
                               {"p", kKi * kKi * kKi * kKi * kKi},
                               {"pib", kKi * kKi * kKi * kKi * kKi}},
                              /*allow_compound=*/false);
  if (!value) {
    static constexpr struct {
      std::string_view decimal, shown, binary;
      double ki_factor, si_factor;
    } kAmbiguous[] = {{"kb", "kB", "KiB", kKi, 1e3},
                      {"mb", "MB", "MiB", kKi * kKi, 1e6},
                      {"gb", "GB", "GiB", kKi * kKi * kKi, 1e9},
                      {"tb", "TB", "TiB", kKi * kKi * kKi * kKi, 1e12},
                      {"pb", "PB", "PiB", kKi * kKi * kKi * kKi * kKi, 1e15}};
    const std::string lower = ToLower(Trim(text));
    for (const auto& u : kAmbiguous) {
      if (!lower.ends_with(u.decimal)) continue;
      std::string_view number = Trim(std::string_view(Trim(text)).substr(0, lower.size() - 2));
      auto n = ParseWithUnits(number, {}, /*allow_compound=*/false);
      if (!n) break;
      return InvalidArgument(fmt::format(
          "size '{}' is ambiguous: write {}{} for {:.0f} bytes (powers of 1024, what a device "
          "sold as \"{} {}\" has) or the byte count {:.0f} (powers of 1000)",
          text, number, u.binary, std::nearbyint(*n * u.ki_factor), number, u.shown,
          std::nearbyint(*n * u.si_factor)));
    }
  }
  if (!value) {
    return InvalidArgument(
        fmt::format("expected a size like 4096, 512MiB or 64GiB, got '{}'", text));
  }
  long double rounded = std::nearbyint(*value);
  if (rounded > static_cast<long double>(std::numeric_limits<uint64_t>::max())) {
    return InvalidArgument(fmt::format("size '{}' is larger than 16 EiB", text));
  }
  return static_cast<uint64_t>(rounded);
}

Result<double> ParseSeconds(std::string_view text) {
  auto value = ParseWithUnits(text,
                              {{"ns", 1e-9},
                               {"us", 1e-6},
                               {"ms", 1e-3},
                               {"s", 1},
                               {"m", 60},
                               {"min", 60},
                               {"h", 3600},
                               {"d", 86400}},
                              /*allow_compound=*/true);
  if (!value) {
    return InvalidArgument(
        fmt::format("expected a duration like 30, 2.5s, 250ms, 5m or 1h30m, got '{}'", text));
  }
  return static_cast<double>(*value);
}

ConfigNode::ConfigNode(std::shared_ptr<const Rep> rep, std::string path, int line, int column)
    : rep_(std::move(rep)), path_(std::move(path)), line_(line), column_(column) {}

Result<ConfigNode> ConfigNode::Parse(std::string_view yaml, std::string source_name) {
  auto source = std::make_shared<const std::string>(std::move(source_name));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    auto [line, column] = Position(e.mark);
    return InvalidArgument(
        fmt::format("{}:{}:{}: YAML syntax error: {}", *source, line, column, e.msg));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: YAML error: {}", *source, e.what()));
  }
  ANXIN_TRY(CheckDuplicates(root, "", *source));
  auto [line, column] = root.IsNull() ? std::pair{1, 1} : Position(root.Mark());
  return ConfigNodeAccess::Make(root, std::move(source), "", line, column);
}

Result<ConfigNode> ConfigNode::LoadFile(const std::string& path) {
  constexpr size_t kMaxConfigBytes = 16 << 20;
  ANXIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigBytes));
  // A file someone named that holds nothing is a mistake (a truncated copy, the
  // wrong path), not "all defaults"; a file of only comments is fine.
  if (Trim(text).empty()) return InvalidArgument(path + ": the file is empty");
  return Parse(text, path);
}

bool ConfigNode::IsMap() const { return rep_->node.IsMap(); }
bool ConfigNode::IsSequence() const { return rep_->node.IsSequence(); }
bool ConfigNode::IsScalar() const { return rep_->node.IsScalar(); }
bool ConfigNode::IsNull() const { return rep_->node.IsNull(); }
const std::string& ConfigNode::source() const { return *rep_->source; }

const std::string& ConfigNode::ScalarText() const {
  static const std::string kEmpty;
  return rep_->node.IsScalar() ? rep_->node.Scalar() : kEmpty;
}

std::string ConfigNode::DescribeKind() const {
  if (IsMap()) return "a map";
  if (IsSequence()) return "a list";
  if (IsScalar()) return fmt::format("'{}'", rep_->node.Scalar());
  return "nothing (null)";
}

Error ConfigNode::MakeError(std::string problem) const {
  if (path_.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{}:{}:{}: {}", source(), line_, column_, problem));
  }
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("{}:{}:{}: {}: {}", source(), line_, column_, path_, problem));
}

Status ConfigNode::CheckKeys(std::initializer_list<std::string_view> known) const {
  return CheckKeys(std::vector<std::string_view>(known));
}

Status ConfigNode::CheckKeys(const std::vector<std::string_view>& known) const {
  if (IsNull()) return Ok();
  if (!IsMap()) return std::unexpected(MakeError("expected a map, got " + DescribeKind()));
  for (auto it = rep_->node.begin(); it != rep_->node.end(); ++it) {
    const YAML::Node key_node = it->first;
    const std::string key = key_node.Scalar();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (ok) continue;
    auto [line, column] = Position(key_node.Mark());
    std::string list;
    for (std::string_view k : known) {
      if (!list.empty()) list += ", ";
      list += k;
    }
    ConfigNode at = ConfigNodeAccess::Make(rep_->node, rep_->source, path_, line, column);
    return std::unexpected(at.MakeError(
        fmt::format("unknown key '{}' (known: {})", key, list.empty() ? "none" : list)));
  }
  return Ok();
}

std::optional<ConfigNode> ConfigNode::Find(std::string_view key) const {
  if (!IsMap()) return std::nullopt;
  for (auto it = rep_->node.begin(); it != rep_->node.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    if (key_node.IsScalar() && key_node.Scalar() == key) {
      auto [line, column] = ValuePosition(key_node, value);
      return ConfigNodeAccess::Make(value, rep_->source, JoinKey(path_, key), line, column);
    }
  }
  return std::nullopt;
}

bool ConfigNode::Has(std::string_view key) const { return Find(key).has_value(); }

Result<ConfigNode> ConfigNode::Child(std::string_view key) const {
  if (!IsMap() && !IsNull()) {
    return std::unexpected(
        MakeError(fmt::format("expected a map with key '{}', got {}", key, DescribeKind())));
  }
  if (auto child = Find(key)) return *std::move(child);
  return std::unexpected(MakeError(fmt::format("missing required key '{}'", key)));
}

Result<std::vector<ConfigNode>> ConfigNode::Elements() const {
  std::vector<ConfigNode> out;
  if (IsNull()) return out;
  if (!IsSequence()) return std::unexpected(MakeError("expected a list, got " + DescribeKind()));
  size_t i = 0;
  for (auto it = rep_->node.begin(); it != rep_->node.end(); ++it) {
    const YAML::Node element = *it;
    auto [line, column] = Position(element.Mark());
    out.push_back(ConfigNodeAccess::Make(element, rep_->source, JoinIndex(path_, i), line, column));
    ++i;
  }
  return out;
}

Result<std::vector<std::pair<std::string, ConfigNode>>> ConfigNode::Entries() const {
  std::vector<std::pair<std::string, ConfigNode>> out;
  if (IsNull()) return out;
  if (!IsMap()) return std::unexpected(MakeError("expected a map, got " + DescribeKind()));
  for (auto it = rep_->node.begin(); it != rep_->node.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    const std::string key = key_node.Scalar();
    auto [line, column] = ValuePosition(key_node, value);
    out.emplace_back(
        key, ConfigNodeAccess::Make(value, rep_->source, JoinKey(path_, key), line, column));
  }
  return out;
}

template <typename T>
Result<T> ConfigNode::As() const {
  if constexpr (IsVector<T>::value) {
    using E = typename T::value_type;
    if (!IsSequence()) {
      return std::unexpected(MakeError(
          fmt::format("expected a list of {}, got {}", TypeName<E>::kPlural, DescribeKind())));
    }
    ANXIN_ASSIGN_OR_RETURN(auto elements, Elements());
    T out;
    out.reserve(elements.size());
    for (const ConfigNode& e : elements) {
      ANXIN_ASSIGN_OR_RETURN(E value, e.As<E>());
      out.push_back(std::move(value));
    }
    return out;
  } else {
    if (!IsScalar()) {
      return std::unexpected(
          MakeError(fmt::format("expected {}, got {}", TypeName<T>::kName, DescribeKind())));
    }
    const std::string& text = rep_->node.Scalar();
    if (auto value = ParseScalar<T>(text)) return *std::move(value);
    return std::unexpected(MakeError(ScalarProblem<T>(text)));
  }
}

template <typename T>
Result<T> ConfigNode::Get(std::string_view key) const {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  if (child.IsNull()) {
    return std::unexpected(child.MakeError(
        fmt::format("missing value (expected {})", IsVector<T>::value ? "a list" : "a value")));
  }
  return child.As<T>();
}

template <typename T>
Result<T> ConfigNode::Get(std::string_view key, T default_value) const {
  if (!IsMap() && !IsNull()) {
    return std::unexpected(
        MakeError(fmt::format("expected a map with key '{}', got {}", key, DescribeKind())));
  }
  std::optional<ConfigNode> child = Find(key);
  if (!child || child->IsNull()) return default_value;
  return child->As<T>();
}

namespace {
template <typename T>
Result<T> CheckRange(const ConfigNode& node, T value, T lo, T hi) {
  if (value < lo || value > hi) {
    return std::unexpected(
        node.MakeError(fmt::format("{} is out of range [{}, {}]", value, lo, hi)));
  }
  return value;
}
}  // namespace

template <typename T>
Result<T> ConfigNode::GetInRange(std::string_view key, T lo, T hi) const {
  ANXIN_ASSIGN_OR_RETURN(T value, Get<T>(key));
  ANXIN_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return CheckRange(child, value, lo, hi);
}

template <typename T>
Result<T> ConfigNode::GetInRange(std::string_view key, T lo, T hi, T default_value) const {
  ANXIN_ASSIGN_OR_RETURN(T value, Get<T>(key, default_value));
  std::optional<ConfigNode> child = Find(key);
  if (!child || child->IsNull()) return value;  // defaults are the caller's to keep in range
  return CheckRange(*child, value, lo, hi);
}

Result<uint64_t> ConfigNode::AsBytes() const {
  if (!IsScalar()) {
    return std::unexpected(
        MakeError("expected a size like 512MiB or 64GiB, got " + DescribeKind()));
  }
  auto value = ParseBytes(rep_->node.Scalar());
  if (!value) return std::unexpected(MakeError(value.error().message()));
  return *value;
}

Result<double> ConfigNode::AsSeconds() const {
  if (!IsScalar()) {
    return std::unexpected(MakeError("expected a duration like 30s or 5m, got " + DescribeKind()));
  }
  auto value = ParseSeconds(rep_->node.Scalar());
  if (!value) return std::unexpected(MakeError(value.error().message()));
  return *value;
}

Result<uint64_t> ConfigNode::GetBytes(std::string_view key) const {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsBytes();
}

Result<uint64_t> ConfigNode::GetBytes(std::string_view key, uint64_t default_value) const {
  std::optional<ConfigNode> child = Find(key);
  if (!child || child->IsNull()) return default_value;
  return child->AsBytes();
}

Result<double> ConfigNode::GetSeconds(std::string_view key) const {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  return child.AsSeconds();
}

Result<double> ConfigNode::GetSeconds(std::string_view key, double default_value) const {
  std::optional<ConfigNode> child = Find(key);
  if (!child || child->IsNull()) return default_value;
  return child->AsSeconds();
}

// The supported types (config.h); other types fail to link.
#define ANXIN_CONFIG_SCALAR(T)                                                             \
  template Result<T> ConfigNode::As<T>() const;                                            \
  template Result<T> ConfigNode::Get<T>(std::string_view) const;                           \
  template Result<T> ConfigNode::Get<T>(std::string_view, T) const;                        \
  template Result<std::vector<T>> ConfigNode::As<std::vector<T>>() const;                  \
  template Result<std::vector<T>> ConfigNode::Get<std::vector<T>>(std::string_view) const; \
  template Result<std::vector<T>> ConfigNode::Get<std::vector<T>>(std::string_view,        \
                                                                  std::vector<T>) const;
#define ANXIN_CONFIG_NUMBER(T)                                                \
  template Result<T> ConfigNode::GetInRange<T>(std::string_view, T, T) const; \
  template Result<T> ConfigNode::GetInRange<T>(std::string_view, T, T, T) const;

ANXIN_CONFIG_SCALAR(bool)
ANXIN_CONFIG_SCALAR(int)
ANXIN_CONFIG_SCALAR(unsigned)
ANXIN_CONFIG_SCALAR(int64_t)
ANXIN_CONFIG_SCALAR(uint64_t)
ANXIN_CONFIG_SCALAR(double)
ANXIN_CONFIG_SCALAR(std::string)
ANXIN_CONFIG_NUMBER(int)
ANXIN_CONFIG_NUMBER(unsigned)
ANXIN_CONFIG_NUMBER(int64_t)
ANXIN_CONFIG_NUMBER(uint64_t)
ANXIN_CONFIG_NUMBER(double)

#undef ANXIN_CONFIG_SCALAR
#undef ANXIN_CONFIG_NUMBER

}  // namespace anxin
