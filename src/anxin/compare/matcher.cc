#include "anxin/compare/matcher.h"

#include <fmt/format.h>

#include <cctype>
#include <deque>
#include <unordered_map>

#include "anxin/base/config.h"

namespace anxin::compare {
namespace {

bool IsNumber(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

std::string FuzzyKey(const std::string& name) {
  std::vector<std::string> parts = Split(name);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] != "forward" && parts[i] != "backward" && parts[i] != "parameters_grad") continue;
    // Module.<path>.<Class>.forward.<index>: the index follows; APIs
    // (Functional.conv2d.<index>.forward) put it before.
    if ((parts[0] == "Module" || parts[i] == "parameters_grad") && i + 1 < parts.size() &&
        IsNumber(parts[i + 1])) {
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    } else if (parts[0] != "Module" && i > 0 && IsNumber(parts[i - 1])) {
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) - 1);
    }
    break;
  }
  std::string key;
  for (size_t i = 0; i < parts.size(); ++i) key += (i ? "." : "") + parts[i];
  return key;
}

namespace {

Result<std::vector<std::pair<std::string, std::string>>> RenamesFrom(const ConfigNode& root) {
  std::vector<std::pair<std::string, std::string>> out;
  if (root.IsNull()) return out;
  if (!root.IsMap())
    return std::unexpected(
        root.MakeError("expected a mapping of 'out name: ref name', got " + root.DescribeKind()));
  ANXIN_ASSIGN_OR_RETURN(auto entries, root.Entries());
  for (const auto& [from, to] : entries) {
    if (from.empty() || !to.IsScalar())
      return std::unexpected(
          to.MakeError("each entry must be 'out name: ref name', got " + to.DescribeKind()));
    out.emplace_back(from, to.ScalarText());
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> ParseRenames(std::string_view text,
                                                                      const std::string& source) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse(text, source));
  return RenamesFrom(root);
}

Result<std::vector<std::pair<std::string, std::string>>> LoadRenames(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  return RenamesFrom(root);
}

MatchResult MatchTensors(const std::vector<Tensor>& out, const std::vector<Tensor>& ref,
                         const MatchOptions& options) {
  auto key_of = [&](const std::string& name, bool is_out) {
    std::string n = name;
    if (is_out) {
      for (const auto& [from, to] : options.renames) {
        size_t pos = n.find(from);
        if (pos != std::string::npos) {
          n.replace(pos, from.size(), to);
          break;
        }
      }
    }
    return options.fuzzy ? FuzzyKey(n) : n;
  };
  // Key -> reference indices in order; fuzzy mode consumes them front first.
  std::unordered_map<std::string, std::deque<size_t>> by_key;
  for (size_t i = 0; i < ref.size(); ++i) by_key[key_of(ref[i].name, false)].push_back(i);
  MatchResult r;
  std::vector<bool> used(ref.size(), false);
  for (size_t i = 0; i < out.size(); ++i) {
    auto it = by_key.find(key_of(out[i].name, true));
    if (it == by_key.end() || it->second.empty()) {
      r.unmatched_out.push_back(i);
      continue;
    }
    size_t j = it->second.front();
    it->second.pop_front();
    used[j] = true;
    r.pairs.emplace_back(i, j);
  }
  for (size_t j = 0; j < ref.size(); ++j)
    if (!used[j]) r.unmatched_ref.push_back(j);
  return r;
}

}  // namespace anxin::compare
