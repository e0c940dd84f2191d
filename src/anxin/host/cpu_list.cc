#include "anxin/host/cpu_list.h"

#include <algorithm>

#include "anxin/base/strings.h"

namespace anxin::host {

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  text = Trim(text);
  if (text.empty()) return cpus;
  for (std::string_view part : Split(text, ',')) {
    part = Trim(part);
    size_t dash = part.find('-');
    auto lo = ParseInt(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : ParseInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > 65535) {
      return InvalidArgument("bad CPU list '" + std::string(text) + "' at '" + std::string(part) +
                             "' (expected e.g. 0-3,8)");
    }
    for (int64_t c = *lo; c <= *hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace anxin::host
